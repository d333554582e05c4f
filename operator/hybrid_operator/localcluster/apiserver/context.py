"""What every handler reaches through the aiohttp application: the object API and the server's settings."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from hybrid_operator.localcluster.apiserver.audit import AuditLog
from hybrid_operator.localcluster.semantics.crud import ObjectApi


@dataclass(frozen=True)
class ServerConfig:
    """What the routes need to know about the server they run in."""

    token: str
    address: str
    bookmark_interval: float = 30.0
    audit: AuditLog | None = None
    #: KEP-5866 ``shardSelector`` on LIST and WATCH; off: the parameter is ignored, as by an older server
    sharded_list_watch: bool = True
    #: kube-apiserver's --min-request-timeout: a watch without timeoutSeconds lasts 1 to 2 times this many seconds
    min_request_timeout: float = 1800.0


API_KEY: web.AppKey[ObjectApi] = web.AppKey("api", ObjectApi)
CONFIG_KEY: web.AppKey[ServerConfig] = web.AppKey("config", ServerConfig)


def api_of(request: web.Request) -> ObjectApi:
    return request.app[API_KEY]


def config_of(request: web.Request) -> ServerConfig:
    return request.app[CONFIG_KEY]

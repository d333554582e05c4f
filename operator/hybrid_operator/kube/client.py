"""The operator's access to the Kubernetes API: the ONLY module importing ``kubernetes``.

Everything the reconciler needs from the cluster goes through
:class:`ClusterClient`: reading the current object, one merge patch of
``/status``, adding and removing finalizers with a resourceVersion
precondition, posting Events, finding a kind's plural and scope by discovery,
server-side apply and delete of arbitrary objects (Helm drift repair), and
writing the kubeconfig Ansible and helm runs use.  Calls are synchronous (the
kubernetes client is); callers run them off the event loop.

A call that cannot reach the API server at all (refused, reset, timed out) raises
:class:`hybrid_operator.errors.Unreachable`. The outage is logged here, once when it starts ("API
server unreachable") and once when a call succeeds again ("API server reachable again"), so the
callers, which only retry, do not log every attempt.
"""

from __future__ import annotations

import base64
import builtins
import json
import logging
import os
import ssl
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from hybrid_operator import __version__, clock, errors
from hybrid_operator.kube import objects
from hybrid_operator.kube.connection import Connection
from hybrid_operator.kube.events import EventCorrelator, Posted
from hybrid_operator.kube.streams import json_lines

log = logging.getLogger(__name__)
# urllib3 warns on every connection retry; an outage is logged once here instead (Outage)
logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
JSON = "application/json"
#: kube-apiserver refuses request bodies above 3 MiB, so no stored object is larger
MAX_OBJECT_BYTES = 3 * 1024 * 1024
#: the longest watch event line read: an object's JSON may be larger than the body that stored it
#: (defaults, managedFields), so twice the largest object; a longer line ends the watch with an error
MAX_WATCH_LINE = 2 * MAX_OBJECT_BYTES


@dataclass(frozen=True)
class ResourceRef:
    """Where a kind lives in the API."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    has_status: bool

    def path(self, namespace: str, name: str = "", sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name:
            path = f"{path}/{name}"
        if sub:
            path = f"{path}/{sub}"
        return path


class Outage:
    """Whether the API server is unreachable now; logs the start and the end of each outage once."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._since: float | None = None
        self._lock = threading.Lock()

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, error: str) -> None:
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
        log.warning("API server unreachable", extra={"server": self.server, "error": error})

    def answered(self) -> None:
        if self._since is None:
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            log.info("API server reachable again", extra={"server": self.server,
                                                           "outage_seconds": round(time.monotonic() - since, 1)})


class ClusterClient:
    """Thin, typed access to the API server through the kubernetes client."""

    def __init__(self, kubeconfig: Path | None, user_agent: str = f"hybrid-operator/{__version__}",
                 temp_dir: Path | None = None) -> None:
        """``temp_dir``: where the kubernetes client writes the CA and client key data of the kubeconfig
        (default: the system's temporary directory); it removes them only at a normal exit."""
        self.kubeconfig = kubeconfig
        configuration = kubernetes.client.Configuration()
        try:
            if kubeconfig is not None:
                kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=str(kubeconfig), client_configuration=configuration,
                    temp_file_path=str(temp_dir) if temp_dir is not None else None)
            else:
                kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration)
        except (kubernetes.config.ConfigException, OSError) as exc:
            where = str(kubeconfig) if kubeconfig else "the in-cluster service account"
            raise errors.ConfigurationError(
                f"cannot load Kubernetes credentials from {where}: {exc}; pass --kubeconfig or set KUBECONFIG"
            ) from exc
        self.configuration = configuration
        self._api = kubernetes.client.ApiClient(configuration)
        self._api.user_agent = user_agent
        self._refs: dict[tuple[str, str, str], ResourceRef] = {}
        self._lock = threading.Lock()
        self.outage = Outage(str(configuration.host))
        self.events = EventCorrelator()

    # -- raw calls ---------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, content_type: str = JSON,
                query: list[tuple[str, str]] | None = None, timeout: float = 60) -> Any:
        """One API call; returns the decoded JSON answer. Raises ApiException."""
        return self._call(method, path, body, content_type, query, timeout)[1]

    def _call(self, method: str, path: str, body: Any = None, content_type: str = JSON,
              query: list[tuple[str, str]] | None = None, timeout: float = 60) -> tuple[int, Any]:
        """One API call; returns the HTTP status and the decoded JSON answer.

        Raises ApiException for an answer other than 2xx, :class:`errors.Unreachable` for no answer.
        """
        headers = {"Accept": JSON, "Content-Type": content_type}
        method, url, headers, payload, post = self._api.param_serialize(
            method=method, resource_path=path, query_params=query or [], header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(method, url, header_params=headers, body=payload, post_params=post,
                                          _request_timeout=timeout)
            response.read()  # type: ignore[no-untyped-call]
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reason = _connection_error(exc)
            self.outage.failed(reason)
            raise errors.Unreachable(f"API server unreachable ({method} {path}): {reason}", delay=2) from exc
        self.outage.answered()
        if not 200 <= int(response.status) < 300:
            raise ApiException(http_resp=response)
        data = response.data
        return int(response.status), json.loads(data) if data else None

    # -- discovery ---------------------------------------------------------------

    def resolve(self, group: str, version: str, kind: str) -> ResourceRef:
        key = (group, version, kind)
        with self._lock:
            if key in self._refs:
                return self._refs[key]
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.request("GET", path)
        except ApiException as exc:
            raise errors.TemporaryError(f"{kind}.{group}/{version} is not served by the API server "
                                        f"(GET {path}: {exc.status}); is its CRD installed?", delay=5) from exc
        resources = listing.get("resources") or []
        names = {str(r.get("name")) for r in resources}
        for resource in resources:
            if resource.get("kind") == kind and "/" not in str(resource.get("name")):
                plural = str(resource["name"])
                ref = ResourceRef(group, version, kind, plural, bool(resource.get("namespaced")),
                                  f"{plural}/status" in names)
                with self._lock:
                    self._refs[key] = ref
                return ref
        raise errors.TemporaryError(f"kind {kind} is not served in {group or 'core'}/{version}; "
                                    "is its CRD installed?", delay=5)

    # -- objects -----------------------------------------------------------------

    def get(self, ref: ResourceRef, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.request("GET", ref.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _temporary("get", ref, name, exc) from exc
        return found

    def patch_status(self, ref: ResourceRef, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        """Merge-patch ``{"status": ...}``; through ``/status`` when the kind has that subresource."""
        sub = "status" if ref.has_status else ""
        try:
            result: dict[str, Any] = self.request("PATCH", ref.path(namespace, name, sub), patch,
                                                  "application/merge-patch+json")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _temporary("patch status of", ref, name, exc) from exc
        return result

    def set_finalizer(self, ref: ResourceRef, obj: dict[str, Any], finalizer: str,
                      present: bool) -> dict[str, Any] | None:
        """Add or remove one finalizer, guarded by the object's resourceVersion; retried on conflicts."""
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        for _ in range(5):
            current = list(meta.get("finalizers") or [])
            if (finalizer in current) == present:
                return obj
            wanted = [*current, finalizer] if present else [f for f in current if f != finalizer]
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
                {"op": "add", "path": "/metadata/finalizers", "value": wanted},
            ]
            try:
                result: dict[str, Any] = self.request("PATCH", ref.path(namespace, name), patch,
                                                      "application/json-patch+json")
                return result
            except ApiException as exc:
                if exc.status == 404:
                    return None
                if exc.status not in (409, 422):
                    raise _temporary("update finalizers of", ref, name, exc) from exc
            fresh = self.get(ref, namespace, name)
            if fresh is None:
                return None
            obj, meta = fresh, fresh["metadata"]
        raise errors.TemporaryError(f"could not update the finalizers of {ref.kind} {namespace}/{name}: "
                                    "it kept changing", delay=1)

    def list(self, ref: ResourceRef, namespace: str = "") -> list[dict[str, Any]]:
        """Every object of a kind (in one namespace, or everywhere)."""
        try:
            listing = self.request("GET", ref.path(namespace))
        except ApiException as exc:
            raise _temporary("list", ref, "", exc) from exc
        return list(listing.get("items") or [])

    def patch_metadata(self, ref: ResourceRef, namespace: str, name: str, metadata: dict[str, Any]) -> None:
        """Merge-patch an object's metadata (labels, annotations)."""
        try:
            self.request("PATCH", ref.path(namespace, name), {"metadata": metadata}, "application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:
                raise _temporary("patch metadata of", ref, name, exc) from exc

    def list_with_version(self, ref: ResourceRef, namespace: str = "",
                          shard_selector: str = "") -> tuple[builtins.list[dict[str, Any]], str]:
        """Every object of a kind and the list's resourceVersion (to start a watch from)."""
        items, version, _ = self.list_sharded(ref, namespace, shard_selector)
        return items, version

    def list_sharded(self, ref: ResourceRef, namespace: str = "", shard_selector: str = "",
                     limit: int = 0) -> tuple[builtins.list[dict[str, Any]], str, bool]:
        """The objects of a kind (at most ``limit``, 0: all), the list's resourceVersion, and whether the answer
        echoes a shard selector in ``metadata.shardInfo`` (KEP-5866: kube-apiserver does so on lists of built-in
        kinds, never on custom resources' although it filters them; a server that ignores the selector never).

        :class:`errors.ConfigurationError` when the server refuses ``shard_selector`` (kube-apiserver answers a
        malformed one with a 500 ``invalid shard selector: ...``): retrying cannot help."""
        query = [("shardSelector", shard_selector)] if shard_selector else []
        if limit:
            query.append(("limit", str(limit)))
        try:
            listing = self.request("GET", ref.path(namespace), query=query or None)
        except ApiException as exc:
            _refused_selector(ref, shard_selector, exc.status, exc.body)
            raise _temporary("list", ref, "", exc) from exc
        meta = objects.meta(listing)
        echoed = bool(shard_selector) and bool((meta.get("shardInfo") or {}).get("selector"))
        return list(listing.get("items") or []), str(meta.get("resourceVersion", "")), echoed

    async def watch(self, ref: ResourceRef, namespace: str, resource_version: str,
                    timeout_seconds: int = 300, shard_selector: str = "") -> AsyncIterator[dict[str, Any]]:
        """Watch events of a kind from ``resource_version`` until the server closes the stream.

        Async (aiohttp) so that cancelling the consumer closes the connection at once. Lines are
        split here, not by aiohttp (whose line reader fails on lines over 512 KiB: a big ConfigMap
        is valid in Kubernetes), up to :data:`MAX_WATCH_LINE` bytes.
        """
        conn = self.connection()
        context = ssl.create_default_context()
        if conn.ca_data:
            context.load_verify_locations(cadata=conn.ca_data.decode())
        if conn.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if conn.cert_file and conn.key_file:
            context.load_cert_chain(conn.cert_file, conn.key_file)
        headers = {"Accept": JSON}
        if conn.token:
            headers["Authorization"] = f"Bearer {conn.token}"
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        if resource_version:
            params["resourceVersion"] = resource_version
        if shard_selector:
            params["shardSelector"] = shard_selector
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=timeout_seconds + 30)
        url = conn.server.rstrip("/") + ref.path(namespace)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, \
                    session.get(url, params=params, headers=headers, ssl=context) as response:
                if response.status != 200:
                    _refused_selector(ref, shard_selector, response.status, await response.read())
                    raise errors.TemporaryError(f"watch of {ref.kind} answered {response.status}")
                async for line in json_lines(response.content.iter_any(), MAX_WATCH_LINE, f"watch of {ref.kind}"):
                    yield json.loads(line)
        except (aiohttp.ClientConnectionError, OSError, TimeoutError) as exc:
            self.outage.failed(f"{type(exc).__name__}: {exc}")
            raise errors.Unreachable(f"watch of {ref.kind} broke: {type(exc).__name__}: {exc}") from exc
        except aiohttp.ClientPayloadError as exc:
            raise errors.TemporaryError(f"watch of {ref.kind} broke: {exc}") from exc

    def apply_manifest(self, document: dict[str, Any], field_manager: str, *, create_only: bool = False,
                       namespace: str = "default") -> str:
        """Server-side apply one manifest (or create it if absent, with ``create_only``).

        The object carries ``kubectl.kubernetes.io/last-applied-configuration`` as ``kubectl apply``
        would have written it, so a user's later ``kubectl apply`` of the same file is a clean
        three-way merge, without a warning. Returns "created", "configured" or "exists".
        """
        api_version = str(document.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        ref = self.resolve(group, version, str(document.get("kind", "")))
        meta = document.setdefault("metadata", {})
        if ref.namespaced:
            meta.setdefault("namespace", namespace)
        meta["annotations"] = {**objects.annotations(document), objects.LAST_APPLIED: objects.last_applied(document)}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        existing = self.get(ref, ns, name)
        if create_only:
            if existing is not None:
                return "exists"
            try:
                self.request("POST", ref.path(ns), document)
            except ApiException as exc:
                if exc.status == 409:
                    return "exists"
                raise _temporary("create", ref, name, exc) from exc
            return "created"
        try:
            self.request("PATCH", ref.path(ns, name), document, "application/apply-patch+yaml",
                         query=[("fieldManager", field_manager), ("force", "true")])
        except ApiException as exc:
            raise _temporary("apply", ref, name, exc) from exc
        return "created" if existing is None else "configured"

    def apply(self, ref: ResourceRef, namespace: str, body: dict[str, Any], field_manager: str,
              force: bool = True) -> tuple[dict[str, Any], bool]:
        """Server-side apply ``body`` as ``field_manager``; returns the object and whether it was created."""
        name = objects.name(body)
        query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
        try:
            code, result = self._call("PATCH", ref.path(namespace, name), body, "application/apply-patch+yaml",
                                      query)
        except ApiException as exc:
            raise errors.TemporaryError(f"could not apply {ref.kind} {namespace}/{name}: API answered "
                                        f"{exc.status} {_api_message(exc)}") from exc
        return result, code == 201

    def delete(self, ref: ResourceRef, namespace: str, name: str) -> bool:
        """Delete one object (background propagation); False when it was already gone."""
        try:
            self.request("DELETE", ref.path(namespace, name), {"propagationPolicy": "Background"})
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise _temporary("delete", ref, name, exc) from exc
        return True

    def post_event(self, obj: dict[str, Any], event_type: str, reason: str, message: str,
                   component: str = "hybrid-operator") -> None:
        """A core v1 Event about ``obj``; failures are logged, never raised.

        A repeat of an Event already posted (same object, type, reason and message) is counted on
        that Event -- ``count`` and ``lastTimestamp`` patched -- instead of creating another
        (:mod:`hybrid_operator.kube.events`, as client-go's EventCorrelator).
        """
        meta = obj.get("metadata", {})
        namespace = str(meta.get("namespace") or "default")
        now = clock.rfc3339()
        name = f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:16]}"
        event: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:1024], "type": event_type,
            "source": {"component": component}, "reportingComponent": component,
            "reportingInstance": os.uname().nodename,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        key, previous = self.events.correlate(event)
        try:
            if previous is not None and self._count_again(key, previous, event, now):
                return
            self.request("POST", f"/api/v1/namespaces/{namespace}/events", event)
            self.events.posted(key, Posted(namespace, name, 1, now))
        except ApiException as exc:
            log.warning("event not posted", extra={"reason": reason, "status": exc.status})
        except errors.TemporaryError as exc:
            if not isinstance(exc, errors.Unreachable):
                log.warning("event not posted", extra={"reason": reason, "error": str(exc)})

    def _count_again(self, key: tuple[str, ...], previous: Posted, event: dict[str, Any], now: str) -> bool:
        """PATCH the posted Event's count and lastTimestamp; False when it is gone (post a new one)."""
        patch = {"count": previous.count + 1, "lastTimestamp": now, "message": event["message"]}
        try:
            self.request("PATCH", f"/api/v1/namespaces/{previous.namespace}/events/{previous.name}", patch,
                         "application/merge-patch+json")
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.events.forget(key)
            return False
        self.events.posted(key, Posted(previous.namespace, previous.name, previous.count + 1,
                                       previous.first_timestamp))
        return True

    # -- health and leader election ---------------------------------------------------

    def probe(self, ref: ResourceRef, namespace: str = "", timeout: float = 5) -> None:
        """A cheap read of a kind (LIST limit=1): is it served and can we read it? TemporaryError if not."""
        try:
            self.request("GET", ref.path(namespace), query=[("limit", "1")], timeout=timeout)
        except ApiException as exc:
            raise _temporary("list", ref, "", exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise errors.TemporaryError(f"could not list {ref.kind}: {type(exc).__name__}") from exc

    def get_lease(self, namespace: str, name: str, timeout: float) -> dict[str, Any] | None:
        """A coordination.k8s.io/v1 Lease, None when absent; TemporaryError when the API cannot answer."""
        try:
            found: dict[str, Any] = self.request("GET", f"{_LEASES.format(namespace)}/{name}", timeout=timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _lease_error("read", name, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _lease_error("read", name, exc) from exc
        return found

    def list_leases(self, namespace: str, label_selector: str, timeout: float) -> builtins.list[dict[str, Any]]:
        """The Leases of a namespace with these labels; TemporaryError when the API cannot answer."""
        try:
            found = self.request("GET", _LEASES.format(namespace), query=[("labelSelector", label_selector)],
                                 timeout=timeout)
        except ApiException as exc:
            raise _lease_error("list", label_selector, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _lease_error("list", label_selector, exc) from exc
        return list(found.get("items") or [])

    def delete_lease(self, namespace: str, name: str, timeout: float, resource_version: str | None = None) -> None:
        """Delete a Lease (gone already is fine); TemporaryError when the API cannot answer.

        With ``resource_version``, only that version of it: a Lease written since stays (409, ignored).
        """
        body = None if resource_version is None else {
            "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        try:
            self.request("DELETE", f"{_LEASES.format(namespace)}/{name}", body, timeout=timeout)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise _lease_error("delete", name, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _lease_error("delete", name, exc) from exc

    def write_lease(self, namespace: str, lease: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Create the Lease (no resourceVersion) or replace it (guarded by its resourceVersion).

        Returns the stored Lease, or None when someone else wrote it first (409 conflict / already exists).
        """
        name = str(lease["metadata"]["name"])
        create = not lease["metadata"].get("resourceVersion")
        method, path = ("POST", _LEASES.format(namespace)) if create else \
            ("PUT", f"{_LEASES.format(namespace)}/{name}")
        try:
            written: dict[str, Any] = self.request(method, path, lease, timeout=timeout)
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise _lease_error("write", name, exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _lease_error("write", name, exc) from exc
        return written

    # -- connection --------------------------------------------------------------

    def connection(self) -> Connection:
        config = self.configuration
        token = None
        auth = (config.api_key or {}).get("authorization") or (config.api_key or {}).get("BearerToken")
        if auth:
            token = str(auth).removeprefix("Bearer ").strip()
        ca_data = Path(config.ssl_ca_cert).read_bytes() if config.ssl_ca_cert else None
        return Connection(server=str(config.host), ca_data=ca_data, token=token,
                          insecure=not config.verify_ssl, cert_file=config.cert_file, key_file=config.key_file)

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig with the operator's own credentials, for Ansible runs."""
        conn = self.connection()
        cluster: dict[str, Any] = {"server": conn.server}
        if conn.ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(conn.ca_data).decode()
        if conn.insecure:
            cluster["insecure-skip-tls-verify"] = True
        user: dict[str, Any] = {}
        if conn.token:
            user["token"] = conn.token
        if conn.cert_file and conn.key_file:
            user["client-certificate"] = conn.cert_file
            user["client-key"] = conn.key_file
        document = {
            "apiVersion": "v1", "kind": "Config", "current-context": "operator",
            "clusters": [{"name": "operator", "cluster": cluster}],
            "users": [{"name": "operator", "user": user}],
            "contexts": [{"name": "operator", "context": {"cluster": "operator", "user": "operator"}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_suffix(".tmp")
        temp.unlink(missing_ok=True)
        # created 0600: it holds the operator's token
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(yaml.safe_dump(document))
        temp.replace(path)
        return path


_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{}/leases"


def _lease_error(action: str, name: str, exc: Exception) -> errors.TemporaryError:
    detail = f"API answered {exc.status} {exc.reason}" if isinstance(exc, ApiException) else type(exc).__name__
    return errors.TemporaryError(f"could not {action} the leader election lease {name}: {detail}", delay=1)


SHARD_SELECTOR_REFUSED = "invalid shard selector:"


def _refused_selector(ref: ResourceRef, selector: str, status: int | None, body: Any) -> None:
    """Raise :class:`errors.ConfigurationError` when the answer is kube-apiserver's refusal of ``selector``."""
    if not selector or status != 500:
        return
    try:
        message = str(json.loads(body).get("message") or "") if body else ""
    except (ValueError, AttributeError):
        return
    if message.startswith(SHARD_SELECTOR_REFUSED):
        raise errors.ConfigurationError(
            f"the API server refuses the shard selector for {ref.kind} ({selector!r}): {message}; it speaks "
            "another KEP-5866 dialect than this operator: run without --sharding, or start the API server "
            "with the ShardedListAndWatch feature gate off (the replicas then filter client-side)")


def _temporary(action: str, ref: ResourceRef, name: str, exc: ApiException) -> errors.TemporaryError:
    return errors.TemporaryError(f"could not {action} {ref.kind} {name}: API answered {exc.status} {exc.reason}")


def _connection_error(exc: BaseException) -> str:
    """Why no answer came, in one short line (urllib3 nests the cause in ``reason``)."""
    cause: BaseException = exc
    while isinstance(cause, urllib3.exceptions.MaxRetryError) and isinstance(cause.reason, BaseException):
        cause = cause.reason
    text = str(cause).split(": ", 1)[-1] if isinstance(cause, urllib3.exceptions.NewConnectionError) else str(cause)
    return f"{type(cause).__name__}: {text}"[:300]


def _api_message(exc: ApiException) -> str:
    """The ``message`` of a Kubernetes Status answer, else the HTTP reason."""
    try:
        return str(json.loads(exc.body or b"{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)

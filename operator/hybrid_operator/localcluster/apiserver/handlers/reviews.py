"""POST of the review kinds: answered at once, never stored (kube-apiserver's ``authentication.k8s.io``
and ``authorization.k8s.io`` virtual resources).

The one bearer token is the cluster admin (``system:masters``) and RBAC is
not enforced, so every access review is allowed: ``kubectl auth can-i``
(SelfSubjectAccessReview) says yes, ``kubectl auth can-i --list``
(SelfSubjectRulesReview) lists ``*`` on everything, ``kubectl auth whoami``
(SelfSubjectReview) names the admin, and a TokenReview authenticates the
server's token only.  The request's spec is echoed back with the status,
as kube does; a body client-go sends as protobuf, which this server does
not decode for these kinds, is answered without its spec.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.apiserver import decoding, encoding
from hybrid_operator.localcluster.apiserver.context import config_of
from hybrid_operator.localcluster.apiserver.urls import Target

ADMIN = {"username": "hybrid-admin", "groups": ["system:masters", "system:authenticated"]}
EVERYTHING = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
              "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await decoding.body(request, decoding.BODY_TYPES)
    except errors.ApiError as error:
        if error.code != 415 or decoding.media_type(request) != decoding.PROTOBUF:
            raise
        return {}
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object")
    return body


def _status(kind: str, spec: dict[str, Any], token: str) -> dict[str, Any]:
    if kind == "SelfSubjectReview":
        return {"userInfo": ADMIN}
    if kind == "SelfSubjectRulesReview":
        return EVERYTHING
    if kind == "TokenReview":
        if spec.get("token") == token:
            return {"authenticated": True, "user": ADMIN, "audiences": list(spec.get("audiences") or [])}
        return {"authenticated": False, "error": "invalid bearer token"}
    reason = "the embedded cluster enforces no RBAC" if kind in ("SubjectAccessReview",
                                                                  "LocalSubjectAccessReview") else ""
    return {"allowed": True, **({"reason": reason} if reason else {})}


async def review(request: web.Request, target: Target) -> web.StreamResponse:
    """Answer a POST of a review kind; any other method is not allowed."""
    if request.method != "POST" or target.name:
        raise errors.method_not_allowed()
    body = await _body(request)
    info = target.info
    spec: dict[str, Any] = body["spec"] if isinstance(body.get("spec"), dict) else {}
    metadata: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    if target.namespace is not None:
        metadata = {**metadata, "namespace": target.namespace}
    answer = {"kind": info.kind, "apiVersion": info.group_version, "metadata": metadata,
              "status": _status(info.kind, spec, config_of(request).token)}
    if info.kind != "SelfSubjectReview":
        answer["spec"] = spec
    return encoding.respond(answer, 201)

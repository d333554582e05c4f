"""Kubernetes ``Status`` errors raised anywhere in the embedded API server.

Every failure a client can see is an :class:`ApiError`; the HTTP layer turns it
into the ``Status`` object kube-apiserver would send (code, reason, message,
details), so kubectl prints ``Error from server (<Reason>): <message>`` and the
Python client raises the matching ``ApiException``.  The constructors below
carry kube-apiserver's exact wording, because clients and users match on it.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered to the client as a ``Status`` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` body for this error."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # a plain error of kube-apiserver's (not a StatusError): a 500 without a reason
            del body["reason"]
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str | None, group: str, plural: str) -> dict[str, Any]:
    details: dict[str, Any] = {"group": group, "kind": plural}
    if name:
        details["name"] = name
    return details


def qualified(plural: str, group: str) -> str:
    """``configmaps`` or ``widgets.example.com``, as kube-apiserver names a resource."""
    return f"{plural}.{group}" if group else plural


def path_not_found() -> ApiError:
    """404 for a URL that names nothing the server serves."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": '
        "the object has been modified; please apply your changes to the latest "
        "version and try again",
        _details(name, group, plural),
    )


def invalid(
    kind: str,
    group: str,
    name: str,
    causes: list[dict[str, str]],
) -> ApiError:
    """422 Invalid; each cause is ``{reason, message, field}``."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = ", ".join(
        f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes
    )
    if len(causes) > 1:
        summary = f"[{summary}]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def patch_rejected(detail: str) -> ApiError:
    """422 for a patch document that cannot be applied (malformed operation, missing path...)."""
    return ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {detail}")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: {", ".join(accepted)}',
    )


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def forbidden(plural: str, group: str, name: str, message: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{qualified(plural, group)} "{name}" is forbidden: {message}',
        _details(name, group, plural),
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def request_entity_too_large(message: str) -> ApiError:
    """413, as kube-apiserver answers a body over its limit (``Request entity too large: limit is N``)."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: {message}")


def object_too_large() -> ApiError:
    """413 for an object too large to store.

    kube-apiserver passes etcd's ``etcdserver: request is too large`` through
    (as a 500 today, kubernetes/kubernetes#112152); we keep etcd's words with
    the 413 the request deserves.
    """
    return ApiError(413, "RequestEntityTooLarge", "etcdserver: request is too large")


def uri_too_long(limit: int) -> ApiError:
    return ApiError(414, "RequestURITooLong", f"the request URI is longer than {limit} bytes")


def undecodable(kind: str, version: str, detail: str) -> ApiError:
    """400 for a body that does not decode into the kind's Go type (kube-apiserver's ``transformDecodeError``)."""
    return ApiError(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')

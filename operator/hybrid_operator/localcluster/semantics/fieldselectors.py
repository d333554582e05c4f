"""Field selectors, parsed and matched the way kube-apiserver does.

LIST, WATCH and DELETE collection accept a ``fieldSelector`` query parameter
(``metadata.name=x,status.phase!=Running``).  Only ``metadata.name``,
``metadata.namespace`` and a few fields per kind may be used (anything else is
a 400, as kube-apiserver answers); values escape ``\\``, ``,`` and ``=`` with a
backslash.  Events are matched on either API version's field names
(``involvedObject`` in core/v1, ``regarding`` in events.k8s.io/v1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hybrid_operator.localcluster import errors, objects

# --------------------------------------------------------------------------- field selectors

_FieldGetter = Callable[[Mapping[str, Any]], Any]


def _path(*keys: str) -> _FieldGetter:
    """A getter for the value at ``keys`` (None when absent)."""
    return lambda obj: objects.dig(obj, *keys)


_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Event": _EVENT_FIELDS,
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
    ),
    "Secret": ("type",),
    "Namespace": ("status.phase",),
    "ReplicaSet": ("status.replicas",),
    "ReplicationController": ("status.replicas",),
    "Job": ("status.successful",),
}

# core/v1 Event fields that live elsewhere in the JSON (either API version).
_CORE_EVENT_PATHS: dict[str, _FieldGetter] = {
    "source": _path("source", "component"),
}
_NEW_EVENT_PATHS: dict[str, _FieldGetter] = {
    **{f: _path("regarding", f.split(".", 1)[1]) for f in _EVENT_FIELDS if f.startswith("involvedObject.")},
    "source": _path("deprecatedSource", "component"),
    "reportingComponent": _path("reportingController"),
}


def supported_fields(kind: str) -> tuple[str, ...]:
    """The field labels a ``fieldSelector`` may use for objects of ``kind``."""
    return _COMMON_FIELDS + _KIND_FIELDS.get(kind, ())


def _field_value(kind: str, obj: Mapping[str, Any], name: str) -> str:
    getter: _FieldGetter | None = None
    if kind == "Event":
        table = _NEW_EVENT_PATHS if _is_events_k8s_io(obj) else _CORE_EVENT_PATHS
        getter = table.get(name)
    value = (getter or _path(*name.split(".")))(obj)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_events_k8s_io(obj: Mapping[str, Any]) -> bool:
    api_version = str(obj.get("apiVersion") or "")
    if api_version.startswith("events.k8s.io/"):
        return True
    return "regarding" in obj and "involvedObject" not in obj


@dataclass(frozen=True, order=True)
class FieldTerm:
    """``field=value`` (or ``!=``); ``==`` is stored as ``=``."""

    field: str
    negated: bool
    value: str

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{_escape(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field terms for objects of one kind; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()
    kind: str = ""

    @property
    def empty(self) -> bool:
        """Whether this selects every object."""
        return not self.terms

    def exact(self, name: str) -> str | None:
        """The value ``name`` must equal, if a term pins it (e.g. ``metadata.name``)."""
        for term in self.terms:
            if term.field == name and not term.negated:
                return term.value
        return None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((_field_value(self.kind, obj, t.field) == t.value) != t.negated for t in self.terms)

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)


EVERYTHING_FIELDS = FieldSelector()


def parse_field_selector(text: str, *, kind: str) -> FieldSelector:
    """Parse a ``fieldSelector`` query parameter for objects of ``kind``."""
    allowed = supported_fields(kind)
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw.strip():
            continue
        term = _parse_term(raw)
        if term.field not in allowed:
            raise errors.bad_request(f"field label not supported: {term.field}")
        terms.append(term)
    return FieldSelector(tuple(sorted(terms)), kind) if terms else FieldSelector(kind=kind)


def _parse_term(raw: str) -> FieldTerm:
    for index in range(len(raw)):
        for op in ("!=", "==", "="):
            if raw.startswith(op, index):
                value = _unescape(raw[index + len(op) :].strip())
                return FieldTerm(raw[:index].strip(), op == "!=", value)
    raise errors.bad_request(f"invalid selector: '{raw}'; can't understand '{raw}'")


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            if following == "" or following not in "\\,=":
                raise errors.bad_request(f"invalid field selector: invalid escape sequence: \\{following}")
            out.append(following)
        elif char in ",=":
            raise errors.bad_request(f"invalid field selector: unescaped character in value: '{char}'")
        else:
            out.append(char)
    return "".join(out)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")

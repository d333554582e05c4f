"""``meta.k8s.io/v1`` Table rendering, so ``kubectl get`` prints real columns.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` on every
``get``; with a plain List it can only print NAME and AGE.  kube-apiserver
answers with server-side column definitions and pre-rendered cells: built-in
kinds have hand-written printers (Deployment READY ``1/1``, Service
PORT(S) ``80/TCP`` …, Age rendered as ``5m``), custom resources use their
CRD version's ``additionalPrinterColumns`` evaluated with JSONPath (the
default is a single ``Age`` column of type ``date`` that carries the raw
timestamp, which kubectl renders itself).  Missing CRD column values are
``null`` cells, which kubectl prints as ``<none>``.

``printer_columns=None`` selects the built-in printer for ``kind``; a list
(possibly empty) selects the custom-resource path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
INCLUDE_NONE = "None"

Obj = dict[str, Any]
Cells = list[Any]


@dataclass(frozen=True)
class Column:
    """One ``columnDefinitions`` entry."""

    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


# --------------------------------------------------------------------------- accessors


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _int(obj: Any, *path: str) -> int:
    value = _get(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(obj: Any, *path: str) -> str:
    value = _get(obj, *path)
    return value if isinstance(value, str) else ""


def _list(obj: Any, *path: str) -> list[Any]:
    value = _get(obj, *path)
    return value if isinstance(value, list) else []


def _dict(obj: Any, *path: str) -> dict[str, Any]:
    value = _get(obj, *path)
    return value if isinstance(value, dict) else {}


def _or_none(text: str) -> str:
    return text if text else "<none>"


# --------------------------------------------------------------------------- time


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """A duration the way kubectl and kube-apiserver print ages (``5s``, ``3m10s``, ``2d``)."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _two_units(minutes, "m", whole % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return _two_units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return _two_units(days, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return _two_units(days // 365, "y", days % 365, "d")
    return f"{days // 365}y"


def _two_units(major: int, major_unit: str, minor: int, minor_unit: str) -> str:
    return f"{major}{major_unit}" if minor == 0 else f"{major}{major_unit}{minor}{minor_unit}"


def _since(value: Any, now: datetime) -> str:
    stamp = parse_timestamp(value)
    if stamp is None:
        return "<unknown>"
    return human_duration((now - stamp).total_seconds())


def _age(obj: Obj, now: datetime) -> str:
    return _since(_get(obj, "metadata", "creationTimestamp"), now)


# --------------------------------------------------------------------------- shared column pieces

NAME = Column("Name", format="name", description="Name of the object, unique within its namespace.")
AGE = Column("Age", description="Time since the object was created (metadata.creationTimestamp).")
CREATED_AT = Column("Created At", type="date", description="metadata.creationTimestamp of the object.")
CONTAINERS = Column("Containers", priority=1, description="Names of each container in the template.")
IMAGES = Column("Images", priority=1, description="Images referenced by each container in the template.")
READY_RATIO = Column("Ready", description="Ready replicas out of desired replicas.")
SELECTOR = Column("Selector", priority=1, description="Label selector for the pods.")


def _format_labels(labels: dict[str, Any]) -> str:
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels)) or "<none>"


def _format_selector(selector: dict[str, Any]) -> str:
    """A LabelSelector as kubectl prints it (``app=web,tier in (a,b)``)."""
    parts = [f"{key}={value}" for key, value in sorted(_dict(selector, "matchLabels").items())]
    for expr in _list(selector, "matchExpressions"):
        parts.append(_format_requirement(expr))
    return ",".join(parts) or "<none>"


def _format_requirement(expr: Any) -> str:
    key, operator = _str(expr, "key"), _str(expr, "operator")
    values = ",".join(str(v) for v in _list(expr, "values"))
    if operator == "Exists":
        return key
    if operator == "DoesNotExist":
        return f"!{key}"
    return f"{key} {operator.lower()} ({values})"


def _template_cells(obj: Obj) -> Cells:
    containers = _list(obj, "spec", "template", "spec", "containers")
    names = ",".join(_str(c, "name") for c in containers)
    images = ",".join(_str(c, "image") for c in containers)
    return [names, images, _format_selector(_dict(obj, "spec", "selector"))]


def _desired(obj: Obj) -> int:
    replicas = _get(obj, "spec", "replicas")
    return replicas if isinstance(replicas, int) else 1


# --------------------------------------------------------------------------- built-in printers

Printer = tuple[list[Column], Callable[[Obj, datetime], Cells]]


def _config_map(obj: Obj, now: datetime) -> Cells:
    count = len(_dict(obj, "data")) + len(_dict(obj, "binaryData"))
    return [_name(obj), count, _age(obj, now)]


def _secret(obj: Obj, now: datetime) -> Cells:
    return [_name(obj), _str(obj, "type"), len(_dict(obj, "data")), _age(obj, now)]


def _namespace(obj: Obj, now: datetime) -> Cells:
    return [_name(obj), _str(obj, "status", "phase"), _age(obj, now)]


def _service_account(obj: Obj, now: datetime) -> Cells:
    return [_name(obj), len(_list(obj, "secrets")), _age(obj, now)]


def _deployment(obj: Obj, now: datetime) -> Cells:
    ready = f"{_int(obj, 'status', 'readyReplicas')}/{_desired(obj)}"
    updated, available = _int(obj, "status", "updatedReplicas"), _int(obj, "status", "availableReplicas")
    return [_name(obj), ready, updated, available, _age(obj, now), *_template_cells(obj)]


def _stateful_set(obj: Obj, now: datetime) -> Cells:
    ready = f"{_int(obj, 'status', 'readyReplicas')}/{_desired(obj)}"
    return [_name(obj), ready, _age(obj, now), *_template_cells(obj)[:2]]


def _replica_set(obj: Obj, now: datetime) -> Cells:
    counts = [_desired(obj), _int(obj, "status", "replicas"), _int(obj, "status", "readyReplicas")]
    return [_name(obj), *counts, _age(obj, now), *_template_cells(obj)]


def _daemon_set(obj: Obj, now: datetime) -> Cells:
    fields = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
    counts = [_int(obj, "status", field) for field in fields]
    counts += [_int(obj, "status", "updatedNumberScheduled"), _int(obj, "status", "numberAvailable")]
    node_selector = _format_labels(_dict(obj, "spec", "template", "spec", "nodeSelector"))
    return [_name(obj), *counts, node_selector, _age(obj, now), *_template_cells(obj)]


def _job_status(obj: Obj) -> str:
    true_types = {_str(c, "type") for c in _list(obj, "status", "conditions") if _str(c, "status") == "True"}
    for condition in ("Failed", "Complete", "Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if condition in true_types:
            return condition
    if _get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return "Running"


def _job_completions(obj: Obj) -> str:
    succeeded = _int(obj, "status", "succeeded")
    completions = _get(obj, "spec", "completions")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    parallelism = _int(obj, "spec", "parallelism")
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(obj: Obj, now: datetime) -> str:
    start = parse_timestamp(_get(obj, "status", "startTime"))
    if start is None:
        return ""
    end = parse_timestamp(_get(obj, "status", "completionTime")) or now
    return human_duration((end - start).total_seconds())


def _job(obj: Obj, now: datetime) -> Cells:
    cells = [_name(obj), _job_status(obj), _job_completions(obj), _job_duration(obj, now), _age(obj, now)]
    return cells + _template_cells(obj)


def _cron_job(obj: Obj, now: datetime) -> Cells:
    template = {"spec": _dict(obj, "spec", "jobTemplate", "spec")}
    last = _get(obj, "status", "lastScheduleTime")
    return [
        _name(obj),
        _str(obj, "spec", "schedule"),
        _or_none(_str(obj, "spec", "timeZone")),
        _get(obj, "spec", "suspend") is True,
        len(_list(obj, "status", "active")),
        _since(last, now) if last else "<none>",
        _age(obj, now),
        *_template_cells(template),
    ]


def _service_ports(obj: Obj) -> str:
    parts = []
    for port in _list(obj, "spec", "ports"):
        protocol = _str(port, "protocol") or "TCP"
        node_port = _int(port, "nodePort")
        prefix = f"{_int(port, 'port')}:{node_port}" if node_port else f"{_int(port, 'port')}"
        parts.append(f"{prefix}/{protocol}")
    return ",".join(parts) or "<none>"


def _load_balancer_addresses(obj: Obj) -> list[str]:
    addresses = []
    for ingress in _list(obj, "status", "loadBalancer", "ingress"):
        address = _str(ingress, "ip") or _str(ingress, "hostname")
        if address:
            addresses.append(address)
    return addresses


def _service_external_ip(obj: Obj) -> str:
    service_type = _str(obj, "spec", "type") or "ClusterIP"
    external = [str(ip) for ip in _list(obj, "spec", "externalIPs")]
    if service_type in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if service_type == "LoadBalancer":
        return ",".join(_load_balancer_addresses(obj) + external) or "<pending>"
    if service_type == "ExternalName":
        return _str(obj, "spec", "externalName")
    return "<unknown>"


def _service(obj: Obj, now: datetime) -> Cells:
    return [
        _name(obj),
        _str(obj, "spec", "type") or "ClusterIP",
        _or_none(_str(obj, "spec", "clusterIP")),
        _service_external_ip(obj),
        _service_ports(obj),
        _age(obj, now),
        _format_labels(_dict(obj, "spec", "selector")),
    ]


def _pod_status(obj: Obj) -> str:
    reason = _str(obj, "status", "reason") or _str(obj, "status", "phase") or "Pending"
    for status in _list(obj, "status", "containerStatuses"):
        waiting = _str(status, "state", "waiting", "reason")
        terminated = _dict(status, "state", "terminated")
        if waiting:
            reason = waiting
        elif terminated:
            reason = _str(terminated, "reason") or f"ExitCode:{_int(terminated, 'exitCode')}"
    if _get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return reason


def _pod(obj: Obj, now: datetime) -> Cells:
    statuses = _list(obj, "status", "containerStatuses")
    ready = sum(1 for s in statuses if _get(s, "ready") is True)
    total = len(_list(obj, "spec", "containers"))
    restarts = sum(_int(s, "restartCount") for s in statuses)
    return [
        _name(obj),
        f"{ready}/{total}",
        _pod_status(obj),
        str(restarts),
        _age(obj, now),
        _or_none(_str(obj, "status", "podIP")),
        _or_none(_str(obj, "spec", "nodeName")),
        _or_none(_str(obj, "status", "nominatedNodeName")),
        "<none>",
    ]


_ACCESS_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _pvc(obj: Obj, now: datetime) -> Cells:
    modes = ",".join(_ACCESS_MODES.get(str(m), str(m)) for m in _list(obj, "status", "accessModes"))
    return [
        _name(obj),
        _str(obj, "status", "phase") or "Pending",
        _str(obj, "spec", "volumeName"),
        _str(obj, "status", "capacity", "storage"),
        modes,
        _str(obj, "spec", "storageClassName"),
        _or_none(_str(obj, "spec", "volumeAttributesClassName")).replace("<none>", "<unset>"),
        _age(obj, now),
        _str(obj, "spec", "volumeMode") or "Filesystem",
    ]


def _event_source(obj: Obj) -> str:
    component = _str(obj, "source", "component") or _str(obj, "reportingComponent")
    host = _str(obj, "source", "host") or _str(obj, "reportingInstance")
    return f"{component}, {host}" if host else component


def _event(obj: Obj, now: datetime) -> Cells:
    last = _get(obj, "lastTimestamp") or _get(obj, "eventTime") or _get(obj, "metadata", "creationTimestamp")
    first = _get(obj, "firstTimestamp") or _get(obj, "eventTime") or last
    count = _int(obj, "count") or 1
    last_seen = _since(last, now)
    if count > 1:
        last_seen = f"{last_seen} (x{count} over {_since(first, now)})"
    involved = _dict(obj, "involvedObject")
    return [
        last_seen,
        _str(obj, "type"),
        _str(obj, "reason"),
        f"{_str(involved, 'kind').lower()}/{_str(involved, 'name')}",
        _str(involved, "fieldPath"),
        _event_source(obj),
        _str(obj, "message").strip(),
        _since(first, now),
        count,
        _name(obj),
    ]


def _crd(obj: Obj, now: datetime) -> Cells:
    return [_name(obj), _created_at(obj)]


def _default(obj: Obj, now: datetime) -> Cells:
    return [_name(obj), _age(obj, now)]


def _name(obj: Obj) -> str:
    return _str(obj, "metadata", "name")


def _created_at(obj: Obj) -> Any:
    stamp = parse_timestamp(_get(obj, "metadata", "creationTimestamp"))
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if stamp else None


def _count(name: str, description: str, priority: int = 0) -> Column:
    return Column(name, type="integer", description=description, priority=priority)


_PRINTERS: dict[str, Printer] = {
    "ConfigMap": ([NAME, _count("Data", "Number of data entries."), AGE], _config_map),
    "Secret": (
        [NAME, Column("Type", description="Secret type."), _count("Data", "Number of data entries."), AGE],
        _secret,
    ),
    "Namespace": ([NAME, Column("Status", description="Namespace phase."), AGE], _namespace),
    "ServiceAccount": ([NAME, _count("Secrets", "Number of referenced secrets."), AGE], _service_account),
    "Deployment": (
        [
            NAME,
            READY_RATIO,
            _count("Up-to-date", "Replicas updated to the latest template."),
            _count("Available", "Replicas available to users."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        _deployment,
    ),
    "StatefulSet": (
        [NAME, READY_RATIO, AGE, CONTAINERS, IMAGES],
        _stateful_set,
    ),
    "ReplicaSet": (
        [
            NAME,
            _count("Desired", "Desired replicas."),
            _count("Current", "Current replicas."),
            _count("Ready", "Ready replicas."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        _replica_set,
    ),
    "DaemonSet": (
        [
            NAME,
            _count("Desired", "Nodes that should run the daemon pod."),
            _count("Current", "Nodes running at least one daemon pod."),
            _count("Ready", "Nodes with a ready daemon pod."),
            _count("Up-to-date", "Nodes running the updated daemon pod."),
            _count("Available", "Nodes with an available daemon pod."),
            Column("Node Selector", description="Node selector of the pod template."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        _daemon_set,
    ),
    "Job": (
        [
            NAME,
            Column("Status", description="Status of the job."),
            Column("Completions", description="Succeeded pods out of desired completions."),
            Column("Duration", description="Time the job took to complete."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        _job,
    ),
    "CronJob": (
        [
            NAME,
            Column("Schedule", description="Cron schedule."),
            Column("Timezone", description="Time zone of the schedule."),
            Column("Suspend", type="boolean", description="Whether scheduling is suspended."),
            _count("Active", "Number of running jobs."),
            Column("Last Schedule", description="Time since the job was last scheduled."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        _cron_job,
    ),
    "Service": (
        [
            NAME,
            Column("Type", description="Service type."),
            Column("Cluster-IP", description="Cluster IP of the service."),
            Column("External-IP", description="External addresses of the service."),
            Column("Port(s)", description="Ports exposed by the service."),
            AGE,
            Column("Selector", priority=1, description="Pod selector of the service."),
        ],
        _service,
    ),
    "Pod": (
        [
            NAME,
            Column("Ready", description="Ready containers out of all containers."),
            Column("Status", description="Aggregate status of the containers."),
            Column("Restarts", description="Total container restarts."),
            AGE,
            Column("IP", priority=1, description="IP address of the pod."),
            Column("Node", priority=1, description="Node the pod is bound to."),
            Column("Nominated Node", priority=1, description="Node nominated by the scheduler."),
            Column("Readiness Gates", priority=1, description="Pod readiness gates."),
        ],
        _pod,
    ),
    "PersistentVolumeClaim": (
        [
            NAME,
            Column("Status", description="Claim phase."),
            Column("Volume", description="Bound volume."),
            Column("Capacity", description="Capacity of the bound volume."),
            Column("Access Modes", description="Access modes of the bound volume."),
            Column("StorageClass", description="Storage class of the claim."),
            Column("VolumeAttributesClass", description="Volume attributes class of the claim."),
            AGE,
            Column("VolumeMode", priority=1, description="Volume mode of the claim."),
        ],
        _pvc,
    ),
    "Event": (
        [
            Column("Last Seen", description="Time since the event was last seen."),
            Column("Type", description="Event type."),
            Column("Reason", description="Event reason."),
            Column("Object", description="Object the event is about."),
            Column("Subobject", priority=1, description="Field of the object the event is about."),
            Column("Source", priority=1, description="Component that reported the event."),
            Column("Message", description="Event message."),
            Column("First Seen", priority=1, description="Time since the event was first seen."),
            _count("Count", "Number of occurrences.", priority=1),
            Column("Name", priority=1, description="Name of the event."),
        ],
        _event,
    ),
    "CustomResourceDefinition": ([NAME, CREATED_AT], _crd),
}

_DEFAULT_PRINTER: Printer = ([NAME, AGE], _default)


def builtin_printer(kind: str) -> Printer:
    """Column definitions and the cell function for a built-in kind."""
    return _PRINTERS.get(kind, _DEFAULT_PRINTER)


# --------------------------------------------------------------------------- JSONPath subset

_SEGMENT = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
      | \[\s*(?P<index>-?\d+|\*)\s*\]
      | \[\s*(?P<quote>['"])(?P<key>.*?)(?P=quote)\s*\]
      | \[\?\(\s*@(?P<filter_path>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*(?P<literal>[^)]*?)\s*\)\]
      | \.\*
    """,
    re.VERBOSE,
)


def _filter_value(literal: str) -> Any:
    literal = literal.strip()
    if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "'\"":
        return literal[1:-1]
    try:
        return json.loads(literal)
    except ValueError:
        return literal


def _step(values: list[Any], match: re.Match[str]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.extend(_apply_segment(value, match))
    return out


def _apply_segment(value: Any, match: re.Match[str]) -> list[Any]:
    groups = match.groupdict()
    if groups["field"] is not None or groups["key"] is not None:
        key = groups["field"] if groups["field"] is not None else groups["key"]
        return [value[key]] if isinstance(value, dict) and key in value else []
    if groups["index"] is not None:
        return _apply_index(value, groups["index"])
    if groups["filter_path"] is not None:
        return _apply_filter(value, groups["filter_path"], groups["op"], _filter_value(groups["literal"]))
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, list) else []


def _apply_index(value: Any, index: str) -> list[Any]:
    if not isinstance(value, list):
        return []
    if index == "*":
        return list(value)
    position = int(index)
    return [value[position]] if -len(value) <= position < len(value) else []


def _apply_filter(value: Any, path: str, op: str, expected: Any) -> list[Any]:
    if not isinstance(value, list):
        return []
    keys = path.strip(".").split(".")
    selected = []
    for item in value:
        actual = _get(item, *keys)
        if (actual == expected) == (op == "=="):
            selected.append(item)
    return selected


def jsonpath(obj: Any, expression: str) -> list[Any]:
    """Evaluate the JSONPath subset CRD printer columns use; an empty list when nothing matches.

    Supports ``.field``, ``['field']``, ``[0]``, ``[*]``, ``.*`` and filters
    ``[?(@.type=="Ready")]``; surrounding ``{}`` are allowed.
    """
    text = expression.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    values: list[Any] = [obj]
    position = 0
    while position < len(text):
        match = _SEGMENT.match(text, position)
        if match is None:
            return []
        values = _step(values, match)
        position = match.end()
    return values


# --------------------------------------------------------------------------- custom resources

_DEFAULT_CR_COLUMNS: list[dict[str, Any]] = [
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
]


def _cr_column(spec: dict[str, Any]) -> Column:
    return Column(
        name=str(spec.get("name", "")),
        type=str(spec.get("type", "string")),
        description=str(spec.get("description", "")),
        priority=int(spec.get("priority", 0) or 0),
        format=str(spec.get("format", "")),
    )


def _matches_type(value: Any, column_type: str) -> bool:
    if column_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if column_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if column_type == "boolean":
        return isinstance(value, bool)
    return False


def _render_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def _cr_cell(obj: Obj, spec: dict[str, Any]) -> Any:
    results = jsonpath(obj, str(spec.get("jsonPath", "")))
    if not results:
        return None
    if len(results) == 1:
        value = results[0]
        if isinstance(value, str) or _matches_type(value, str(spec.get("type", "string"))):
            return value
    return " ".join(_render_result(value) for value in results)


def _dated(value: Any, spec: dict[str, Any], now: datetime) -> Any:
    """``date`` columns are rendered as an age (``5m``), as kube-apiserver's table convertor does."""
    if spec.get("type") == "date" and isinstance(value, str) and parse_timestamp(value) is not None:
        return _since(value, now)
    return value


def _custom_printer(printer_columns: list[dict[str, Any]]) -> Printer:
    specs = printer_columns or _DEFAULT_CR_COLUMNS
    columns = [NAME, *(_cr_column(spec) for spec in specs)]

    def cells(obj: Obj, now: datetime) -> Cells:
        return [_name(obj), *(_dated(_cr_cell(obj, spec), spec, now) for spec in specs)]

    return columns, cells


# --------------------------------------------------------------------------- the Table


def _row_object(item: Obj, include_object: str, kind: str, api_version: str | None) -> Obj | None:
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        full = dict(item)
        full.setdefault("kind", kind)
        if api_version:
            full.setdefault("apiVersion", api_version)
        return full
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": item.get("metadata", {}),
    }


def table(
    items: list[Obj],
    *,
    kind: str,
    printer_columns: list[dict[str, Any]] | None,
    include_object: str = INCLUDE_METADATA,
    resource_version: str,
    now: datetime,
    api_version: str | None = None,
    continue_token: str | None = None,
) -> dict[str, Any]:
    """The ``Table`` kube-apiserver returns for ``items`` of ``kind``.

    ``include_object`` is the ``includeObject`` query value (``Metadata``,
    ``Object`` or ``None``); ``api_version`` fills a missing ``apiVersion``
    in full row objects.
    """
    columns, cells = builtin_printer(kind) if printer_columns is None else _custom_printer(printer_columns)
    rows = []
    for item in items:
        row: dict[str, Any] = {"cells": cells(item, now)}
        embedded = _row_object(item, include_object, kind, api_version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [column.definition() for column in columns],
        "rows": rows,
    }


def parse_table_accept(accept: str) -> bool:
    """True when an ``Accept`` header asks for ``as=Table`` in ``meta.k8s.io`` v1 or v1beta1."""
    for media_range in accept.split(","):
        params = _media_params(media_range)
        if params.get("as") != "Table":
            continue
        if params.get("g", "meta.k8s.io") == "meta.k8s.io" and params.get("v", "v1") in ("v1", "v1beta1"):
            return True
    return False


def _media_params(media_range: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in media_range.split(";")[1:]:
        key, _, value = part.partition("=")
        params[key.strip()] = value.strip().strip('"')
    return params

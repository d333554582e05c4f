"""Column definitions and cells of the built-in kinds, as kube-apiserver's printers render them.

kube-apiserver has a hand-written printer per built-in kind (``kubectl get``
shows Deployment READY ``1/1``, Service PORT(S) ``80/TCP``, Pod STATUS and
RESTARTS, Job COMPLETIONS and DURATION...): a list of columns (name, type,
priority: priority 1 only shows with ``-o wide``) and a function from an
object to its row's cells.  Kinds without one get NAME and AGE.  Cells read
the object defensively: a field of the wrong type shows as empty, never fails
the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hybrid_operator.localcluster import clock, objects

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


def _int(obj: Any, *path: str) -> int:
    value = objects.dig(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(obj: Any, *path: str) -> str:
    value = objects.dig(obj, *path)
    return value if isinstance(value, str) else ""


def _list(obj: Any, *path: str) -> list[Any]:
    value = objects.dig(obj, *path)
    return value if isinstance(value, list) else []


def _dict(obj: Any, *path: str) -> dict[str, Any]:
    value = objects.dig(obj, *path)
    return value if isinstance(value, dict) else {}


def _or_none(text: str) -> str:
    return text if text else "<none>"


def _age(obj: Obj, now: datetime) -> str:
    return clock.since(objects.dig(obj, "metadata", "creationTimestamp"), now)


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
    replicas = objects.dig(obj, "spec", "replicas")
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
    if objects.dig(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return "Running"


def _job_completions(obj: Obj) -> str:
    succeeded = _int(obj, "status", "succeeded")
    completions = objects.dig(obj, "spec", "completions")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    parallelism = _int(obj, "spec", "parallelism")
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(obj: Obj, now: datetime) -> str:
    start = clock.parse_timestamp(objects.dig(obj, "status", "startTime"))
    if start is None:
        return ""
    end = clock.parse_timestamp(objects.dig(obj, "status", "completionTime")) or now
    return clock.human_duration((end - start).total_seconds())


def _job(obj: Obj, now: datetime) -> Cells:
    cells = [_name(obj), _job_status(obj), _job_completions(obj), _job_duration(obj, now), _age(obj, now)]
    return cells + _template_cells(obj)


def _cron_job(obj: Obj, now: datetime) -> Cells:
    template = {"spec": _dict(obj, "spec", "jobTemplate", "spec")}
    last = objects.dig(obj, "status", "lastScheduleTime")
    return [
        _name(obj),
        _str(obj, "spec", "schedule"),
        _or_none(_str(obj, "spec", "timeZone")),
        objects.dig(obj, "spec", "suspend") is True,
        len(_list(obj, "status", "active")),
        clock.since(last, now) if last else "<none>",
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
    if objects.dig(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return reason


def _pod(obj: Obj, now: datetime) -> Cells:
    statuses = _list(obj, "status", "containerStatuses")
    ready = sum(1 for s in statuses if objects.dig(s, "ready") is True)
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
    last = (objects.dig(obj, "lastTimestamp") or objects.dig(obj, "eventTime")
            or objects.dig(obj, "metadata", "creationTimestamp"))
    first = objects.dig(obj, "firstTimestamp") or objects.dig(obj, "eventTime") or last
    count = _int(obj, "count") or 1
    last_seen = clock.since(last, now)
    if count > 1:
        last_seen = f"{last_seen} (x{count} over {clock.since(first, now)})"
    involved = _dict(obj, "involvedObject")
    return [
        last_seen,
        _str(obj, "type"),
        _str(obj, "reason"),
        f"{_str(involved, 'kind').lower()}/{_str(involved, 'name')}",
        _str(involved, "fieldPath"),
        _event_source(obj),
        _str(obj, "message").strip(),
        clock.since(first, now),
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
    stamp = clock.parse_timestamp(objects.dig(obj, "metadata", "creationTimestamp"))
    return clock.rfc3339(stamp) if stamp else None


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

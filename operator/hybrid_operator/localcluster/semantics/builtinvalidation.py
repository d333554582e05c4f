"""A few of kube-apiserver's hand-written validations of built-in kinds, the ones manifests most often break.

The schemas (:mod:`.builtinschemas`) say which fields exist and their types;
kube-apiserver's ``pkg/apis/*/validation`` adds rules no schema carries.  These
are reproduced with its field paths and wording (422 Invalid):

* pod specs (Pods, and the templates of Deployments, ReplicaSets,
  StatefulSets, DaemonSets, Jobs and CronJobs): at least one container, each
  named as a DNS-1123 label, uniquely, with an image, and ports in 1-65535;
* workloads: ``replicas`` not negative, a non-empty selector that matches the
  template's labels;
* Services: ports in 1-65535.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hybrid_operator.localcluster.semantics.labelselectors import parse_label_selector

Cause = dict[str, str]
Obj = dict[str, Any]

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL = re.compile(f"^{_LABEL_FMT}$")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              f"start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              f"validation is '{_LABEL_FMT}')")


def _go(value: Any) -> str:
    """A value as kube prints it in a cause: strings quoted, maps and others as Go's ``%#v`` would."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return "map[string]string{" + ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(value.items())) \
            + "}"
    return json.dumps(value, separators=(",", ":"))


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {_go(value)}: {detail}"}


def _required(field: str) -> Cause:
    return {"reason": "FieldValueRequired", "field": field, "message": "Required value"}


def _port(value: Any, field: str) -> list[Cause]:
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
        return [_invalid(field, value, "must be between 1 and 65535, inclusive")]
    return []


def _containers(spec: Obj, path: str, key: str, *, required: bool) -> list[Cause]:
    containers = spec.get(key)
    field = f"{path}.{key}"
    if not isinstance(containers, list) or not containers:
        return [_required(field)] if required else []
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(containers):
        if not isinstance(container, dict):
            continue
        at = f"{field}[{index}]"
        name = container.get("name")
        if isinstance(name, str) and name:
            if not _LABEL.match(name) or len(name) > 63:
                causes.append(_invalid(f"{at}.name", name, _LABEL_MSG))
            if name in seen:
                causes.append({"reason": "FieldValueDuplicate", "field": f"{at}.name",
                               "message": f"Duplicate value: {json.dumps(name)}"})
            seen.add(name)
        if not container.get("image"):
            causes.append(_required(f"{at}.image"))
        for number, port in enumerate(container.get("ports") or []):
            if isinstance(port, dict):
                causes.extend(_port(port.get("containerPort"), f"{at}.ports[{number}].containerPort"))
    return causes


def pod_spec_causes(spec: Any, path: str) -> list[Cause]:
    if not isinstance(spec, dict):
        return [_required(path)]
    return [*_containers(spec, path, "containers", required=True),
            *_containers(spec, path, "initContainers", required=False)]


def _template(owner_spec: Obj, path: str) -> list[Cause]:
    template = owner_spec.get("template")
    if not isinstance(template, dict):
        return []
    return pod_spec_causes(template.get("spec"), f"{path}.template.spec")


def _workload(obj: Obj) -> list[Cause]:
    noun = str(obj.get("kind", "deployment")).lower()
    spec = _spec(obj)
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
        causes.append(_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = spec.get("selector")
    if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(_invalid("spec.selector", selector, f"empty selector is invalid for {noun}"))
    elif isinstance(selector, dict):
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not _matches(selector, labels):
            causes.append(_invalid("spec.template.metadata.labels", labels,
                                   "`selector` does not match template `labels`"))
    causes.extend(_template(spec, "spec"))
    return causes


def _matches(selector: Obj, labels: Any) -> bool:
    terms = [f"{key}={value}" for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        if not isinstance(expression, dict):
            continue
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(str(v) for v in expression.get("values") or [])
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": str(key),
                      "DoesNotExist": f"!{key}"}.get(str(operator), str(key)))
    try:
        return bool(parse_label_selector(",".join(terms)).matches(labels if isinstance(labels, dict) else {}))
    except Exception:  # a selector kube would refuse for its own syntax: leave that to its own checks
        return True


def _pod(obj: Obj) -> list[Cause]:
    return pod_spec_causes(obj.get("spec"), "spec")


def _job(obj: Obj) -> list[Cause]:
    return _template(_spec(obj), "spec")


def _cron_job(obj: Obj) -> list[Cause]:
    job_spec = ((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec")
    return _template(job_spec, "spec.jobTemplate.spec") if isinstance(job_spec, dict) else []


def _service(obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for index, port in enumerate((obj.get("spec") or {}).get("ports") or []):
        if isinstance(port, dict):
            causes.extend(_port(port.get("port"), f"spec.ports[{index}].port"))
            causes.extend(_port(port.get("targetPort"), f"spec.ports[{index}].targetPort"))
    return causes


_RULES: dict[tuple[str, str], Callable[[Obj], list[Cause]]] = {
    ("apps", "Deployment"): _workload,
    ("apps", "ReplicaSet"): _workload,
    ("apps", "StatefulSet"): _workload,
    ("apps", "DaemonSet"): _workload,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cron_job,
    ("", "Pod"): _pod,
    ("", "Service"): _service,
}


def causes(group: str, kind: str, obj: Obj) -> list[Cause]:
    """kube-apiserver's validation failures of ``obj`` among the rules above."""
    rule = _RULES.get((group, kind))
    return rule(obj) if rule is not None else []

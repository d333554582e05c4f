"""Prometheus metrics of the operator, and the playbooks' own metrics, in the text exposition format.

Why this module exists: operators are watched through Prometheus, and users of the Operator SDK
already scrape ``controller_runtime_reconcile_*``, ``workqueue_depth`` and
``ansible_operator_*``.  prometheus_client is not a dependency, so this module has the few metric
types we need (counter, gauge, histogram, summary without quantiles), renders them in the text
format (version 0.0.4):

* :class:`OperatorMetrics` -- every metric the operator itself records (``docs/operations.md``
  lists them all), plus the build info;
* :class:`UserMetrics` -- metrics a playbook creates and updates through the
  ``operator_sdk.util.osdk_metric`` module, which POSTs one operation (the Operator SDK's payload:
  ``name``, ``description`` and one of ``counter``/``gauge``/``histogram``/``summary``) to
  127.0.0.1 (served by :mod:`hybrid_operator.manager.metrics`).

Metrics are updated from the event loop only (no locks).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from hybrid_operator.config.model import GroupVersionKind

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: reconciles take from milliseconds (nothing to do) to many minutes (a long playbook or helm --wait)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                    600.0, 1800.0)
#: user histograms: Prometheus' usual default buckets
USER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: at most this many metrics may be created by playbooks (each is kept until the process ends)
MAX_USER_METRICS = 500

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

Labels = tuple[str, ...]
F = TypeVar("F", bound="Family")


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: integers without a fraction, +Inf/-Inf/NaN."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    return "{" + ",".join(f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True)) + "}"


class Family:
    """One metric name: its type, help, label names and one sample (or sample set) per label values."""

    kind = "untyped"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid metric name {name!r}")
        for label in labels:
            if not _LABEL.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r} for {name}")
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)

    def _key(self, values: Sequence[str]) -> Labels:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {tuple(values)}")
        return tuple(str(v) for v in values)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.documentation)}", f"# TYPE {self.name} {self.kind}"]

    def samples(self) -> list[str]:
        raise NotImplementedError

    def render(self) -> list[str]:
        return [*self.header(), *self.samples()]


class Counter(Family):
    """A value that only goes up."""

    kind = "counter"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, labels)
        self._values: dict[Labels, float] = {} if labels else {(): 0.0}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"counter {self.name} cannot go down (amount {amount})")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        return [f"{self.name}{_label_text(self.labels, k)} {format_value(v)}" for k, v in sorted(self._values.items())]


class Gauge(Family):
    """A value that goes up and down."""

    kind = "gauge"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, labels)
        self._values: dict[Labels, float] = {} if labels else {(): 0.0}

    def set(self, value: float, *labels: str) -> None:
        self._values[self._key(labels)] = float(value)

    def add(self, amount: float, *labels: str) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def clear(self) -> None:
        self._values = {} if self.labels else {(): 0.0}

    def remove(self, *labels: str) -> None:
        """Drop the sample of these label values (the object it described is gone)."""
        self._values.pop(self._key(labels), None)

    def samples(self) -> list[str]:
        return [f"{self.name}{_label_text(self.labels, k)} {format_value(v)}" for k, v in sorted(self._values.items())]


class Histogram(Family):
    """Observations counted in cumulative buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = (),
                 buckets: Sequence[float] = DURATION_BUCKETS) -> None:
        if "le" in labels:
            raise ValueError(f"histogram {name} cannot have a label named le")
        super().__init__(name, documentation, labels)
        self.buckets = tuple(sorted(float(b) for b in buckets if not math.isinf(b)))
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}
        if not labels:  # as the Go client: an unlabelled histogram shows its zero buckets, sum and count
            self._series[()] = ([0] * (len(self.buckets) + 1), [0.0])

    def observe(self, value: float, *labels: str) -> None:
        counts, totals = self._series.setdefault(self._key(labels), ([0] * (len(self.buckets) + 1), [0.0]))
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                counts[index] += 1
        counts[-1] += 1
        totals[0] += value

    def count(self, *labels: str) -> int:
        series = self._series.get(self._key(labels))
        return series[0][-1] if series else 0

    def sum(self, *labels: str) -> float:
        series = self._series.get(self._key(labels))
        return series[1][0] if series else 0.0

    def samples(self) -> list[str]:
        lines = []
        names = (*self.labels, "le")
        for key, (counts, totals) in sorted(self._series.items()):
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                lines.append(f"{self.name}_bucket{_label_text(names, (*key, format_value(bound)))} {count}")
            lines.append(f"{self.name}_sum{_label_text(self.labels, key)} {format_value(totals[0])}")
            lines.append(f"{self.name}_count{_label_text(self.labels, key)} {counts[-1]}")
        return lines


class Summary(Family):
    """Observations as a sum and a count (no quantiles)."""

    kind = "summary"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, labels)
        # as the Go client: an unlabelled summary shows its zero sum and count before any observation
        self._series: dict[Labels, tuple[int, float]] = {} if labels else {(): (0, 0.0)}

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        count, total = self._series.get(key, (0, 0.0))
        self._series[key] = (count + 1, total + value)

    def samples(self) -> list[str]:
        lines = []
        for key, (count, total) in sorted(self._series.items()):
            lines.append(f"{self.name}_sum{_label_text(self.labels, key)} {format_value(total)}")
            lines.append(f"{self.name}_count{_label_text(self.labels, key)} {count}")
        return lines


class Registry:
    """Families by name, rendered in registration order; collectors refresh gauges before each render."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}
        self._collectors: list[Callable[[], None]] = []

    def register(self, family: F) -> F:
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already registered")
        self._families[family.name] = family
        return family

    def get(self, name: str) -> Family | None:
        return self._families.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._families

    def __len__(self) -> int:
        return len(self._families)

    def add_collector(self, collect: Callable[[], None]) -> None:
        self._collectors.append(collect)

    def render(self) -> str:
        for collect in self._collectors:
            collect()
        lines: list[str] = []
        for family in self._families.values():
            lines += family.render()
        return "\n".join(lines) + "\n" if lines else ""


def gvk_label(group: str, version: str, kind: str) -> str:
    """The Operator SDK's ``GVK`` label value: ``group/version, Kind=kind``."""
    return f"{group}/{version}, Kind={kind}" if group else f"{version}, Kind={kind}"


class OperatorMetrics:
    """Every metric the operator records (names and meanings in docs/operations.md)."""

    def __init__(self, version: str) -> None:
        self.registry = Registry()
        add = self.registry.register
        self.reconcile_total = add(Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller and result (success, error, requeue, requeue_after).",
            ("controller", "result")))
        self.reconcile_errors = add(Counter(
            "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller.",
            ("controller",)))
        self.reconcile_time = add(Histogram(
            "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller.",
            ("controller",)))
        self.active_workers = add(Gauge(
            "controller_runtime_active_workers", "Number of reconciles running now per controller.",
            ("controller",)))
        self.max_concurrent = add(Gauge(
            "controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller.",
            ("controller",)))
        self.queue_depth = add(Gauge("workqueue_depth", "Current depth of the work queue.", ("name",)))
        self.active_runs = add(Gauge(
            "hybrid_operator_active_runs", "Playbook runs (ansible) and release reconciles (helm) in progress.",
            ("runner",)))
        self.run_time = add(Histogram(
            "hybrid_operator_runner_duration_seconds",
            "Duration of one playbook run (ansible) or of the helm work of one reconcile (helm).",
            ("runner", "controller")))
        self.dependent_watches = add(Gauge(
            "hybrid_operator_dependent_watches", "Kinds of dependent resources watched."))
        self.last_event = add(Gauge(
            "hybrid_operator_watch_last_event_timestamp_seconds",
            "Unix time of the last watch event received per controller.", ("controller",)))
        self.watch_healthy = add(Gauge(
            "hybrid_operator_watch_healthy",
            "1 when the controller's kind was listed successfully within the readiness window.", ("controller",)))
        self.leader = add(Gauge(
            "leader_election_master_status", "1 when this replica holds the leader election lease.", ("name",)))
        self.sdk_result = add(Gauge(
            "ansible_operator_reconcile_result", "Results of Ansible reconciles (only goes up, as the SDK's).",
            ("GVK", "result")))
        self.sdk_reconciles = add(Histogram(
            "ansible_operator_reconciles", "Duration of Ansible reconciles (the whole playbook run).", ("GVK",)))
        self.resource_created = add(Gauge(
            "resource_created_at_seconds", "Unix time at which a watched custom resource was created "
            "(the Operator SDK's metric), one sample per resource.", ("group", "kind", "name", "namespace", "version")))
        build = add(Gauge("ansible_operator_build_info", "Build information (the Operator SDK's name).",
                          ("commit", "version")))
        build.set(1, "", version)
        add(Gauge("hybrid_operator_build_info", "Build information.", ("version",))).set(1, version)
        self.user = UserMetrics(self.registry)

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        """One reconcile ended with ``result``: success, error, requeue or requeue_after."""
        self.reconcile_total.inc(controller, result)
        if result == "error":
            self.reconcile_errors.inc(controller)
        self.reconcile_time.observe(seconds, controller)

    def resource_seen(self, gvk: GroupVersionKind, body: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A watched resource was seen (its ``resource_created_at_seconds``), or is gone (its sample too)."""
        meta = body.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        labels = (gvk.group, gvk.kind, str(meta.get("name") or ""), str(meta.get("namespace") or ""), gvk.version)
        if deleted:
            self.resource_created.remove(*labels)
            return
        created = _timestamp(meta.get("creationTimestamp"))
        if created is not None:
            self.resource_created.set(created, *labels)

    def render(self) -> str:
        return self.registry.render() + self.user.registry.render()


def _timestamp(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (``2026-01-01T00:00:00Z``); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class UserMetricError(ValueError):
    """A playbook's metric operation that cannot be applied (HTTP 400 with this message)."""


_USER_KINDS = ("counter", "gauge", "histogram", "summary")


class UserMetrics:
    """Metrics created and updated by playbooks (the SDK's osdk_metric payloads)."""

    def __init__(self, reserved: Registry) -> None:
        self.registry = Registry()
        self._reserved = reserved

    def apply(self, payload: Mapping[str, Any], now: Callable[[], float] = time.time) -> None:
        """Create the metric if needed, then apply the one operation in ``payload``."""
        name, kind, operation = self._parse(payload)
        _check(kind, operation)
        family = self._family(name, str(payload.get("description") or name), kind)
        if isinstance(family, Counter):
            _count(family, operation)
        elif isinstance(family, Gauge):
            _gauge(family, operation, now)
        elif isinstance(family, Histogram | Summary) and operation.get("observe") is not None:
            family.observe(_number(operation, "observe"))

    def _parse(self, payload: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
        name = payload.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UserMetricError(f"name {name!r} is not a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
        if name in self._reserved or any(name.startswith(p) for p in ("controller_runtime_", "workqueue_",
                                                                          "hybrid_operator_", "ansible_operator_")):
            raise UserMetricError(f"name {name!r} is reserved for the operator's own metrics")
        kinds = [k for k in _USER_KINDS if payload.get(k) is not None]
        if len(kinds) != 1:
            raise UserMetricError(f"metric {name}: give exactly one of {', '.join(_USER_KINDS)}")
        operation = payload[kinds[0]]
        if not isinstance(operation, Mapping):
            raise UserMetricError(f"metric {name}: {kinds[0]} must be a mapping")
        return name, kinds[0], operation

    def _family(self, name: str, description: str, kind: str) -> Family:
        existing = self.registry.get(name)
        if existing is not None:
            if existing.kind != kind:
                raise UserMetricError(f"metric {name} is a {existing.kind}, not a {kind}")
            return existing
        if len(self.registry) >= MAX_USER_METRICS:
            raise UserMetricError(f"too many playbook metrics (at most {MAX_USER_METRICS})")
        family: Family
        if kind == "counter":
            family = Counter(name, description)
        elif kind == "gauge":
            family = Gauge(name, description)
        elif kind == "histogram":
            family = Histogram(name, description, buckets=USER_BUCKETS)
        else:
            family = Summary(name, description)
        return self.registry.register(family)


def _number(operation: Mapping[str, Any], key: str) -> float:
    value = operation.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UserMetricError(f"{key} must be a number, got {value!r}")
    try:
        number = float(value)
    except ValueError as exc:
        raise UserMetricError(f"{key} must be a number, got {value!r}") from exc
    if math.isnan(number):
        raise UserMetricError(f"{key} must be a number, got NaN")
    return number


_NUMBERS = {"counter": ("add",), "gauge": ("set", "add", "subtract"), "histogram": ("observe",),
            "summary": ("observe",)}


def _check(kind: str, operation: Mapping[str, Any]) -> None:
    """Refuse a bad operation before anything is created."""
    for key in _NUMBERS[kind]:
        if operation.get(key) is not None:
            _number(operation, key)
    if kind == "counter" and operation.get("add") is not None and _number(operation, "add") < 0:
        raise UserMetricError(f"a counter cannot go down (add {_number(operation, 'add'):g})")


def _count(counter: Counter, operation: Mapping[str, Any]) -> None:
    if operation.get("increment"):
        counter.inc()
    if operation.get("add") is not None:
        amount = _number(operation, "add")
        if amount < 0:
            raise UserMetricError(f"counter {counter.name} cannot go down (add {amount:g})")
        counter.inc(amount=amount)


def _gauge(gauge: Gauge, operation: Mapping[str, Any], now: Callable[[], float]) -> None:
    if operation.get("set") is not None:
        gauge.set(_number(operation, "set"))
    if operation.get("increment"):
        gauge.add(1)
    if operation.get("decrement"):
        gauge.add(-1)
    if operation.get("add") is not None:
        gauge.add(_number(operation, "add"))
    if operation.get("subtract") is not None:
        gauge.add(-_number(operation, "subtract"))
    if operation.get("set_to_current_time"):
        gauge.set(now())

"""Unit tests for hybrid_operator.metrics: metric types, the text format, playbook metric operations."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hybrid_operator.controller.controller import outcome_result
from hybrid_operator.controller.metrics import (
    Counter,
    Gauge,
    Histogram,
    OperatorMetrics,
    Registry,
    Summary,
    UserMetricError,
    UserMetrics,
    format_value,
    gvk_label,
)
from hybrid_operator.controller.reconcile import Outcome
from support.metrics import parse_samples, sample

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (20.0, "20"), (-3.0, "-3"), (0.25, "0.25"), (1e20, "1e+20"), (math.inf, "+Inf"),
    (-math.inf, "-Inf"), (math.nan, "NaN"), (1.5, "1.5"),
])
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_counter_text_format_with_escaped_labels() -> None:
    counter = Counter("jobs_total", "Jobs done.\nPer queue.", ("queue",))
    counter.inc('a"b\\c')
    counter.inc("plain", amount=2.5)
    assert counter.render() == [
        "# HELP jobs_total Jobs done.\\nPer queue.",
        "# TYPE jobs_total counter",
        'jobs_total{queue="a\\"b\\\\c"} 1',
        'jobs_total{queue="plain"} 2.5',
    ]
    with pytest.raises(ValueError, match="cannot go down"):
        counter.inc("plain", amount=-1)


def test_unlabelled_families_show_zero_before_any_update() -> None:
    assert Counter("a_total", "a").samples() == ["a_total 0"]
    assert Gauge("b", "b").samples() == ["b 0"]


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram("work_seconds", "w", ("kind",), buckets=(0.1, 1.0, 10.0))
    for value in (0.05, 0.5, 0.7, 5.0, 50.0):
        histogram.observe(value, "x")
    assert histogram.samples() == [
        'work_seconds_bucket{kind="x",le="0.1"} 1',
        'work_seconds_bucket{kind="x",le="1"} 3',
        'work_seconds_bucket{kind="x",le="10"} 4',
        'work_seconds_bucket{kind="x",le="+Inf"} 5',
        'work_seconds_sum{kind="x"} 56.25',
        'work_seconds_count{kind="x"} 5',
    ]
    assert (histogram.count("x"), histogram.sum("x")) == (5, 56.25)


def test_summary_has_sum_and_count() -> None:
    summary = Summary("size", "s")
    summary.observe(2)
    summary.observe(3)
    assert summary.render()[1:] == ["# TYPE size summary", "size_sum 5", "size_count 2"]


@pytest.mark.parametrize(("build", "problem"), [
    (lambda: Counter("bad-name", "x"), "invalid metric name"),
    (lambda: Gauge("ok", "x", ("__reserved",)), "invalid label name"),
    (lambda: Histogram("h", "x", ("le",)), "label named le"),
    (lambda: Counter("c_total", "x", ("a",)).inc(), "takes labels"),
])
def test_invalid_definitions_and_uses(build: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        build()


def test_registry_refuses_duplicates_and_runs_collectors() -> None:
    registry = Registry()
    gauge = registry.register(Gauge("depth", "d", ("name",)))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Counter("depth", "again"))
    registry.add_collector(lambda: gauge.set(7, "q"))
    assert 'depth{name="q"} 7' in registry.render()


def test_operator_metrics_round_trip_through_the_text_format() -> None:
    metrics = OperatorMetrics("1.2.3")
    metrics.reconciled("Tick", "requeue_after", 0.4)
    metrics.reconciled("Tick", "error", 2.0)
    metrics.sdk_result.add(1, gvk_label("ops.dev", "v1", "Tick"), "succeeded")
    samples = parse_samples(metrics.render())
    assert sample(samples, "controller_runtime_reconcile_total", controller="Tick", result="requeue_after") == 1
    assert sample(samples, "controller_runtime_reconcile_errors_total", controller="Tick") == 1
    assert sample(samples, "controller_runtime_reconcile_time_seconds_count", controller="Tick") == 2
    assert sample(samples, "controller_runtime_reconcile_time_seconds_bucket", controller="Tick", le="0.5") == 1
    assert sample(samples, "controller_runtime_reconcile_time_seconds_sum", controller="Tick") == 2.4
    assert sample(samples, "ansible_operator_reconcile_result", GVK="ops.dev/v1, Kind=Tick",
                  result="succeeded") == 1
    assert sample(samples, "hybrid_operator_build_info", version="1.2.3") == 1
    assert sample(samples, "ansible_operator_build_info", commit="", version="1.2.3") == 1
    assert sample(samples, "hybrid_operator_dependent_watches") == 0


@pytest.mark.parametrize(("outcome", "result"), [
    (Outcome(), "success"),
    (Outcome(requeue_after=36000.0), "requeue_after"),
    (Outcome(requeue_after=0.0), "requeue"),
    (Outcome(failed=True), "error"),
    (Outcome(failed=True, retry_after=5.0), "error"),
])
def test_outcome_results_use_controller_runtime_labels(outcome: Outcome, result: str) -> None:
    assert outcome_result(outcome) == result


def test_gvk_label_of_a_core_kind_has_no_group() -> None:
    assert gvk_label("", "v1", "ConfigMap") == "v1, Kind=ConfigMap"


# -- playbook metrics --------------------------------------------------------------------------------

USER_OPERATIONS: list[tuple[list[dict[str, Any]], str, dict[str, str], float]] = [
    ([{"counter": {}}], "m", {}, 0),
    ([{"counter": {"increment": True}}, {"counter": {"add": 2.5}}], "m", {}, 3.5),
    ([{"gauge": {"set": 10}}, {"gauge": {"decrement": True}}, {"gauge": {"subtract": 4}}], "m", {}, 5),
    ([{"gauge": {"increment": True}}, {"gauge": {"add": "1.5"}}], "m", {}, 2.5),
    ([{"gauge": {"set_to_current_time": True}}], "m", {}, 1_000_000.0),
    ([{"histogram": {"observe": 0.3}}, {"histogram": {"observe": 7}}], "m_bucket", {"le": "0.5"}, 1),
    ([{"histogram": {"observe": 0.3}}, {"histogram": {"observe": 7}}], "m_count", {}, 2),
    ([{"summary": {"observe": 4}}, {"summary": {"observe": 6}}], "m_sum", {}, 10),
]


@pytest.mark.parametrize(("operations", "series", "labels", "value"), USER_OPERATIONS)
def test_user_metric_operations(operations: list[dict[str, Any]], series: str, labels: dict[str, str],
                                value: float) -> None:
    user = UserMetrics(Registry())
    for operation in operations:
        user.apply({"name": "m", "description": "a metric", **operation}, now=lambda: 1_000_000.0)
    assert sample(parse_samples(user.registry.render()), series, **labels) == value


USER_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"name": "9lives", "gauge": {"set": 1}}, "not a valid Prometheus metric name"),
    ({"name": 5, "gauge": {"set": 1}}, "not a valid"),
    ({"name": "taken", "gauge": {"set": 1}}, "reserved"),
    ({"name": "controller_runtime_custom", "gauge": {"set": 1}}, "reserved"),
    ({"name": "m"}, "exactly one of"),
    ({"name": "m", "gauge": {"set": 1}, "counter": {}}, "exactly one of"),
    ({"name": "m", "gauge": [1]}, "must be a mapping"),
    ({"name": "m", "gauge": {"set": "lots"}}, "must be a number"),
    ({"name": "m", "gauge": {"set": True}}, "must be a number"),
    ({"name": "m", "histogram": {"observe": "nan"}}, "NaN"),
    ({"name": "m", "counter": {"add": -2}}, "cannot go down"),
]


@pytest.mark.parametrize(("payload", "problem"), USER_ERRORS)
def test_user_metric_errors_create_nothing(payload: dict[str, Any], problem: str) -> None:
    reserved = Registry()
    reserved.register(Gauge("taken", "the operator's"))
    user = UserMetrics(reserved)
    with pytest.raises(UserMetricError, match=problem):
        user.apply(payload)
    assert len(user.registry) == 0


def test_user_metric_keeps_its_first_type_and_a_cap() -> None:
    user = UserMetrics(Registry())
    user.apply({"name": "m", "gauge": {"set": 1}})
    with pytest.raises(UserMetricError, match="is a gauge, not a counter"):
        user.apply({"name": "m", "counter": {"increment": True}})
    for index in range(1, 500):
        user.apply({"name": f"m{index}", "counter": {}})
    with pytest.raises(UserMetricError, match="too many"):
        user.apply({"name": "one_more", "counter": {}})


def test_parse_samples_reads_escaped_labels() -> None:
    counter = Counter("c_total", "c", ("path",))
    counter.inc('/a "b"\n')
    parsed = parse_samples("\n".join(counter.render()))
    assert sample(parsed, "c_total", path='/a "b"\n') == 1

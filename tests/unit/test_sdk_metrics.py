"""The metrics the SDK's own tests read (issue 14, gap 6).

memcached-molecule-operator asserts on ``sanity_histogram_bucket`` and ``sanity_summary summary``
for metrics its role creates without observing anything, and the SDK's e2e suite on
``resource_created_at_seconds{group,kind,name,namespace,version}`` for each CR.
"""

from __future__ import annotations

import pytest

from hybrid_operator.config.model import GroupVersionKind
from hybrid_operator.controller.metrics import OperatorMetrics

pytestmark = pytest.mark.unit

GVK = GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")


def test_a_user_histogram_without_observations_renders_zero_buckets_sum_and_count() -> None:
    metrics = OperatorMetrics("0.0.0")
    metrics.user.apply({"name": "sanity_histogram", "description": "h", "histogram": {}})
    text = metrics.render()
    assert "# TYPE sanity_histogram histogram" in text
    assert 'sanity_histogram_bucket{le="0.005"} 0' in text
    assert 'sanity_histogram_bucket{le="+Inf"} 0' in text
    assert "sanity_histogram_sum 0\n" in text
    assert "sanity_histogram_count 0\n" in text


def test_a_user_summary_without_observations_renders_zero_sum_and_count() -> None:
    metrics = OperatorMetrics("0.0.0")
    metrics.user.apply({"name": "sanity_summary", "description": "s", "summary": {}})
    text = metrics.render()
    assert "# TYPE sanity_summary summary" in text
    assert "sanity_summary_sum 0\n" in text
    assert "sanity_summary_count 0\n" in text


def test_observations_add_to_the_zero_series() -> None:
    metrics = OperatorMetrics("0.0.0")
    metrics.user.apply({"name": "histogram_test", "description": "h", "histogram": {"observe": 2}})
    metrics.user.apply({"name": "summary_test", "description": "s", "summary": {"observe": 2}})
    text = metrics.render()
    assert "histogram_test_sum 2\n" in text and "histogram_test_count 1\n" in text
    assert 'histogram_test_bucket{le="2.5"} 1' in text and 'histogram_test_bucket{le="1"} 0' in text
    assert "summary_test_sum 2\n" in text and "summary_test_count 1\n" in text


def test_labelled_operator_histograms_still_start_empty() -> None:
    text = OperatorMetrics("0.0.0").render()
    assert "controller_runtime_reconcile_time_seconds_bucket" not in text


def test_resource_created_at_seconds_per_cr() -> None:
    metrics = OperatorMetrics("0.0.0")
    cr = {"apiVersion": GVK.api_version, "kind": GVK.kind,
          "metadata": {"name": "memcached-sample", "namespace": "osdk-test",
                       "creationTimestamp": "2026-01-02T03:04:05Z"}}
    metrics.resource_seen(GVK, cr)
    sample = ('resource_created_at_seconds{group="cache.example.com",kind="Memcached",name="memcached-sample",'
              'namespace="osdk-test",version="v1alpha1"} 1767323045')
    assert sample in metrics.render()
    metrics.resource_seen(GVK, cr, deleted=True)
    assert "memcached-sample" not in metrics.render()

"""Reading Prometheus text back: what tests assert scraped metrics with."""

from __future__ import annotations

import re
from collections.abc import Mapping

Labels = tuple[str, ...]


def parse_samples(text: str) -> dict[tuple[str, Labels], float]:
    """``{(name, sorted label pairs): value}`` from Prometheus text (for tests and tooling)."""
    found: dict[tuple[str, Labels], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, rest = series.partition("{")
        pairs = tuple(sorted(f"{k}={_unescape(v)}" for k, v in _LABEL_PAIR.findall(rest)))
        found[(name, pairs)] = float(value.replace("+Inf", "inf").replace("-Inf", "-inf"))
    return found


_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def sample(samples: Mapping[tuple[str, Labels], float], name: str, /, **labels: str) -> float:
    """The value of the one series ``name`` with exactly ``labels`` (0 when absent, as Prometheus' absent())."""
    key = (name, tuple(sorted(f"{k}={v}" for k, v in labels.items())))
    return samples.get(key, 0.0)

"""A filter with module state and an environment side effect, for the warm runner's isolation test."""

from __future__ import annotations

import json
import os

_CALLS: list[str] = []


def isolation_probe(value: str) -> str:
    """Append what this process has seen before to $ISOLATION_PROBE_OUT, then leave state behind."""
    record = {"pid": os.getpid(), "calls_before": len(_CALLS),
              "leak_before": os.environ.get("HYBRID_ISOLATION_LEAK")}
    with open(os.environ["ISOLATION_PROBE_OUT"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    _CALLS.append(value)
    os.environ["HYBRID_ISOLATION_LEAK"] = "leaked"
    return value


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"isolation_probe": isolation_probe}

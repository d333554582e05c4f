"""The keys a ``watches.yaml`` entry may have, and what to say about one it may not.

Apart from :mod:`.entries` (which reads an entry key by key) so that the tables of keys and the
"did you mean" suggestions for a misspelled one are in one small place.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

COMMON_KEYS = frozenset(
    {"group", "version", "kind", "reconcilePeriod", "watchDependentResources", "selector"}
)
ANSIBLE_KEYS = COMMON_KEYS | {
    "playbook", "role", "vars", "manageStatus", "watchClusterScopedResources", "maxRunnerArtifacts",
    "finalizer", "blacklist", "snakeCaseParameters", "markUnsafe", "watchAnnotationsChanges", "triggers",
    "specOverrides",
}
HELM_KEYS = COMMON_KEYS | {"chart", "overrideValues", "maxConcurrentReconciles", "dryRunOption",
                           "allowCrossNamespace"}
FINALIZER_KEYS = frozenset({"name", "playbook", "role", "vars"})


def unknown_key_message(key: str, allowed: frozenset[str], path: tuple[str, ...]) -> str:
    if not path:
        if key == "maxConcurrentReconciles" and key not in allowed:
            return ("not a key of Ansible entries (as in the Operator SDK); set --max-concurrent-reconciles "
                    "or the MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> environment variable instead")
        if key in HELM_KEYS - ANSIBLE_KEYS:
            return "only valid for Helm entries (those with chart); remove it"
        if key in ANSIBLE_KEYS - HELM_KEYS:
            return "only valid for Ansible entries (those with playbook or role); remove it"
    suggestion = closest(key, allowed)
    hint = f'did you mean "{suggestion}"? ' if suggestion else ""
    return f"unknown key; {hint}valid keys here are: {', '.join(sorted(allowed))}"


def misspelled(mapping: Mapping[str, Any], key: str) -> bool:
    """Whether an unknown key of ``mapping`` looks like ``key`` (already reported as a suggestion)."""
    known = ANSIBLE_KEYS | HELM_KEYS
    return any(isinstance(other, str) and other not in known and closest(other, frozenset({key})) == key
               for other in mapping)


def closest(key: str, allowed: frozenset[str]) -> str | None:
    normalized = {candidate.lower().replace("_", "").replace("-", ""): candidate for candidate in allowed}
    exact = normalized.get(key.lower().replace("_", "").replace("-", ""))
    if exact is not None:
        return exact
    matches = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
    return matches[0] if matches else None


def key_path(keys: tuple[str, ...]) -> str:
    """``("blacklist", "[0]", "kind")`` -> ``blacklist[0].kind``."""
    return ".".join(keys).replace(".[", "[")

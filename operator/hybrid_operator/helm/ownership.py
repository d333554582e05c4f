"""Whose release is it: the owner label every release the operator makes carries, and the verdict.

Why this module exists: release name = CR name, so two Helm kinds with a CR of the same name in
one namespace, or a CR named like a release a person installed by hand, point at one release.
Acting on a release that is not ours is how an operator takes over (or uninstalls) someone else's
release (issue 13 item 3). The Operator SDK refuses a release of another chart ("duplicate release
name"); we go further and act only on releases we can prove are ours:

* every install and upgrade labels the release ``hybrid-operator.dev/owner=<Kind>.<group>`` (helm
  keeps release labels across upgrades and copies them on rollback);
* a release with that label naming our kind is ours; naming another kind, it is that kind's;
* a release without it but with :data:`~hybrid_operator.helm.release.INPUTS_LABEL` was made by an
  earlier hybrid-operator, which had no owner label: ours when its chart is ours (the SDK's rule),
  and the next upgrade adds the label;
* anything else was installed by someone else (by hand, by another tool): never ours. To hand such
  a release over, label it: ``helm upgrade <release> <chart> --reuse-values --labels
  hybrid-operator.dev/owner=<Kind>.<group>``.

:func:`claim` is pure: the reconciler asks it before every action that changes a release.
"""

from __future__ import annotations

import hashlib
import re

from hybrid_operator.config.model import GroupVersionKind
from hybrid_operator.helm.client import ReleaseInfo
from hybrid_operator.helm.release import INPUTS_LABEL

OWNER_LABEL = "hybrid-operator.dev/owner"
#: the beginning of the refusal message, as the Operator SDK words it
DUPLICATE = "duplicate release name"
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def owner_value(gvk: GroupVersionKind) -> str:
    """The owner label's value for a kind: ``Kind.group``, or ``Kind.<digest of group>`` when too long."""
    text = f"{gvk.kind}.{gvk.group}" if gvk.group else gvk.kind
    if _LABEL_VALUE.fullmatch(text):
        return text
    digest = hashlib.sha256(gvk.group.encode()).hexdigest()[:16]
    return f"{gvk.kind[:46]}.{digest}"


def claim(info: ReleaseInfo, owner: str, chart: str) -> str | None:
    """None when the release ``info`` describes is ours (we are ``owner``, our chart is ``chart``);
    otherwise why not, as a sentence naming the other owner."""
    label = info.labels.get(OWNER_LABEL)
    if label == owner:
        return None
    made_by = f"chart {info.chart}" if info.chart else "an unknown chart"
    if label:
        return (f"{DUPLICATE}: found existing release with name {info.name!r} for {made_by}, owned by "
                f"{label} (a resource of that kind with the same name in this namespace); rename one of them")
    if INPUTS_LABEL in info.labels and (not chart or not info.chart or info.chart == chart):
        return None
    return (f"{DUPLICATE}: found existing release with name {info.name!r} for {made_by}, not installed by "
            f"this operator; rename the resource, or hand the release over with `helm upgrade {info.name} "
            f"<chart> --reuse-values --labels {OWNER_LABEL}={owner}`")

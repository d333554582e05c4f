"""The state of one release, decided purely from what helm reports about it.

Why this module exists: every reconcile of a Helm CR first answers "what does this release need?",
and the answer decides between install, recovery, upgrade and drift repair.  Kept apart from the
helm calls, the decision is one pure function, :func:`release_state`, tested state by state
without helm:

============== ===============================================================================
state          when
============== ===============================================================================
needs-install  helm knows no release of that name
pending        the newest revision is ``pending-*``: an operation no helm process will finish
               (a killed operator); recover it first, by rolling back to the last revision that
               was deployed (see :func:`rollback_target`), or by uninstalling when none ever was
failed         no revision is deployed and none is pending (a failed install): remove, install
needs-upgrade  the candidate manifest (a dry-run upgrade with today's values) differs from the
               deployed one, and the inputs changed
unchanged      the candidate manifest holds the same objects as the deployed one (compared parsed,
               not as text): repair drift only; or they differ although the inputs (chart
               content + values, recorded in :data:`INPUTS_LABEL` on the revision we made) did
               not change: the chart renders nondeterministically (``nondeterministic``), and
               upgrading would make a new revision on every resync
============== ===============================================================================

The comparison is only possible, and only needed, when a revision is deployed and none is pending
(:func:`comparable_revision` says which); the caller fetches it then.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

import yaml

from hybrid_operator.helm.client import DEPLOYED, PENDING, SUPERSEDED, Release, ReleaseInfo, Revision
from hybrid_operator.helm.manifests import manifest_objects

#: the label tying the digest of a revision's inputs to that revision (see :func:`inputs_label`)
INPUTS_LABEL = "hybrid-operator.dev/inputs"


class Phase(enum.Enum):
    """What a release needs (see the module docstring)."""

    NEEDS_INSTALL = "needs-install"
    PENDING = "pending"
    FAILED = "failed"
    NEEDS_UPGRADE = "needs-upgrade"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Comparison:
    """The deployed revision next to the candidate: what an upgrade would change."""

    deployed: ReleaseInfo
    deployed_manifest: str
    candidate: Release


@dataclass(frozen=True)
class ReleaseState:
    """The answer of :func:`release_state`."""

    phase: Phase
    #: the newest revision number (0 when there is no release)
    latest_revision: int = 0
    #: its status as helm reports it (``pending-upgrade``, ``failed``, ...)
    latest_status: str = ""
    #: the last deployed revision: what drift repair re-applies; for a pending release, what it rolls back
    #: to (:func:`rollback_target`)
    deployed_revision: int | None = None
    #: unchanged inputs rendered to a different manifest
    nondeterministic: bool = False
    #: the evidence of an upgrade or unchanged decision
    comparison: Comparison | None = None


def same_objects(candidate: str, deployed: str) -> bool:
    """True when two manifests hold the same objects: equal text, or equal once parsed.

    A render may spell one value differently (``"x7Yq"`` on install, ``x7Yq`` when ``lookup``
    returns the stored value later), which is not a change. A manifest that does not parse is
    compared as text.
    """
    if candidate == deployed:
        return True
    try:
        return manifest_objects(candidate) == manifest_objects(deployed)
    except yaml.YAMLError:
        return False


def inputs_label(inputs: str, revision: int) -> str:
    """The label value tying an input digest to the revision made from it (labels survive user upgrades)."""
    return f"{inputs}-r{revision}"


def last_deployed(history: Sequence[Revision]) -> int | None:
    """The newest ``deployed`` revision of a history (oldest first), if any."""
    deployed = [r.revision for r in history if r.status == DEPLOYED]
    return deployed[-1] if deployed else None


def rollback_target(history: Sequence[Revision], pending: int) -> int | None:
    """The revision a release left ``pending`` (a revision number) rolls back to; None: uninstall it.

    The last ``deployed`` revision, or else the newest older one that was deployed once
    (``superseded``): helm marks the deployed revision superseded a moment before it marks the new one
    deployed, and an operator killed in between leaves no deployed revision although the release's
    objects are all there. Uninstalling it then would delete and make again every object of a release
    that was merely being upgraded.
    """
    deployed = last_deployed(history)
    if deployed is not None:
        return deployed
    earlier = [r.revision for r in history if r.status == SUPERSEDED and r.revision < pending]
    return earlier[-1] if earlier else None


def comparable_revision(latest: ReleaseInfo | None, history: Sequence[Revision]) -> int | None:
    """The deployed revision to compare a candidate with; None when the state is known without one.

    ``history`` is needed only when ``latest`` is not deployed.
    """
    if latest is None or latest.status in PENDING:
        return None
    if latest.status == DEPLOYED:
        return latest.revision
    return last_deployed(history)


def release_state(latest: ReleaseInfo | None, history: Sequence[Revision], comparison: Comparison | None,
                  inputs: str) -> ReleaseState:
    """What the release needs, from helm's answers.

    ``latest`` is ``helm get metadata`` of the newest revision (None: no release), ``history`` the
    revisions oldest first (may be empty when ``latest`` is deployed), ``comparison`` the deployed
    revision and the candidate (required exactly when :func:`comparable_revision` is not None), and
    ``inputs`` the digest of the chart and values this reconcile would install.
    """
    if latest is None:
        return ReleaseState(Phase.NEEDS_INSTALL)
    deployed = comparable_revision(latest, history)
    if latest.status in PENDING:
        return ReleaseState(Phase.PENDING, latest.revision, latest.status,
                            rollback_target(history, latest.revision))
    if deployed is None:
        return ReleaseState(Phase.FAILED, latest.revision, latest.status)
    if comparison is None or comparison.deployed.revision != deployed:
        raise ValueError(f"the state of a release with deployed revision {deployed} needs the comparison "
                         "of that revision with the candidate")
    unchanged = ReleaseState(Phase.UNCHANGED, latest.revision, latest.status, deployed, comparison=comparison)
    if same_objects(comparison.candidate.manifest, comparison.deployed_manifest):
        return unchanged
    if comparison.deployed.labels.get(INPUTS_LABEL) == inputs_label(inputs, deployed):
        return replace(unchanged, nondeterministic=True)
    return replace(unchanged, phase=Phase.NEEDS_UPGRADE)

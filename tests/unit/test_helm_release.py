"""Unit tests for hybrid_operator.helm.release: a release's state from what helm reports (pure)."""

from __future__ import annotations

import pytest

from hybrid_operator.helm.client import Release, ReleaseInfo, Revision
from hybrid_operator.helm.release import (
    INPUTS_LABEL,
    Comparison,
    Phase,
    comparable_revision,
    inputs_label,
    release_state,
)

pytestmark = pytest.mark.unit

INPUTS = "f" * 40
MANIFEST = "kind: ConfigMap\nmetadata:\n  name: a\n"
OTHER = "kind: ConfigMap\nmetadata:\n  name: b\n"


def info(revision: int, status: str, label: str | None = None) -> ReleaseInfo:
    return ReleaseInfo("m", revision, status, labels={INPUTS_LABEL: label} if label else {})


def compare(deployed: ReleaseInfo, candidate: str, manifest: str = MANIFEST) -> Comparison:
    return Comparison(deployed, manifest, Release("m", deployed.revision + 1, "pending-upgrade", candidate))


def history(*statuses: str) -> list[Revision]:
    return [Revision(index + 1, status) for index, status in enumerate(statuses)]


def test_no_release_needs_an_install() -> None:
    state = release_state(None, [], None, INPUTS)
    assert state.phase is Phase.NEEDS_INSTALL and state.latest_revision == 0


def test_a_pending_upgrade_rolls_back_to_the_last_deployed_revision() -> None:
    latest = info(3, "pending-upgrade")
    state = release_state(latest, history("superseded", "deployed", "pending-upgrade"), None, INPUTS)
    assert (state.phase, state.latest_revision, state.latest_status, state.deployed_revision) == \
        (Phase.PENDING, 3, "pending-upgrade", 2)


@pytest.mark.parametrize("pending", ["pending-upgrade", "pending-rollback"])
def test_a_release_killed_between_superseding_and_deploying_rolls_back_to_the_superseded_revision(
        pending: str) -> None:
    """helm marks the old revision superseded before the new one deployed: no revision is deployed then."""
    state = release_state(info(4, pending), history("superseded", "failed", "superseded", pending), None, INPUTS)
    assert (state.phase, state.deployed_revision) == (Phase.PENDING, 3)


@pytest.mark.parametrize("pending", ["pending-install", "pending-upgrade", "pending-rollback"])
def test_a_pending_release_that_was_never_deployed_has_nothing_to_roll_back_to(pending: str) -> None:
    state = release_state(info(2, pending), history("failed", pending), None, INPUTS)
    assert (state.phase, state.deployed_revision) == (Phase.PENDING, None)


def test_a_failed_install_with_nothing_deployed_is_failed() -> None:
    state = release_state(info(2, "failed"), history("failed", "failed"), None, INPUTS)
    assert (state.phase, state.latest_status, state.deployed_revision) == (Phase.FAILED, "failed", None)


def test_the_same_manifest_is_unchanged() -> None:
    deployed = info(4, "deployed", inputs_label("0" * 40, 4))
    state = release_state(deployed, [], compare(deployed, MANIFEST), INPUTS)
    assert (state.phase, state.deployed_revision, state.nondeterministic) == (Phase.UNCHANGED, 4, False)
    assert state.comparison is not None and state.comparison.candidate.manifest == MANIFEST


def test_a_different_manifest_from_new_inputs_needs_an_upgrade() -> None:
    deployed = info(4, "deployed", inputs_label("0" * 40, 4))
    state = release_state(deployed, [], compare(deployed, OTHER), INPUTS)
    assert (state.phase, state.latest_revision, state.deployed_revision) == (Phase.NEEDS_UPGRADE, 4, 4)


def test_a_revision_without_our_label_with_a_different_manifest_needs_an_upgrade() -> None:
    deployed = info(1, "deployed")
    assert release_state(deployed, [], compare(deployed, OTHER), INPUTS).phase is Phase.NEEDS_UPGRADE


def test_a_different_manifest_from_the_same_inputs_is_a_nondeterministic_render() -> None:
    deployed = info(4, "deployed", inputs_label(INPUTS, 4))
    state = release_state(deployed, [], compare(deployed, OTHER), INPUTS)
    assert (state.phase, state.nondeterministic) == (Phase.UNCHANGED, True)


def test_the_label_of_another_revision_does_not_count_as_the_same_inputs() -> None:
    """A rollback copies an old revision: its label names that revision, not the new one."""
    deployed = info(5, "deployed", inputs_label(INPUTS, 3))
    assert release_state(deployed, [], compare(deployed, OTHER), INPUTS).phase is Phase.NEEDS_UPGRADE


def test_a_failed_latest_revision_is_compared_with_the_last_deployed_one() -> None:
    latest = info(3, "failed")
    revisions = history("superseded", "deployed", "failed")
    assert comparable_revision(latest, revisions) == 2
    deployed = info(2, "deployed", inputs_label("0" * 40, 2))
    state = release_state(latest, revisions, compare(deployed, OTHER), INPUTS)
    assert (state.phase, state.latest_revision, state.deployed_revision) == (Phase.NEEDS_UPGRADE, 3, 2)


def test_comparable_revision() -> None:
    assert comparable_revision(None, []) is None
    assert comparable_revision(info(2, "deployed"), []) == 2
    assert comparable_revision(info(2, "pending-upgrade"), history("deployed", "pending-upgrade")) is None
    assert comparable_revision(info(2, "failed"), history("failed", "failed")) is None


def test_a_deployed_release_needs_its_comparison() -> None:
    with pytest.raises(ValueError, match="comparison"):
        release_state(info(2, "deployed"), [], None, INPUTS)
    with pytest.raises(ValueError, match="comparison"):
        release_state(info(2, "deployed"), [], compare(info(1, "deployed"), MANIFEST), INPUTS)

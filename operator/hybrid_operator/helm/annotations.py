"""The per-CR annotations of a Helm kind, read into :class:`HelmOptions` for one reconcile.

The SDK's annotations (``upgrade-force``, ``rollback-force`` defaulting to true, ``uninstall-wait``,
``reconcile-period``) and helm-operator-plugins' per-action ones (``<verb>-disable-hooks``,
``<verb>-description``), all under ``helm.sdk.operatorframework.io/`` (``compat-helm.md`` §4), and
the finalizers the SDK puts on a CR. A bad boolean falls back to its default, as in the SDK; a bad
reconcile period is a :class:`~hybrid_operator.errors.PermanentError`, and one out of its range is
brought into it (:mod:`hybrid_operator.config.bounds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hybrid_operator.config import bounds
from hybrid_operator.config.model import HelmWatch
from hybrid_operator.config.settings import Settings
from hybrid_operator.config.values import annotation_duration, parse_bool
from hybrid_operator.helm.client import ActionOptions
from hybrid_operator.kube import objects

PREFIX = "helm.sdk.operatorframework.io/"
FINALIZER = PREFIX + "uninstall-release"
LEGACY_FINALIZER = PREFIX + "uninstall-helm-release"
UPGRADE_FORCE = PREFIX + "upgrade-force"
ROLLBACK_FORCE = PREFIX + "rollback-force"
UNINSTALL_WAIT = PREFIX + "uninstall-wait"
RECONCILE_PERIOD = PREFIX + "reconcile-period"


@dataclass(frozen=True)
class HelmOptions:
    """What the CR's annotations ask of this reconcile (watch and flags as fallbacks)."""

    period: timedelta
    install: ActionOptions
    upgrade: ActionOptions
    rollback: ActionOptions
    uninstall: ActionOptions
    uninstall_wait: bool
    #: what an annotation asked beyond its floor or ceiling, and what is used instead (config.bounds)
    out_of_range: tuple[str, ...] = ()


#: the options of a reconcile whose annotations could not be read (it only reports the problem)
NO_OPTIONS = HelmOptions(timedelta(0), ActionOptions(), ActionOptions(), ActionOptions(), ActionOptions(), False)


def helm_options(obj: dict[str, Any], watch: HelmWatch, settings: Settings) -> HelmOptions:
    """Read the SDK's and helm-operator-plugins' annotations; a bad reconcile period raises PermanentError."""
    notes = objects.annotations(obj)
    period = watch.reconcile_period or settings.reconcile_period
    out_of_range = ""
    if RECONCILE_PERIOD in notes:
        period, out_of_range = bounds.period(RECONCILE_PERIOD, annotation_duration(notes, RECONCILE_PERIOD, period))

    def action(verb: str, force: bool = False) -> ActionOptions:
        return ActionOptions(no_hooks=parse_bool(notes.get(f"{PREFIX}{verb}-disable-hooks", ""), False),
                             description=str(notes.get(f"{PREFIX}{verb}-description", "")), force=force)

    return HelmOptions(
        period=period,
        install=action("install"),
        upgrade=action("upgrade", parse_bool(notes.get(UPGRADE_FORCE, ""), False)),
        rollback=ActionOptions(force=parse_bool(notes.get(ROLLBACK_FORCE, ""), True)),
        uninstall=action("uninstall"),
        uninstall_wait=parse_bool(notes.get(UNINSTALL_WAIT, ""), False),
        out_of_range=(out_of_range,) if out_of_range else (),
    )

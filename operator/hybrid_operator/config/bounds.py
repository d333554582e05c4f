"""The floor and the ceiling of every limit a custom resource's annotations can set.

Why this module exists: annotations are written by whoever may edit the resource, and the SDK takes
their numbers as they come. ``max-runner-artifacts: "0"`` (keep every run) with
``reconcile-period: 1ms`` gave one resource 188 run directories, 20 MB, in two and a half minutes
(issue 28 item 9). So each value an annotation gives is brought into its range here, and the
reconcilers tell the resource's author with a Warning Event (:data:`EVENT_REASON`) what was asked
and what is used instead.

=================================================  ======================  ==========================
annotation                                         floor                   ceiling
=================================================  ======================  ==========================
``{ansible,helm}.sdk.operatorframework.io/``        1s (``0`` keeps its     168h (7 days)
``reconcile-period``                               meaning: no periodic
                                                   resync)
``ansible.sdk.operatorframework.io/``              1                       the watch's
``max-runner-artifacts``                                                   ``maxRunnerArtifacts``
                                                                           (default 20)
``ansible.sdk.operatorframework.io/verbosity``      0                       7
=================================================  ======================  ==========================

A malformed value (not a duration, not a whole number) is still an error of the resource, as before.
"""

from __future__ import annotations

from datetime import timedelta

#: the reason of the Warning Event that tells a resource's author an annotation's value was changed
EVENT_REASON = "AnnotationOutOfRange"
PERIOD_FLOOR = timedelta(seconds=1)
PERIOD_CEILING = timedelta(days=7)
ARTIFACTS_FLOOR = 1
VERBOSITY_CEILING = 7


def period(annotation: str, asked: timedelta) -> tuple[timedelta, str]:
    """A ``reconcile-period`` within [1s, 7 days]; 0 stays 0 (the SDK's "no periodic resync")."""
    if asked == timedelta(0):
        return asked, ""
    if asked < PERIOD_FLOOR:
        return PERIOD_FLOOR, _note(annotation, _duration(asked), _duration(PERIOD_FLOOR), "the floor")
    if asked > PERIOD_CEILING:
        return PERIOD_CEILING, _note(annotation, _duration(asked), _duration(PERIOD_CEILING), "the ceiling")
    return asked, ""


def runner_artifacts(annotation: str, asked: int, ceiling: int) -> tuple[int, str]:
    """A ``max-runner-artifacts`` within [1, ``ceiling``] (the watch's value): ``0``, "keep all" in the SDK,
    keeps ``ceiling``."""
    ceiling = max(ARTIFACTS_FLOOR, ceiling)
    if asked < ARTIFACTS_FLOOR:
        why = "keeping every run is not allowed; the ceiling is the watch's maxRunnerArtifacts"
        return ceiling, _note(annotation, str(asked), str(ceiling), why)
    if asked > ceiling:
        return ceiling, _note(annotation, str(asked), str(ceiling), "the ceiling, the watch's maxRunnerArtifacts")
    return asked, ""


def verbosity(annotation: str, asked: int) -> tuple[int, str]:
    """A ``verbosity`` within [0, 7]."""
    if asked > VERBOSITY_CEILING:
        return VERBOSITY_CEILING, _note(annotation, str(asked), str(VERBOSITY_CEILING), "the ceiling")
    return asked, ""


def _note(annotation: str, asked: str, used: str, why: str) -> str:
    return f"annotation {annotation}: {asked} is out of range, {used} is used ({why})"


def _duration(value: timedelta) -> str:
    """A duration as Go writes short ones (``500ms``, ``1s``, ``168h0m0s``)."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    if micros < 0:
        return "-" + _duration(-value)
    if micros < 1_000_000:
        return f"{micros / 1000:g}ms"
    seconds = micros / 1_000_000
    hours, rest = divmod(int(seconds), 3600)
    minutes, whole = divmod(rest, 60)
    fraction = seconds - int(seconds)
    text = f"{whole + fraction:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text

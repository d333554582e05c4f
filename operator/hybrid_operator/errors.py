"""The operator's error hierarchy: what went wrong decides what happens next.

Three kinds of failure lead to three different reactions, so every error the operator raises on
purpose is one of these classes:

* :class:`ConfigurationError` -- the operator cannot start (bad ``watches.yaml``, bad flags). It is
  fatal: the CLI prints it and exits with :data:`ConfigurationError.exit_code` (2).
* :class:`TemporaryError` -- the reconcile should be retried, optionally after ``delay`` seconds
  (API server unreachable -- :class:`Unreachable` --, a conflict, a run that could not start).
* :class:`PermanentError` -- retrying will not help until the object changes; the reconciler
  reports it as a ``Failure`` condition instead of retrying.

Adapters' own errors derive from :class:`HybridOperatorError` too (``helm.client.HelmError`` carries what
helm said and a :class:`~hybrid_operator.helm.client.HelmErrorKind`). The embedded cluster
(``hybrid_operator.localcluster``) has its own errors and does not use these.
"""

from __future__ import annotations

from collections.abc import Sequence


class HybridOperatorError(Exception):
    """Base class of every error the operator raises deliberately."""


class ConfigurationError(HybridOperatorError):
    """The configuration is unusable; the process must stop with exit code 2.

    ``problems`` holds every individual problem found (a loader collects all of them instead of
    stopping at the first); the message lists them, one per line.
    """

    exit_code: int = 2

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        self.problems: tuple[str, ...] = tuple(problems) if problems else (message,)
        super().__init__(message)

    @classmethod
    def from_problems(cls, problems: Sequence[str], *, source: str) -> ConfigurationError:
        """One error for all ``problems`` found in ``source`` (a file name); needs at least one problem."""
        if not problems:
            raise ValueError("from_problems needs at least one problem")
        if len(problems) == 1:
            return cls(problems[0], problems=problems)
        listing = "\n".join(f"  - {problem}" for problem in problems)
        return cls(f"{source}: {len(problems)} problems:\n{listing}", problems=problems)


class TemporaryError(HybridOperatorError):
    """A failure worth retrying; ``delay`` (seconds) is a hint, None lets the backoff decide."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        if delay is not None and delay < 0:
            raise ValueError(f"delay must not be negative, got {delay}")
        self.delay = delay
        super().__init__(message)


class Unreachable(TemporaryError):
    """The API server could not be reached at all (refused, reset, timed out, no route).

    The client adapter logs an outage once when it starts and once when it ends, so the code that
    merely retries does not log it again.
    """


class PermanentError(HybridOperatorError):
    """A failure that retrying cannot fix until the object or the configuration changes."""

"""What a write asks for and what it answers: write options, outcomes, patch types.

The HTTP layer fills a :class:`WriteOptions` from the query string (and, for
DELETE, the DeleteOptions body); every write in :mod:`.crud` answers with an
:class:`Outcome`.  The patch types are the four ``Content-Type`` values a
PATCH may carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PATCH_MERGE = "application/merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (PATCH_JSON, PATCH_MERGE, PATCH_STRATEGIC, PATCH_APPLY)


@dataclass
class WriteOptions:
    """Query options of a write (POST, PUT, PATCH, DELETE)."""

    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"
    force: bool = False
    user_agent: str = ""
    propagation_policy: str | None = None
    grace_period_seconds: int | None = None
    preconditions: dict[str, Any] = field(default_factory=dict)

    def manager(self) -> str:
        if self.field_manager:
            return self.field_manager
        agent = self.user_agent.split("/", 1)[0].strip()
        return agent or "unknown"


@dataclass
class Outcome:
    """What a write produced: the object to answer with, its HTTP code, warnings."""

    obj: dict[str, Any]
    code: int = 200
    warnings: list[str] = field(default_factory=list)

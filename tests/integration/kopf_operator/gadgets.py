"""A minimal kopf operator for Gadgets, run by tests/integration/test_kopf.py with `kopf run`.

Each handler returns a value (kopf stores it in ``.status.<handler>`` through
the ``/status`` subresource), posts a ``kopf.info`` event, and logs a marker
line the test looks for.  The delete handler makes kopf manage a finalizer.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

RESOURCE = ("demo.hybrid.dev", "v1", "gadgets")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 60


@kopf.on.create(*RESOURCE)
def created(spec: kopf.Spec, name: str, body: kopf.Body, logger: logging.Logger, **_: Any) -> dict[str, Any]:
    kopf.info(body, reason="GadgetCreated", message=f"created {name} with size {spec.get('size')}")
    logger.info(f"CREATE-HANDLER {name} size={spec.get('size')}")
    return {"size": spec.get("size"), "color": spec.get("color", "none")}


@kopf.on.update(*RESOURCE, field="spec")
def updated(spec: kopf.Spec, name: str, body: kopf.Body, diff: kopf.Diff, logger: logging.Logger,
            **_: Any) -> dict[str, Any]:
    changes = sorted(".".join(str(part) for part in change[1]) for change in diff)
    kopf.info(body, reason="GadgetUpdated", message=f"updated {name}: {','.join(changes)}")
    logger.info(f"UPDATE-HANDLER {name} size={spec.get('size')}")
    return {"size": spec.get("size"), "changed": changes}


@kopf.on.delete(*RESOURCE)
def deleted(name: str, logger: logging.Logger, **_: Any) -> None:
    logger.info(f"DELETE-HANDLER {name}")

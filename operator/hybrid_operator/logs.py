"""Structured logging: fixed messages plus key/value pairs, as text or JSON.

Every module logs with a constant message and puts the variable parts in
``extra={...}``; this formatter renders those extras as ``key=value`` pairs
(text) or as fields of one JSON object per line (json), so logs can be grepped
and parsed alike.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

#: the extra rendered as a block of lines after the record in text logs
BLOCK_KEY = "output"
# Attributes every LogRecord has; anything else came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class TextFormatter(logging.Formatter):
    """``2026-11-30T10:00:00Z INFO logger message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        extras = _extras(record)
        # a multi-line ``output`` (a run's task output) follows the line as a block, as printed
        block = extras.pop(BLOCK_KEY) if isinstance(extras.get(BLOCK_KEY), str) and "\n" in extras[BLOCK_KEY] else None
        pairs = " ".join(f"{key}={_render(value)}" for key, value in extras.items())
        line = f"{stamp} {record.levelname:<7} {record.name} {record.getMessage()}"
        if pairs:
            line = f"{line} {pairs}"
        if block is not None:
            line = f"{line}\n----- {BLOCK_KEY} -----\n{block.rstrip()}\n-----"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then the extras."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        body.update(_extras(record))
        if record.exc_info:
            body["error"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


def _render(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or "=" in text or not text) else text


class KopfRetries(logging.Filter):
    """kopf's "Request attempt #n failed; will retry" as DEBUG, not ERROR.

    kopf logs every retried request of its watches at ERROR: with the API server away, four lines
    a second. The outage itself is logged once by the client ("API server unreachable", then
    "API server reachable again"); kopf's retries are details of it. The attempt that gives up
    ("escalating") keeps its level.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.ERROR and record.name.startswith("kopf")
                and isinstance(record.msg, str) and record.msg.startswith("Request attempt")
                and "failed; will retry" in record.msg):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def configure(level: str = "info", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(KopfRetries())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # kopf logs every handler call at INFO with its whole settings object; keep only its problems
    # unless debugging.
    if level.lower() != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)

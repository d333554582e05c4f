"""Does a chart read the cluster while it renders? A conservative scan of its templates for ``lookup``.

Why this module exists: a no-change resync may skip the render only when the render cannot depend on
anything but the chart and the values (both in the inputs digest). ``lookup`` is the template
function that reads live objects, so a chart that calls it must be rendered on every resync. The
scan errs on the side of rendering:

* every file of the chart is read, subcharts included (directories under ``charts/`` and ``.tgz``
  archives, nested to any depth), not only ``templates/``: ``.Files.Get`` and ``tpl`` can turn any
  file into a template;
* ``lookup`` counts wherever it appears inside ``{{ ... }}`` (comments and strings included);
* a chart that calls ``tpl`` renders strings of its values as templates, so values that mention
  ``lookup`` make that reconcile render too (:meth:`ChartScan.renders_live`);
* a chart that cannot be read, or an archive that cannot be opened, counts as calling ``lookup``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_ACTION = re.compile(rb"\{\{.*?\}\}", re.DOTALL)
_LOOKUP = re.compile(rb"\blookup\b")
_TPL = re.compile(rb"\btpl\b")
_ARCHIVE_SUFFIXES = (".tgz", ".tar.gz")
#: files larger than this are not templates anyone renders; they are still scanned when they are archives
_MAX_TEXT = 8 * 1024 * 1024


@dataclass(frozen=True)
class ChartScan:
    """What the scan of one chart found."""

    #: some template action calls ``lookup`` (or the chart could not be read)
    lookup: bool
    #: some template action calls ``tpl`` (values may carry templates of their own)
    tpl: bool

    def renders_live(self, values: Mapping[str, Any]) -> bool:
        """True when rendering with ``values`` may read the cluster: skip no render then."""
        if self.lookup:
            return True
        return self.tpl and b"lookup" in json.dumps(values, default=str).encode()


#: what an unreadable chart counts as
UNKNOWN = ChartScan(lookup=True, tpl=True)


def scan_chart(chart: Path) -> ChartScan:
    """Scan a chart directory or archive (see the module docstring); never raises."""
    lookup = tpl = False
    try:
        files = _directory_files(chart) if chart.is_dir() else _archive_files(chart.read_bytes())
        for content in files:
            for action in _ACTION.findall(content):
                lookup = lookup or bool(_LOOKUP.search(action))
                tpl = tpl or bool(_TPL.search(action))
            if lookup and tpl:
                break
    except (OSError, tarfile.TarError, EOFError, ValueError) as exc:
        log.warning("chart not scanned, rendering it on every resync", extra={"chart": str(chart), "error": str(exc)})
        return UNKNOWN
    return ChartScan(lookup=lookup, tpl=tpl)


def _directory_files(root: Path) -> Iterator[bytes]:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.name.endswith(_ARCHIVE_SUFFIXES):
            yield from _archive_files(path.read_bytes())
        elif path.stat().st_size <= _MAX_TEXT:
            yield path.read_bytes()


def _archive_files(data: bytes) -> Iterator[bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            extracted = archive.extractfile(member)
            if extracted is None:
                continue
            content = extracted.read()
            if member.name.endswith(_ARCHIVE_SUFFIXES):
                yield from _archive_files(content)
            elif len(content) <= _MAX_TEXT:
                yield content

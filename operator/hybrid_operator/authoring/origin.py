"""Where the running hybrid-operator was installed from, so that a project made by ``init`` installs the same.

A scaffolded project's ``make setup`` must work on the machine it was made on, offline if need be:
pinning ``hybrid-operator==<version>`` works only where a package index has that version, which is
not the case for a checkout or a wheel built by ``make dist``. pip records where an installed
distribution came from (PEP 610, ``direct_url.json``); from it:

* a local directory (``pip install -e .`` or ``pip install .`` of a checkout): that checkout, as
  ``hybrid-operator @ file:///path``, with the checkout's ``requirements.lock`` as constraints so the
  new project gets the same pinned dependencies;
* a local wheel (``pip install dist/hybrid_operator-*.whl``): that wheel, as ``hybrid-operator @
  file:///path.whl``;
* anything else (an index, or a remote URL pip installed from): ``hybrid-operator==<version>`` (or
  the URL), as an index user expects.

Running from a source tree that pip never installed (``PYTHONPATH=operator``) counts as its checkout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from hybrid_operator import __version__

DISTRIBUTION = "hybrid-operator"
LOCK_FILE = "requirements.lock"


@dataclass(frozen=True)
class Origin:
    """How a new project installs hybrid-operator: a requirement line and where it points, in words."""

    requirement: str
    #: "the checkout /path", "the wheel /path.whl" or "a package index" (for the generated README)
    description: str
    #: a requirements file whose pins the new project's install follows (a checkout's requirements.lock)
    constraints: Path | None = None


def for_checkout(root: Path) -> Origin:
    lock = root / LOCK_FILE
    return Origin(f"{DISTRIBUTION} @ {root.resolve().as_uri()}", f"the checkout {root.resolve()}",
                  lock.resolve() if lock.is_file() else None)


def for_wheel(wheel: Path) -> Origin:
    return Origin(f"{DISTRIBUTION} @ {wheel.resolve().as_uri()}", f"the wheel {wheel.resolve()}")


def from_index(version: str = __version__) -> Origin:
    return Origin(f"{DISTRIBUTION}=={version}", "a package index")


def from_direct_url(text: str) -> Origin | None:
    """The origin a PEP 610 ``direct_url.json`` records (None when it is not usable)."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    url = str(record.get("url", "")) if isinstance(record, dict) else ""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return Origin(f"{DISTRIBUTION} @ {url}", url) if url and "vcs_info" not in record else None
    path = Path(unquote(parsed.path))
    if "dir_info" in record:
        return for_checkout(path)
    if path.suffix == ".whl":
        return for_wheel(path)
    return None


def source_checkout(package_dir: Path) -> Path | None:
    """The checkout a package directory (``<root>/operator/hybrid_operator``) lies in, if it is one."""
    root = package_dir.resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and f'name = "{DISTRIBUTION}"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def current() -> Origin:
    """Where the running hybrid-operator came from (see the module docstring)."""
    try:
        recorded = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        recorded = None
    found = from_direct_url(recorded) if recorded else None
    if found is not None:
        return found
    checkout = source_checkout(Path(__file__).resolve().parent.parent)
    return for_checkout(checkout) if checkout is not None else from_index()

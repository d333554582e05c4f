"""``make lint``'s size check: no function above cyclomatic complexity 20, no module above 600 lines.

radon rates a function D or worse above complexity 20; such a function no longer fits in one
reader's head, and a module of more than 600 lines holds more than one concept. Prints every
offender with its place and exits 1, or prints nothing and exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from radon.complexity import cc_visit

MAX_COMPLEXITY = 20
MAX_LINES = 600
#: Ansible modules shipped as data run inside Ansible; they follow Ansible's module layout
EXCLUDED = ("ansible/collections/",)


def offenders(root: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if any(part in relative for part in EXCLUDED):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MAX_LINES:
            found.append(f"{path}: {lines} lines (at most {MAX_LINES}); split it by concept")
        for block in cc_visit(text):
            if block.complexity > MAX_COMPLEXITY:
                found.append(f"{path}:{block.lineno}: {block.fullname} has cyclomatic complexity "
                             f"{block.complexity} (at most {MAX_COMPLEXITY}); split it")
    return found


def main(argv: list[str]) -> int:
    roots = [Path(arg) for arg in argv] or [Path("operator/hybrid_operator")]
    found = [line for root in roots for line in offenders(root)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

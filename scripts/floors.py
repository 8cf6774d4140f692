"""Print the floors of ``ora_core`` and the modules on each (``ora_core/kernel/floors.py`` states them;
``tests/test_layering.py`` enforces them).

    .venv/bin/python scripts/floors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ora_core.kernel.floors import FLOOR_NAMES, FLOORS, count  # noqa: E402


def modules_by_floor() -> dict[int, list[str]]:
    found: dict[int, list[str]] = {floor: [] for floor in FLOOR_NAMES}
    for path in sorted((REPO / "ora_core").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        floor = 0 if len(parts) == 1 else FLOORS.get(parts[1])
        if floor is not None:
            found[floor].append(".".join(parts))
    return found


def main() -> int:
    print(f"ora_core: {count()} floors; a module imports its own floor and the ones beneath it")
    for floor, modules in sorted(modules_by_floor().items(), reverse=True):
        print(f"\nfloor {floor}: {FLOOR_NAMES[floor]} ({len(modules)} modules)")
        for module in modules:
            print(f"    {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

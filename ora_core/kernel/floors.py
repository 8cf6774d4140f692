"""The floors of ``ora_core``, stated once: a module may import its own floor and the ones beneath it.

``tests/test_layering.py`` enforces them (imports read with ``ast``, string imports included);
``python scripts/floors.py`` prints each floor and the modules on it; the docs that name the number
of floors are checked against ``FLOORS`` (``tests/test_layering.py``).
"""

from __future__ import annotations

#: package under ``ora_core`` -> its floor (``ora_core/__init__.py`` itself is on the kernel's floor).
FLOORS: dict[str, int] = {"kernel": 0, "kits": 1, "engine": 2, "api": 3, "cli": 4, "testing": 4}
#: floor -> what it is called.
FLOOR_NAMES: dict[int, str] = {0: "kernel", 1: "kits", 2: "engine", 3: "api", 4: "cli/testing"}
#: How many floors there are, in the words the docs use.
COUNT_WORDS = {3: "three", 4: "four", 5: "five", 6: "six"}


def count() -> int:
    return len(set(FLOORS.values()))

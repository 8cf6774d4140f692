"""Why Ora's entry-point cache and not stevedore's: the table of ``docs/plugins.md`` ("How plugins are
found and loaded") is what ``benchmarks/entry_points.py`` observes the two caches do, row by row, on
distributions laid out in a temporary directory. A stevedore release that changes one of them
fails here, and the page (and the choice) is revisited."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "plugins.md"
TABLE_HEAD = "| behaviour | Ora's cache | stevedore's cache |"


def benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("entry_points_benchmark", REPO / "benchmarks" / "entry_points.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_rows() -> list[tuple[str, str, str]]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(TABLE_HEAD)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [re.sub(r"^`(.*)`$", r"\1", cell.strip()) for cell in line.strip().strip("|").split(" | ")]
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_the_documented_comparison_is_what_the_two_caches_do(tmp_path: Path) -> None:
    observed = benchmark().behaviour(tmp_path)
    assert documented_rows() == observed


def test_the_comparison_shows_where_stevedores_cache_falls_short(tmp_path: Path) -> None:
    rows = {question: (ours, theirs) for question, ours, theirs in benchmark().behaviour(tmp_path)}
    assert rows["the distribution of an entry point"] == ("ora-demo 0.1.0", "none kept")
    assert rows["an entry point added in place, entry_points.txt 1 s newer"][1].startswith("NOT seen")
    assert rows["an interpreter installed under /tmp"] == ("cached", "NOT cached (caching off)")
    assert all(ours.startswith(("seen", "rebuilt, said", "said", "ora-demo", "cached")) for ours, _ in rows.values())

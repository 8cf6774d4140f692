"""docs/serve.md's failure semantics table: every row names the tests that pin it, and each named test
exists in plugins/ora-serve/tests (a row without a test, or naming one that is gone, fails here)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "serve.md"
TESTS = REPO / "plugins" / "ora-serve" / "tests"


def table_rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Failure semantics", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| outcome")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows if not set(row) <= set("|-")]


def test_every_row_of_the_failure_table_names_tests_that_exist() -> None:
    rows = table_rows()
    outcomes = [row[0] for row in rows]
    for required in ("`ok`", "`degraded`", "`needs_clarification`", "`halted`", "the client disconnects",
                     "shutdown (SIGTERM)"):
        assert any(o.startswith(required) for o in outcomes), (required, outcomes)
    for row in rows:
        named = re.findall(r"`(test_[a-z_]+\.py)(?:::(test_[a-z0-9_]+))?`", row[-1])
        assert named, f"row {row[0]!r} names no test"
        for file, test in named:
            source = (TESTS / file).read_text(encoding="utf-8")
            if test:
                assert f"def {test}(" in source, f"{file}::{test} (row {row[0]!r}) does not exist"
            else:
                assert "def test_" in source

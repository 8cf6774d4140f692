"""Issue 13, item 6: the fault and abuse matrix, one test per staged cell (``matrix.py`` says how each
fault is staged on the real part and what "named" means there).

Every staged cell asserts the named record on disk and that no verdict became PASS (for the trace sink:
that tracing is never reported healthy), and, where the case configured a secret, that it is nowhere
on disk. Cells that do not apply, and gaps Ora does not handle (reported, not staged because they would
hang the run), are not skipped silently: ``test_every_cell_of_the_matrix_is_staged_or_says_why`` fails
when a boundary x fault cell is missing or lacks its reason. The controls prove "no PASS" can fail:
the same setups without their faults end ``ok`` with a PASS. ``benchmarks/faults.py`` prints the
summary.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matrix import FAULTS, Case, Lab, all_cases, controls, run_case  # noqa: E402

CASES = all_cases()
STAGED = [c for c in CASES if c.stage is not None]
CONTROLS = controls()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with Lab(tmp_path_factory.mktemp("faults")) as shared:
        yield shared


def test_every_cell_of_the_matrix_is_staged_or_says_why() -> None:
    boundaries = sorted({c.boundary for c in CASES})
    cells = Counter((c.boundary, c.fault) for c in CASES)
    assert len(boundaries) == 13
    missing = [(b, f) for b in boundaries for f in FAULTS if cells[(b, f)] == 0]
    doubled = [cell for cell, n in cells.items() if n > 1]
    assert missing == [] and doubled == []
    for case in CASES:
        kinds = [bool(case.stage), bool(case.not_applicable), bool(case.gap)]
        assert sum(kinds) == 1, f"{case.id}: staged, not applicable or a gap, exactly one"
        if not case.stage:
            assert len(case.not_applicable or case.gap) > 30, f"{case.id}: say why"


@pytest.mark.parametrize("control", CONTROLS, ids=[c.boundary for c in CONTROLS])
def test_without_its_fault_the_setup_ends_ok_with_a_pass(control: object, lab: Lab) -> None:
    turn = control.stage(lab)  # type: ignore[attr-defined]
    assert turn.result.status == "ok", (turn.result.contingencies, turn.stderr)
    assert "PASS" in turn.result.verdicts.values()


def _marks(case: Case) -> list[pytest.MarkDecorator]:
    if case.expect_pass_gap:
        return [pytest.mark.xfail(strict=True, reason=f"gap found, reported: {case.expect_pass_gap}")]
    return []


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in STAGED])
def test_the_fault_is_named_on_disk_and_no_verdict_became_pass(case: Case, lab: Lab) -> None:
    outcome = run_case(case, lab)
    assert outcome.status == "named", f"{case.id}: {outcome.status}: {outcome.why}"
    assert outcome.record

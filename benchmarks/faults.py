"""The fault and abuse matrix's summary (issue 13, item 6): every boundary x every fault kind.

Runs each case of ``tests/faults/matrix.py`` (real local servers, a real Chroma store, a real browser,
the real model file, the real trace sink; one whole turn per case, read back from disk) and the
controls (the same setups without their faults, which must end ``ok`` with a PASS), then prints one
line per case and the summary: cases tried, named, silent (must be 0), not applicable (with the
reason), gaps found (applicable, not handled by Ora: reported, with the reason).

    python benchmarks/faults.py [--only SUBSTRING] [--json PATH]

Exit status 1 when a case is silent or a control did not PASS. ``tests/faults/test_matrix.py`` runs
the same cases under pytest, one test each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "faults"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from matrix import FAULTS, Lab, Outcome, all_cases, controls, outcome_of  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="run only the cases whose 'boundary x fault' contains this")
    parser.add_argument("--json", default="", help="also write the outcomes to this file")
    args = parser.parse_args()
    cases = [c for c in all_cases() if args.only in c.id]
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    control_failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ora-faults-") as tmp, Lab(Path(tmp)) as lab:
        if not args.only:
            for control in controls():
                turn = control.stage(lab)
                ok = turn.result.status == "ok" and "PASS" in turn.result.verdicts.values()
                print(f"control  {control.boundary:<52} {turn.result.status:<9} {turn.result.verdicts}")
                if not ok:
                    control_failures.append(control.boundary)
        for case in cases:
            outcome = outcome_of(case, lab)
            outcomes.append(outcome)
            detail = (outcome.record if outcome.status == "named" else outcome.why).replace("\n", " ")
            print(f"{outcome.status:<15} {case.id:<52} {detail[:150]}", flush=True)
    elapsed = time.perf_counter() - started
    by = {s: [o for o in outcomes if o.status == s] for s in ("named", "silent", "not-applicable", "gap")}
    tried = len(by["named"]) + len(by["silent"]) + sum(1 for o in by["gap"] if o.record)
    boundaries = sorted({o.boundary for o in outcomes})
    print()
    print(f"fault matrix: {len(boundaries)} boundaries x {len(FAULTS)} faults = {len(outcomes)} cells "
          f"in {elapsed:.0f} s")
    print(f"  cases tried:     {tried}")
    print(f"  named:           {len(by['named'])}")
    print(f"  silent:          {len(by['silent'])}" + ("" if not by["silent"] else "  <-- FAILURES"))
    print(f"  not applicable:  {len(by['not-applicable'])}")
    print(f"  gaps found:      {len(by['gap'])} (applicable, not handled by Ora; reported)")
    print(f"  controls:        {len(controls()) - len(control_failures)} of {len(controls())} PASS"
          if not args.only else "  controls:        not run (--only)")
    for status in ("silent", "gap", "not-applicable"):
        if by[status]:
            print(f"\n{status}:")
            for o in by[status]:
                print(f"  {o.boundary} x {o.fault}: {o.why}")
    if args.json:
        Path(args.json).write_text(json.dumps([o.model_dump() for o in outcomes], indent=2))
    return 1 if by["silent"] or control_failures else 0


if __name__ == "__main__":
    sys.exit(main())

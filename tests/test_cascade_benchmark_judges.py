"""``benchmarks/cascade.py`` judges its figures: each target printed MET or MISS against the side it
names (LangGraph + SqliteSaver for the full trace, LangGraph plain for the trace off), ``--strict``
turns a MISS into exit 1 (without it the benchmark exits 0, like the others), and the README's
benchmark table states the targets the benchmark judges."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("cascade_bench", REPO / "benchmarks" / "cascade.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _figures(**overrides):
    figures = {"a": {"ora": 1.0, "ora-ledger": 0.95, "ora-notrace": 0.38, "langgraph": 0.30,
                     "langgraph-sqlite": 1.30},
               "b": {"ora": 1.01, "langgraph": 1.008},
               "c": {"ora": 1.05, "langgraph": 1.06, "langgraph-sqlite": 1.07}}
    for key, value in overrides.items():
        part, side = key.split("__")
        figures[part][side.replace("_", "-")] = value
    return figures


def test_every_target_met_is_judged_met(capsys):
    bench = _bench()
    assert bench.judge(_figures()) is True
    out = capsys.readouterr().out
    assert out.count("MET") == len(bench.TARGETS) and "MISS" not in out


def test_the_full_trace_is_judged_against_langgraph_with_its_sqlite_saver(capsys):
    bench = _bench()
    # 1.05 ms is under LangGraph plain x anything judged, but over 0.8 x the saver's 1.30 ms
    assert bench.judge(_figures(a__ora=1.05, a__ora_ledger=1.0)) is False
    line = next(x for x in capsys.readouterr().out.splitlines() if "full trace" in x)
    assert "1.0500 vs 1.3000" in line and line.endswith("MISS")


def test_the_trace_off_is_judged_against_langgraph_plain(capsys):
    bench = _bench()
    assert bench.judge(_figures(a__ora_notrace=0.40)) is False  # 0.40 > 1.3 x 0.30
    line = next(x for x in capsys.readouterr().out.splitlines() if "trace off ≤" in x)
    assert "0.4000 vs 0.3000" in line and line.endswith("MISS")


def test_the_verbatim_calls_b_and_c_are_each_judged(capsys):
    bench = _bench()
    assert bench.judge(_figures(a__ora_ledger=0.90)) is False  # 1.0 / 0.90 > 1.10
    assert bench.judge(_figures(b__ora=1.03)) is False
    assert bench.judge(_figures(c__ora=1.07)) is False  # over LangGraph plain's 1.06
    misses = [x for x in capsys.readouterr().out.splitlines() if x.endswith("MISS")]
    assert [m.split()[0] for m in misses] == ["(a)", "(b)", "(c)"]


def test_a_side_not_measured_is_named_not_judged(capsys):
    bench = _bench()
    figures = _figures()
    del figures["a"]["langgraph-sqlite"]
    assert bench.judge(figures) is True  # the others are met; the missing one is said, not judged
    line = next(x for x in capsys.readouterr().out.splitlines() if "full trace" in x)
    assert line.endswith("not measured")


def test_strict_alone_turns_a_miss_into_exit_1():
    bench = _bench()
    assert bench.exit_status(met=False, strict=False) == 0
    assert bench.exit_status(met=False, strict=True) == 1
    assert bench.exit_status(met=True, strict=True) == 0


def test_the_readme_row_states_each_judged_target():
    bench = _bench()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `cascade.py` |"))
    target_cell = row.split(" | ")[2]
    for target in bench.TARGETS:
        assert target.text in target_cell, f"the README's cascade row does not state {target.text!r}"
    # and no target the benchmark no longer judges: every "(x) ... ≤" clause is one of TARGETS
    stated = re.findall(r"\([abc]\)[^;]*≤[^;]*", target_cell)
    assert len(stated) == len(bench.TARGETS), stated

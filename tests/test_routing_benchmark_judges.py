"""``benchmarks/routing.py`` judges its figures: each target printed MET or MISS (issue 25's held-out
accuracy and ask-back, each failure class, the median routing time against the router it replaced,
the warm p95), and ``--strict`` turns a MISS into exit 1 (without it the benchmark exits 0)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMING = {"combined_p95": 12.0, "ratio": 1.02}
CLASSES = {"own-term": {"rate": 0.95}, "named-choice": {"rate": 0.92}}


def _bench():
    spec = importlib.util.spec_from_file_location("routing_bench", REPO / "benchmarks" / "routing.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["routing_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_each_target_is_judged_met_or_missed(capsys):
    bench = _bench()
    assert bench.judge({"accuracy": 0.96, "ask_back": 0.0}, TIMING, "heldout2", CLASSES) is True
    assert bench.judge({"accuracy": 0.93, "ask_back": 0.0}, TIMING, "heldout2", CLASSES) is False
    assert bench.judge({"accuracy": 0.96, "ask_back": 0.04}, TIMING, "heldout2", CLASSES) is False
    assert bench.judge({"accuracy": 0.96, "ask_back": 0.0}, {**TIMING, "combined_p95": 31.0}, "heldout2") is False
    assert bench.judge({"accuracy": 0.96, "ask_back": 0.0}, {**TIMING, "ratio": 1.2}, "heldout2") is False
    assert bench.judge({"accuracy": 0.96, "ask_back": 0.0}, TIMING, "heldout2",
                       {**CLASSES, "case-for": {"rate": 0.85}}) is False
    out = capsys.readouterr().out
    assert "accuracy, heldout2 (>= 95%)" in out and "93.0%  MISS" in out and "96.0%  MET" in out
    assert "class case-for (>= 90%)" in out and "85.0%  MISS" in out
    assert "median routing time vs before" in out and "x1.200  MISS" in out
    assert "31.0 ms  MISS" in out


def test_the_before_router_stays_importable_beside_the_shipped_one():
    bench = _bench()
    before = bench.before_router()
    assert callable(before.dispatch) and callable(before.run_routing)
    assert before is not sys.modules["ora_core.engine.routing"]

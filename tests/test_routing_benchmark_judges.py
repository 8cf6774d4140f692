"""``benchmarks/routing.py`` judges its figures: each README target printed MET or MISS, and ``--strict``
turns a MISS into exit 1 (without it the benchmark exits 0, like the others)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("routing_bench", REPO / "benchmarks" / "routing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_target_is_judged_met_or_missed(capsys):
    bench = _bench()
    assert bench.judge({"accuracy": 0.93, "ask_back": 0.0}, 12.0, "held-out") is True
    assert bench.judge({"accuracy": 0.86, "ask_back": 0.0}, 12.0, "held-out") is False
    assert bench.judge({"accuracy": 0.95, "ask_back": 0.08}, 12.0, "held-out") is False
    assert bench.judge({"accuracy": 0.95, "ask_back": 0.0}, 31.0, "held-out") is False
    out = capsys.readouterr().out
    assert "accuracy, held-out (>= 90%)" in out and "86.0%  MISS" in out and "93.0%  MET" in out
    assert "31.0 ms  MISS" in out

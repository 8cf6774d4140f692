"""Cost of the forensic trace on the model-call path: 200 turns through the front of the
pipeline on a zero-latency scripted backend, trace-fs sink on vs off, interleaved in one run.

    .venv/bin/python benchmarks/trace_overhead.py [--turns 200] [--no-fsync] [--durability turn|async]

Steps are counted from each turn's own result (the steps its trace records: a cui-bono turn
writes ~17 step files, a bypassed one 2), not assumed. Figures per step: the time spent inside
the sink's ``open_turn`` and ``handle`` on the pipeline thread (the direct cost); the wall-clock
turn time minus the sink's ``close_turn`` (on vs off: the direct cost plus GIL, GC and cache
effects of the writer thread); and the whole wall-clock difference, **including the close** — with
``[trace] durability = "turn"`` the turn waits for its files before it returns, so that is what a
caller pays. Target: <= 0.1 ms added per step, judged on the whole difference (the drain
included); the other two are printed to show where it goes. ``--durability async`` measures the
group-commit setting (the turn does not wait; the sink is flushed, untimed, at the end).
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import ora_bypass
import ora_scripted
import ora_signals
import ora_trace_fs

import ora_modes
from ora_core.engine import run_turn
from ora_core.testing import make_host, make_runtime, scripted_config

PROMPTS = ["Cui bono on the harness paradigm shift in commercial AI?", "Hello, what time is it?"]
PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nCui bono on the harness paradigm shift in commercial AI?\n"
                    "CORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}


def build(root: Path, traced: bool, fsync: bool, durability: str = "turn"):
    plugins = [ora_scripted, ora_bypass, ora_signals, ora_modes] + ([ora_trace_fs] if traced else [])
    resolved = scripted_config(root, rules=[PHASE_A], trace={"enabled": traced, "durability": durability},
                               plugins={"trace-fs": {"fsync": fsync}})
    rt = make_runtime(make_host(*plugins), resolved, stderr=io.StringIO())
    drain: list[float] = []
    direct: list[float] = []
    steps: list[str] = []  # every step the traced turns finished (one step file each)
    if traced:
        sink = rt.host.get("trace_sink", "trace-fs")
        original_close, original_open, original_handle = sink.close_turn, sink.open_turn, sink.handle

        def timed_close(turn):
            start = time.perf_counter()
            try:
                return original_close(turn)
            finally:
                drain.append(time.perf_counter() - start)

        def timed_open(turn, ctx):
            start = time.perf_counter()
            try:
                return original_open(turn, ctx)
            finally:
                direct.append(time.perf_counter() - start)

        def timed_handle(event):
            if event.kind == "step_finished":
                steps.append(event.step)
            start = time.perf_counter()
            try:
                return original_handle(event)
            finally:
                direct.append(time.perf_counter() - start)

        sink.close_turn, sink.open_turn, sink.handle = timed_close, timed_open, timed_handle
    return rt, drain, direct, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--no-fsync", action="store_true", help="trace-fs option fsync = false")
    parser.add_argument("--durability", choices=("turn", "async"), default="turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        on, drain, direct, steps = build(Path(tmp) / "on", True, not args.no_fsync, args.durability)
        off, _, _, _ = build(Path(tmp) / "off", False, False)
        for rt in (on, off):  # warm up: imports, mode loading, regex compilation
            run_turn(rt, PROMPTS[0])
        sink = on.host.get("trace_sink", "trace-fs")
        sink.flush(60.0)
        warm_files = sum(1 for _ in (Path(tmp) / "on").rglob("[0-9][0-9]-*.json"))
        drain.clear()
        direct.clear()
        steps.clear()
        times = {"on": [], "off": []}
        for i in range(args.turns):
            prompt = PROMPTS[i % len(PROMPTS)]
            for label, rt in (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on)):
                start = time.perf_counter()
                result = run_turn(rt, prompt)
                times[label].append(time.perf_counter() - start)
                assert result.status in ("ok", "degraded")
                if label == "on":
                    assert result.trace_path and not result.tracing_degraded
        if not sink.flush(60.0):
            raise SystemExit("the trace writer did not commit within 60 s")
        files = sum(1 for _ in (Path(tmp) / "on").rglob("*.*"))
        step_files = sum(1 for _ in (Path(tmp) / "on").rglob("[0-9][0-9]-*.json")) - warm_files
    total_on, total_off = sum(times["on"]), sum(times["off"])
    path_on = total_on - sum(drain)
    n_steps = len(steps)
    if n_steps != step_files:
        raise SystemExit(f"{n_steps} steps counted from the events but {step_files} step files written")
    print(f"{args.turns} turns each, {n_steps} steps on the traced side ({n_steps / args.turns:.1f} per turn, "
          f"counted from the events; {step_files} step files), fsync={'off' if args.no_fsync else 'on'}, "
          f"durability={args.durability}; {files} trace files written")
    print(f"sink off : {1000 * total_off / args.turns:7.3f} ms/turn (median "
          f"{1000 * statistics.median(times['off']):.3f})")
    print(f"sink on  : {1000 * total_on / args.turns:7.3f} ms/turn (median "
          f"{1000 * statistics.median(times['on']):.3f}), of which close_turn "
          f"{1000 * sum(drain) / args.turns:.3f} ms/turn")
    in_sink = 1000 * sum(direct) / n_steps
    added_path = 1000 * (path_on - total_off) / n_steps
    added = 1000 * (total_on - total_off) / n_steps
    print(f"time inside the sink on the pipeline thread (open_turn + handle): {in_sink:.4f} ms/step")
    print(f"wall-clock added before the close (turn minus close_turn, on vs off): {added_path:.4f} ms/step")
    print(f"wall-clock added in total, the close the turn waits for included: {added:.4f} ms/step "
          f"(target <= 0.1) -> {'MET' if added <= 0.1 else 'MISS'}")


if __name__ == "__main__":
    main()

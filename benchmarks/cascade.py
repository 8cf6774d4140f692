"""Gear 4's cascade, three ways, side by side in one run: Ora vs LangGraph vs plain asyncio.

    .venv/bin/python benchmarks/cascade.py [--runs 40] [--slow-runs 3] [--turns 50] [--quick]

The same cascade (seed 001 steps 3-8): 2 analysts in parallel, 2 cross-evaluations in
parallel, 2 revisers in parallel, 2 verifications in parallel, consolidation, final
verification: 10 model calls on 6 sequential levels.

1. **Ora**: ``run_turn_async`` with mode ``cui-bono`` (Gear 4), verifier ``"model"`` for both
   gates, two scripted backends (``plugins/ora-scripted``, ``latency_s``) of different families
   for the depth and breadth slots, the forensic trace sink ``ora-trace-fs`` ON with its default
   options (fsync on) writing into a temp dir, and the detector plugins a default install runs
   on every output (ora-signals, ora-bypass, ora-broken, ora-health-detectors). Retrieval streams
   are off (the other two do no retrieval either). Ora also runs Phase A, which is a model call:
   it is **counted** (11 calls per turn, 7 sequential levels on Ora's critical path); Ora's
   non-model steps (Stage 0, routing, context assembly, assertions, the final-output step, the
   trace drain at turn end) are counted as overhead.
2. **LangGraph** (benchmark-only dependency, the ``bench`` extra): a ``StateGraph`` with
   fan-out/fan-in per level, no checkpointer.
3. **plain asyncio**: ``asyncio.gather`` per level: the limit.

(2) and (3) call the same fake model: ``asyncio.sleep(latency)`` (skipped at 0, as the scripted
backend does) and a fixed reply. Measured:

(a) zero latency: orchestration overhead per model call = wall / model calls, median over
    ``--runs`` turns after warm-up, the three interleaved; target Ora <= LangGraph.
(b) 200 ms per call: wall / critical path (levels x 200 ms), median of ``--slow-runs``; target
    <= 1.02.
(c) ``--turns`` (50) concurrent turns at 100 ms per call: wall / ideal (one turn's critical
    path); target <= 1.05. Each concurrent Ora turn gets its own trace directory (checked).

The machine is shared: absolute figures are noisy; the ratios measured side by side in one run
are what counts. An Ora row with trace-fs ``fsync = false`` (files complete and atomic at turn
end, not forced to the device) is printed beside the default; PASS/MISS judges the default.
Exit status 0 either way (like the other benchmarks): read the PASS/MISS lines.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import operator
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

LEVELS = 6
CALLS = 10
ORA_LEVELS = LEVELS + 1  # Phase A
ORA_CALLS = CALLS + 1
PROMPT = "Cui bono on the harness paradigm shift in commercial AI?"
CLEANED = "Cui bono on the harness paradigm shift in commercial AI: who benefits and who pays?"

# --- the fake models of (2) and (3) --------------------------------------------------------------


async def fake_model(role: str, prompt: str, latency: float) -> str:
    if latency:
        await asyncio.sleep(latency)
    return f"{role}: a fixed reply to {len(prompt)} characters. CONFIDENCE: 0.90"


# --- (3) plain asyncio ---------------------------------------------------------------------------


async def asyncio_cascade(prompt: str, latency: float) -> dict[str, str]:
    depth, breadth = await asyncio.gather(fake_model("depth", prompt, latency),
                                          fake_model("breadth", prompt, latency))
    ev_d, ev_b = await asyncio.gather(fake_model("evaluate-depth", depth, latency),
                                      fake_model("evaluate-breadth", breadth, latency))
    rev_d, rev_b = await asyncio.gather(fake_model("revise-depth", depth + ev_d, latency),
                                        fake_model("revise-breadth", breadth + ev_b, latency))
    ver_d, ver_b = await asyncio.gather(fake_model("verify-depth", rev_d, latency),
                                        fake_model("verify-breadth", rev_b, latency))
    consolidated = await fake_model("consolidate", rev_d + rev_b + ver_d + ver_b, latency)
    final = await fake_model("final-verify", consolidated, latency)
    return {"answer": consolidated, "final": final}


# --- (2) LangGraph -------------------------------------------------------------------------------


class CascadeState(TypedDict, total=False):
    prompt: str
    latency: float
    out: Annotated[dict[str, str], operator.or_]  # each node adds its own key: a fan-in merge


def build_langgraph() -> Any:
    from langgraph.graph import END, START, StateGraph

    def node(role: str, *inputs: str) -> Callable[[CascadeState], Awaitable[dict[str, Any]]]:
        async def run(state: CascadeState) -> dict[str, Any]:
            out = state.get("out", {})
            text = state["prompt"] + "".join(out[i] for i in inputs)
            return {"out": {role: await fake_model(role, text, state["latency"])}}
        return run

    builder = StateGraph(CascadeState)
    levels = [
        {"depth": (), "breadth": ()},
        {"evaluate-depth": ("depth",), "evaluate-breadth": ("breadth",)},
        {"revise-depth": ("depth", "evaluate-depth"), "revise-breadth": ("breadth", "evaluate-breadth")},
        {"verify-depth": ("revise-depth",), "verify-breadth": ("revise-breadth",)},
        {"consolidate": ("revise-depth", "revise-breadth", "verify-depth", "verify-breadth")},
        {"final-verify": ("consolidate",)},
    ]
    previous: list[str] = []
    for level in levels:
        for role, inputs in level.items():
            builder.add_node(role, node(role, *inputs))
            if previous:
                builder.add_edge(previous if len(previous) > 1 else previous[0], role)  # fan-in
            else:
                builder.add_edge(START, role)  # fan-out
        previous = list(level)
    builder.add_edge(previous[0], END)
    return builder.compile()  # no checkpointer


# --- (1) Ora ---------------------------------------------------------------------------------------


def _reply(tag: str) -> str:
    body = " ".join(["the evidence supports a careful reading of who gains and who pays as harness vendors"] * 3)
    return f"{tag}: {body.capitalize()}.\nCONFIDENCE: 0.90"


_EVALUATION = "\n".join(f"## {i}. {name}\nNone found beyond the general point." for i, name in enumerate(
    ["UNSUPPORTED CLAIMS", "SKIPPED INFERENTIAL STEPS", "MISPLACED CONFIDENCE", "CONFABULATED SPECIFICS",
     "MISSING CONSIDERATIONS", "CRITERIA CHECK", "REQUIRED CHANGES"], 1)) + "\nCONFIDENCE: 0.90"
_RECORD = ("\n## CRITICISMS ACCEPTED\n- missing stakeholder: end users — added\n"
           "## CRITICISMS REJECTED\n- motive claim — the analysis never asserts motive")
# Literal patterns (no ``.*`` across a long prompt): the fake model's own cost stays small, as
# it is for the other two.
RULES = [
    {"match": "PHASE A CLEANUP", "on": "system",
     "reply": f"CLEANED PROMPT:\n{CLEANED}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"},
    {"match": "ROLE: VERIFIER", "on": "system",
     "reply": "Checked each claim against the evidence package; all are supported.\n\n## VERDICT\nVERDICT: PASS"},
    {"match": "ROLE: EVALUATOR", "on": "system", "reply": _EVALUATION},
    {"match": r"ROLE: REVISER \(gear 4, step 5\) — the DEPTH", "on": "system",
     "reply": _reply("DEPTH-REVISED") + _RECORD},
    {"match": r"ROLE: REVISER \(gear 4, step 5\) — the BREADTH", "on": "system",
     "reply": _reply("BREADTH-REVISED") + _RECORD},
    {"match": "ROLE: CONSOLIDATOR", "on": "system", "reply": _reply("CONSOLIDATED")},
    {"match": "ROLE: DEPTH ANALYST", "on": "system", "reply": _reply("DEPTH-ANALYSIS")},
    {"match": "ROLE: BREADTH ANALYST", "on": "system", "reply": _reply("BREADTH-ANALYSIS")},
]


def ora_runtime(trace_root: Path, latency: float, *, fsync: bool = True) -> Any:
    import ora_broken
    import ora_bypass
    import ora_health_detectors
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes
    from ora_core.testing import make_host, make_runtime, scripted_config

    options = {"rules": RULES, "latency_s": latency}
    backend = {"type": "scripted", "context_window": 32768, "options": options}
    resolved = scripted_config(
        trace_root, rules=RULES,
        backends={"local": {**backend, "model": "depth-model", "family": "alpha"},
                  "other": {**backend, "model": "breadth-model", "family": "beta"}},
        roles={"breadth": "other"},
        verification={"verifier": "model", "final_verifier": "model"},
        retrieval={"streams": {"concept": False, "conversation": False, "relationship": False, "web": False}},
        trace={"enabled": True, "sinks": ["trace-fs"]},
        plugins={"trace-fs": {"fsync": fsync}},
    )
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                     ora_health_detectors)
    return make_runtime(host, resolved, stderr=io.StringIO())


async def ora_turn(rt: Any) -> Any:
    from ora_core.engine.runner import run_turn_async

    result = await run_turn_async(rt, PROMPT, mode="cui-bono")
    problems = []
    if (result.status, result.gear) != ("ok", 4):
        problems.append(f"status {result.status!r} gear {result.gear} contingencies {result.contingencies}")
    if len(result.runtime_role_models) != ORA_CALLS:
        problems.append(f"{len(result.runtime_role_models)} model calls, expected {ORA_CALLS}")
    if not result.trace_path or result.tracing_degraded:
        problems.append(f"trace {result.trace_path!r} degraded={result.tracing_degraded}: {rt.stderr.getvalue()}")
    if set(result.verdicts.values()) != {"PASS"}:
        problems.append(f"verdicts {result.verdicts}")
    if problems:
        raise SystemExit("ora turn is not the clean cascade being measured: " + "; ".join(problems))
    return result


# --- measuring -------------------------------------------------------------------------------------


Runner = Callable[[], Awaitable[Any]]


async def timed(run: Runner) -> float:
    start = time.perf_counter()
    await run()
    return time.perf_counter() - start


async def interleaved(sides: dict[str, Runner], runs: int, warmup: int = 3) -> dict[str, list[float]]:
    """``runs`` timings per side, the sides taking turns (in rotating order) so that load on the
    shared machine hits them alike."""
    for run in sides.values():
        for _ in range(warmup):
            await run()
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for i in range(runs):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            times[name].append(await timed(sides[name]))
    return times


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ora-cascade-bench-") as tmp:
        return await measure(args, Path(tmp))


async def measure(args: argparse.Namespace, tmp: Path) -> int:
    graph = build_langgraph()
    lg_out = await graph.ainvoke({"prompt": PROMPT, "latency": 0.0, "out": {}})
    assert len(lg_out["out"]) == CALLS, sorted(lg_out["out"])
    calls = {"ora": ORA_CALLS, "ora-nofsync": ORA_CALLS, "langgraph": CALLS, "asyncio": CALLS}
    levels = {"ora": ORA_LEVELS, "ora-nofsync": ORA_LEVELS, "langgraph": LEVELS, "asyncio": LEVELS}
    label = {"ora": "Ora (trace-fs on, fsync on)", "ora-nofsync": "Ora (trace-fs on, fsync off)",
             "langgraph": "LangGraph (no checkpointer)", "asyncio": "plain asyncio (gather)"}

    def sides(latency: float, root: str, with_nofsync: bool) -> dict[str, Runner]:
        ora = ora_runtime(tmp / root / "ora", latency)
        out: dict[str, Runner] = {"ora": lambda: ora_turn(ora)}
        if with_nofsync:
            ora_nf = ora_runtime(tmp / root / "ora-nofsync", latency, fsync=False)
            out["ora-nofsync"] = lambda: ora_turn(ora_nf)
        out["langgraph"] = lambda: graph.ainvoke({"prompt": PROMPT, "latency": latency, "out": {}})
        out["asyncio"] = lambda: asyncio_cascade(PROMPT, latency)
        return out

    print(f"cascade: {CALLS} model calls on {LEVELS} levels (Ora: +Phase A = {ORA_CALLS} calls, {ORA_LEVELS} "
          "levels, counted); machine shared (2 cores): compare the ratios of one run, not absolutes\n")

    # (a) zero latency
    times = await interleaved(sides(0.0, "a", True), args.runs)
    per_call = {n: 1000 * statistics.median(t) / calls[n] for n, t in times.items()}
    print(f"(a) zero latency, median of {args.runs} turns: orchestration overhead per model call")
    for name, ms in per_call.items():
        print(f"    {label[name]:32s} {ms:8.3f} ms/call   ({1000 * statistics.median(times[name]):8.2f} ms/turn)")
    a_ok = per_call["ora"] <= per_call["langgraph"]
    print(f"    target Ora <= LangGraph: {per_call['ora']:.3f} vs {per_call['langgraph']:.3f} ms/call "
          f"(x{per_call['ora'] / per_call['langgraph']:.2f}) -> {verdict(a_ok)}\n")

    # (b) 200 ms per call
    lat_b = 0.2
    times = await interleaved(sides(lat_b, "b", True), args.slow_runs, warmup=1)
    ratio_b = {n: statistics.median(t) / (levels[n] * lat_b) for n, t in times.items()}
    print(f"(b) {lat_b * 1000:.0f} ms per call, median of {args.slow_runs}: wall / critical path "
          f"({LEVELS} levels x {lat_b * 1000:.0f} ms; Ora {ORA_LEVELS} levels)")
    for name, r in ratio_b.items():
        print(f"    {label[name]:32s} {r:8.4f}   ({statistics.median(times[name]):.3f} s/turn)")
    b_ok = ratio_b["ora"] <= 1.02
    print(f"    target Ora <= 1.02: {ratio_b['ora']:.4f} -> {verdict(b_ok)}\n")

    # (c) concurrent turns at 100 ms per call
    lat_c, n = 0.1, args.turns
    runners = sides(lat_c, "c", True)
    ratio_c: dict[str, float] = {}
    walls: dict[str, float] = {}
    for name, run in runners.items():
        await run()  # warm-up

        async def batch(run: Runner = run) -> list[Any]:
            return list(await asyncio.gather(*(run() for _ in range(n))))

        start = time.perf_counter()
        results = await batch()
        walls[name] = time.perf_counter() - start
        ratio_c[name] = walls[name] / (levels[name] * lat_c)
        if name.startswith("ora"):
            paths = [r.trace_path for r in results]
            if len(set(paths)) != n:
                raise SystemExit(f"(c) {n} concurrent Ora turns shared trace directories: "
                                 f"{n - len(set(paths))} duplicates")
            incomplete = [p for p in paths if not (Path(p) / "step-health.json").exists()]
            if incomplete:
                raise SystemExit(f"(c) {len(incomplete)} trace(s) incomplete at turn end, e.g. {incomplete[0]}")
    print(f"(c) {n} concurrent turns at {lat_c * 1000:.0f} ms per call: wall / ideal "
          f"(one turn's critical path: {LEVELS} levels; Ora {ORA_LEVELS})")
    for name, r in ratio_c.items():
        print(f"    {label[name]:32s} {r:8.4f}   ({walls[name]:.3f} s for {n} turns)")
    c_ok = ratio_c["ora"] <= 1.05
    print(f"    target Ora <= 1.05: {ratio_c['ora']:.4f} -> {verdict(c_ok)}; {n} distinct, complete Ora trace "
          "directories\n")

    print("summary (PASS/MISS: Ora with its defaults, fsync on; the fsync-off column for comparison)")
    print(f"    {'target':44s} {'Ora':>9s} {'fsync off':>10s} {'LangGraph':>10s} {'asyncio':>9s}  result")
    rows = [("(a) ms per call, zero latency (<= LangGraph)", per_call, "9.3f", a_ok),
            ("(b) wall / critical path, 200 ms (<= 1.02)", ratio_b, "9.4f", b_ok),
            (f"(c) wall / ideal, {n} turns x 100 ms (<= 1.05)", ratio_c, "9.4f", c_ok)]
    for title, values, fmt, ok in rows:
        print(f"    {title:44s} {values['ora']:{fmt}} {values['ora-nofsync']:>10{fmt[1:]}} "
              f"{values['langgraph']:>10{fmt[1:]}} {values['asyncio']:{fmt}}  {verdict(ok)}")
    return 0 if (a_ok and b_ok and c_ok) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="(a): timed turns per side")
    parser.add_argument("--slow-runs", type=int, default=3, help="(b): timed turns per side")
    parser.add_argument("--turns", type=int, default=50, help="(c): concurrent turns")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 / 1 / 10")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.slow_runs, args.turns = 5, 1, 10
    asyncio.run(main_async(args))  # PASS/MISS is printed; a MISS is not an error exit


if __name__ == "__main__":
    main()

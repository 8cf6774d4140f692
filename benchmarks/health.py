"""``ora health --html`` over 10,000 turns: from the index beside the traces, and from a full re-read.

    .venv/bin/python benchmarks/health.py [--turns 10000] [--dir DIR] [--runs 3]

Generates ``--turns`` synthetic turns with the trace's real file shapes (``turn.json``,
``step-health.json``, ``NN-<step>.json`` + ``.md`` per step, the four JSONL logs; Gear 1, 2 and
4 turns with the real step names, verdicts, contingencies, supplements, coverage gaps, role
mismatches, and 1 % interrupted turns), and the index the sink would have appended at each close
(``ora_trace_fs.index.build_line``, the sink's own function). Then, each as the real command in
a fresh process (wall time from spawn to exit, peak RSS: the process's own ``VmHWM``):

1. ``ora health --html`` from the index (``--runs`` times: the median and the largest RSS);
2. the same with 1 % of the index lines missing (those turns are read from their files and
   added back: the stale-index path);
3. ``ora health --html --rebuild-index``: every turn read from its files (the comparison).

Targets for (1): <= 5 s and <= 300 MB. Also printed: what the sink's close pays for the index
line (build, encode, append) per turn. The files are written under ``--dir`` (kept, and reused
by a later run with the same ``--turns``) or a temporary directory (removed). The re-read runs
on a warm page cache (the files were just written): from a cold disk it is slower still.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

TARGET_S = 5.0
TARGET_MB = 300.0
MARKER = ".bench-health.json"

WORDS = ("harness", "model", "vendor", "lock-in", "evidence", "claim", "stakeholder", "mechanism", "revenue",
         "platform", "developer", "regulator", "margin", "integration", "benchmark", "pipeline", "verifier",
         "consolidation", "breadth", "depth")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _steps_for(gear: int) -> list[tuple[str, str]]:
    """(step, stream) of a turn of this gear, in order."""
    if gear == 1:
        return [("stage0-bypass", ""), ("direct-response", "")]
    head = [("stage0-bypass", ""), ("phase-a", ""), ("pre-routing", ""), ("context-assembly", ""),
            ("context-assertions", "")]
    if gear == 2:
        return head + [("gear2-analyst", ""), ("gear2-cycle1-verify", ""), ("final-output", "")]
    return head + [("role-slots", ""), ("step3-depth-analyst", "depth"), ("step3-breadth-analyst", "breadth"),
                   ("step4-breadth-evaluates-depth", "depth"), ("step4-depth-evaluates-breadth", "breadth"),
                   ("step5-depth-reviser", "depth"), ("step5-breadth-reviser", "breadth"),
                   ("step6-cycle1-depth-verify", "depth"), ("step6-cycle1-breadth-verify", "breadth"),
                   ("step7-consolidation", ""), ("step8-final-verify", ""), ("final-output", "")]


def synthetic_turn(rng: random.Random, started: datetime, conversation: str) -> dict[str, Any]:
    """One turn's documents, shaped as the sink writes them."""
    gear = rng.choices((1, 2, 4), weights=(15, 25, 60))[0]
    mode = {1: "simple", 2: "standard", 4: rng.choice(("cui-bono", "decision-analysis", "steelman"))}[gear]
    turn_id = started.strftime("%Y%m%dT%H%M%S.%fZ") + f"-{rng.getrandbits(24):06x}"
    at = started
    docs, health, contingencies, supplements, model_calls = [], [], [], [], []
    status = "ok"
    mismatch = rng.random() < 0.03
    for index, (step, stream) in enumerate(_steps_for(gear), 1):
        latency = {"phase-a": 4.8, "context-assembly": 0.23}.get(step, 0.0)
        kind = ""
        if "analyst" in step or "evaluates" in step or "reviser" in step or "consolidation" in step \
                or step == "direct-response":
            latency, kind = rng.lognormvariate(2.2, 0.4), "probabilistic"
        elif step.endswith("verify"):
            latency, kind = rng.lognormvariate(-1.8, 0.5), "deterministic"
        latency = latency or rng.uniform(0.00005, 0.09)
        verdict, degraded, events, names = "OK", False, [], []
        output: dict[str, Any] = {}
        inputs: dict[str, Any] = {"query": _text(rng, 18), "mode": mode, "requested_gear": gear}
        if kind == "probabilistic":
            inputs = {"role": stream or "analyst", "kind": kind, "stream": stream, "prompt_key": f"gear{gear}.{step}",
                      "package": _text(rng, 60), "evidence": _text(rng, 160)}
            text = _text(rng, 120)
            n_supp = 1 if rng.random() < 0.12 else 0
            gap = rng.random() < 0.06
            if gap:
                text += "\n\n## COVERAGE GAP\nThe package does not give the figure."
            output = {"text": text, "status": "ok", "confidence": round(rng.uniform(0.4, 0.95), 2),
                      "supplements": [], "noncompliance": {}}
            for n in range(n_supp):
                record = {"seq": index * 10 + n, "at": at.isoformat(), "kind": "supplement", "step": step, "n": n + 1,
                          "gap": _text(rng, 8), "query": _text(rng, 5), "streams": ["concept"], "chunks": 3,
                          "result_chars": 900, "failed_streams": [], "package_had_terms": False,
                          "resolved": rng.random() < 0.7, "resolution": "the re-submitted call answered"}
                supplements.append(record)
                events.append(record)
            call = {"kind": "model_call", "step": step, "role": stream or "analyst", "prompt_key": inputs["prompt_key"],
                    "planned_provider": "local-llm", "planned_model": "SmolLM2-135M-Instruct",
                    "effective_provider": "local-llm", "effective_model": "SmolLM2-135M-Instruct",
                    "fallback_flags": [], "prompt_tokens": 900, "completion_tokens": 160, "latency_s": latency,
                    "error": None, "attempts": 1, "cached": False}
            if mismatch and not model_calls:
                call.update(effective_provider="spare", effective_model="spare-1", fallback_flags=["timeout"])
            model_calls.append(call)
            events.append(call)
            if rng.random() < 0.5:
                names.append(f"{step}-confidence-missing")
            noncompliance = {"confident-confabulator": 1} if rng.random() < 0.1 else {}
            if step == "step7-consolidation" and rng.random() < 0.12:
                degraded, verdict = True, "DEGRADED"
                names.append(f"{step}-degraded-kept-previous")
        elif kind == "deterministic":
            verdict = rng.choices(("PASS", "FAIL", "BROKEN"), weights=(60, 30, 10))[0]
            reasons = [f"unsupported (0.0{rng.randint(1, 9)}): \"{_text(rng, 12)}\"" for _ in range(3)]
            output = {"verdict": {"status": verdict, "verifier": "grounding", "reasons": reasons,
                                  "raw_output": "## GROUNDING REPORT\n" + "\n".join(reasons),
                                  "score": round(rng.random(), 3), "unsupported_claims": [_text(rng, 12)],
                                  "data": {"threshold": 0.35}}, "status": verdict}
            inputs = {"kind": kind, "verifier": "grounding", "slot": stream, "subject": _text(rng, 80),
                      "criteria": _text(rng, 30), "evidence_chunks": 6, "evidence_sources": ["/vault/gears.md"]}
            if verdict == "BROKEN":
                degraded = True
                names.append(f"{step}-verifier-BROKEN-not-verified")
            noncompliance = {}
        else:
            noncompliance = {}
            if step == "context-assembly":
                chunks = [{"id": f"{rng.getrandbits(64):016x}", "text": _text(rng, 50),
                           "provenance": {"collection": "vault", "source": f"/vault/note-{rng.randint(1, 40)}.md",
                                          "heading": "", "stream": "concept", "score": round(rng.random(), 3),
                                          "extra": {}}} for _ in range(6)]
                output = {"mode": mode, "retrievals": {"concept": {"stream": "concept", "chunks": chunks}},
                          "budget": {"level": 6, "signals": [], "utilization": 0.4}}
                if rng.random() < 0.2:
                    names.append("context-conversation-no-retriever")
            if step == "role-slots":
                degraded = True
                names.append("diversity-unavailable")
        if degraded and status == "ok":
            status = "degraded"
        if verdict in ("FAIL", "BROKEN"):
            status = "degraded"
        for name in names:
            record = {"seq": index * 10 + 5, "at": at.isoformat(), "kind": "contingency", "step": step, "name": name,
                      "detail": _text(rng, 14), "severity": "degraded" if degraded else "warning", "data": {}}
            events.append(record)
            contingencies.append(record)
        h = {"step": step, "verdict": verdict, "contingencies": names, "degraded": degraded, "attempts": 1,
             "latency_s": round(latency, 6), "kind": kind, "regenerations": 0, "confidence": None,
             "judge_score": None, "supplements": sum(1 for s in supplements if s["step"] == step),
             "noncompliance": noncompliance}
        finished = at + timedelta(seconds=latency)
        docs.append({"step": step, "index": index, "status": "finished", "started_at": at.isoformat(),
                     "input": inputs, "events": events, "finished_at": finished.isoformat(), "output": output,
                     "health": h})
        health.append(h)
        at = finished
    ledger = [{"role": c["role"], "promptKey": c["prompt_key"], "plannedProvider": c["planned_provider"],
               "plannedModel": c["planned_model"], "effectiveProvider": c["effective_provider"],
               "effectiveModel": c["effective_model"], "fallbackFlags": c["fallback_flags"],
               "promptTokens": c["prompt_tokens"], "completionTokens": c["completion_tokens"],
               "latencyS": c["latency_s"], "error": None, "attempts": 1, "cached": False,
               "mismatch": c["effective_model"] != c["planned_model"]} for c in model_calls]
    turn = {"turn_id": turn_id, "conversation_id": conversation, "prompt": _text(rng, 20),
            "started_at": started.isoformat(), "finished_at": at.isoformat(), "config_hash": "f7783bb13d73f2f2",
            "plugins": {"ora-trace-fs": "0.1.0"}, "status": status, "mode": mode, "gear": gear,
            "answer": _text(rng, 100), "question": None, "diagnostic": None,
            "contingencies": [c["name"] for c in contingencies],
            "timings": {"steps": {h["step"]: h["latency_s"] for h in health},
                        "total_s": round((at - started).total_seconds(), 6)},
            "steps": [f"{d['index']:02d}-{d['step']}.json" for d in docs], "runtimeRoleModels": ledger,
            "runtimeRoleModelsMismatch": any(e["mismatch"] for e in ledger), "turn_events": [],
            "trace_write_errors": [], "lock_file": ".turn.lock"}
    step_health = {"turn_id": turn_id, "conversation_id": conversation, "started_at": started.isoformat(),
                   "status": status, "mode": mode, "gear": gear,
                   "steps": [{**h, "contingency_details": []} for h in health],
                   "contingencies": turn["contingencies"],
                   "degraded_steps": [h["step"] for h in health if h["degraded"]]}
    return {"turn": turn, "step_health": step_health, "docs": docs, "supplements": supplements,
            "contingencies": contingencies}


def generate(root: Path, turns: int, seed: int = 16) -> dict[str, Any]:
    """Write ``turns`` synthetic turns under ``root`` and the index the sink would have appended."""
    from ora_trace_fs import index
    from ora_trace_fs.encoding import compact, pretty_bytes
    from ora_trace_fs.render import render_step_markdown

    rng = random.Random(seed)
    start = datetime(2026, 10, 25, tzinfo=timezone.utc)
    spacing = timedelta(days=30) / turns
    lines: list[bytes] = []
    files = interrupted = 0
    for i in range(turns):
        conversation = f"conv-{rng.randint(1, 200):03d}"
        t = synthetic_turn(rng, start + i * spacing + timedelta(seconds=rng.random()), conversation)
        turn = t["turn"]
        directory = root / conversation / turn["turn_id"]
        directory.mkdir(parents=True)
        dying = rng.random() < 0.01
        docs = t["docs"][: rng.randint(2, len(t["docs"]))] if dying else t["docs"]
        for doc in docs:
            stem = f"{doc['index']:02d}-{doc['step']}"
            (directory / f"{stem}.json").write_bytes(compact(doc))
            (directory / f"{stem}.md").write_text(render_step_markdown(doc), encoding="utf-8")
            files += 2
        for name, records in (("contingencies.jsonl", t["contingencies"]), ("supplemental-rag.jsonl", t["supplements"]),
                              ("rag-failures.jsonl", []), ("oversight-queue.jsonl", [])):
            (directory / name).write_bytes(b"".join(compact(r) + b"\n" for r in records))
            files += 1
        if dying:  # the process died mid-turn: turn.json still says running, its lock is free
            running = {k: turn[k] for k in ("turn_id", "conversation_id", "prompt", "started_at", "config_hash",
                                            "plugins", "lock_file")}
            (directory / "turn.json").write_bytes(pretty_bytes({**running, "finished_at": None, "status": "running"}))
            (directory / ".turn.lock").write_text(json.dumps({"pid": 1, "start_ticks": 1, "flock": True}))
            files += 2
            interrupted += 1
            continue
        (directory / "turn.json").write_bytes(pretty_bytes(turn))
        (directory / "step-health.json").write_bytes(pretty_bytes(t["step_health"]))
        files += 2
        gaps = {d["step"] for d in docs if index.output_has_coverage_gap(d["output"])}
        streams = {index.step_stream(d["input"]) for d in docs} - {""}
        lines.append(index.encode(index.line_record(
            turn=turn, health=t["step_health"]["steps"], supplements=t["supplements"], coverage_steps=gaps,
            multi_stream=len(streams) > 1, directory=f"{conversation}/{turn['turn_id']}")))
    (root / index.INDEX_NAME).write_bytes(b"".join(lines))
    return {"turns": turns, "files": files, "interrupted": interrupted, "index_lines": len(lines)}


#: Runs the ``ora`` command in this process and prints its peak RSS (``VmHWM``) on stderr at exit:
#: ``wait4``'s figure for a child forked from this (large) process would count the pages it
#: shared with its parent before ``exec``.
CHILD = """import atexit, sys
def peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                print("PEAK_RSS_KB", line.split()[1], file=sys.stderr)
atexit.register(peak)
sys.argv = ["ora", *sys.argv[1:]]
from ora_core.cli import main
sys.exit(main())
"""


def run_command(args: list[str]) -> dict[str, Any]:
    """``ora *args`` in a fresh process: wall seconds (spawn to exit), peak RSS (MB), its stderr."""
    env = {**os.environ, "ORA_PLUGINS": "trace-fs"}
    env.pop("ORA_CONFIG", None)
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"ora {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    peak = [line for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB")]
    if not peak:
        raise SystemExit(f"ora {' '.join(args)} did not report its peak RSS:\n{proc.stderr}")
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("PEAK_RSS_KB")]
    return {"seconds": wall, "rss_mb": int(peak[-1].split()[1]) / 1024, "stderr": "\n".join(lines),
            "stdout": proc.stdout}


def sink_line_cost(root: Path, n: int = 2000) -> float:
    """Microseconds per turn for what the sink's close adds for the index: build the line from the
    turn's documents, encode it, append it."""
    from ora_trace_fs import index

    rng = random.Random(3)
    samples = [synthetic_turn(rng, datetime(2026, 11, 1, tzinfo=timezone.utc), "c") for _ in range(50)]
    scratch = root / "sink-cost"
    scratch.mkdir(exist_ok=True)
    began = time.perf_counter()
    for i in range(n):
        t = samples[i % len(samples)]
        line = index.line_record(turn=t["turn"], health=t["step_health"]["steps"], supplements=t["supplements"],
                                 coverage_steps=set(), multi_stream=t["turn"]["gear"] == 4, directory="c/x")
        index.append(scratch, index.encode(line))
    per = (time.perf_counter() - began) / n * 1e6
    shutil.rmtree(scratch)
    return per


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None, help="keep the generated traces here (reused next time)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    temporary = args.dir is None
    base = Path(tempfile.mkdtemp(prefix="ora-bench-health-")) if temporary else args.dir
    root = base / "traces"
    try:
        marker = base / MARKER
        if root.exists() and marker.exists() and json.loads(marker.read_text()).get("turns") == args.turns:
            made = json.loads(marker.read_text())
            print(f"reusing {made['turns']:,} synthetic turns in {root}")
        else:
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            began = time.perf_counter()
            made = generate(root, args.turns)
            made["generate_s"] = round(time.perf_counter() - began, 1)
            marker.write_text(json.dumps(made))
            print(f"generated {made['turns']:,} turns ({made['files']:,} files, {made['interrupted']} interrupted) "
                  f"in {made['generate_s']} s under {root}")
        index_file = root / ".ora-index.jsonl"
        pristine = index_file.read_bytes()
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        newline = b"\n"
        print(f"trace files: {size / 1e6:,.0f} MB; index: {len(pristine) / 1e6:.1f} MB, "
              f"{pristine.count(newline):,} lines")
        page = base / "health.html"
        command = ["health", "--html", "--root", str(root), "-o", str(page)]

        runs = [run_command(command) for _ in range(args.runs)]
        wall = statistics.median(r["seconds"] for r in runs)
        rss = max(r["rss_mb"] for r in runs)
        inside = runs[-1]["stderr"].strip().splitlines()[-1]
        print(f"\n(1) ora health --html from the index, {args.runs} runs: median {wall:.2f} s wall "
              f"(process start to exit), peak RSS {rss:.0f} MB; page {page.stat().st_size / 1e6:.1f} MB")
        print(f"    the command says: {inside}")

        lines = pristine.splitlines(keepends=True)
        drop = max(1, len(lines) // 100)
        index_file.write_bytes(b"".join(lines[:-drop]))
        stale = run_command(command)
        notes = [line for line in stale["stderr"].splitlines() if line.startswith("ora: index:")]
        print(f"\n(2) the index missing {drop} lines (1 %): {stale['seconds']:.2f} s, "
              f"peak RSS {stale['rss_mb']:.0f} MB")
        for note in notes:
            print(f"    {note}")

        full = run_command(command + ["--rebuild-index"])
        print(f"\n(3) ora health --html --rebuild-index (every turn read from its files): {full['seconds']:.2f} s, "
              f"peak RSS {full['rss_mb']:.0f} MB — {full['seconds'] / wall:.1f}× the index's time")
        index_file.write_bytes(pristine)

        per = sink_line_cost(base)
        print(f"\nthe sink's close pays {per:.0f} µs per turn for its index line (build, encode, append)")
        print(f"\ntarget (1): <= {TARGET_S:g} s: {verdict(wall <= TARGET_S)} ({wall:.2f} s); "
              f"<= {TARGET_MB:g} MB: {verdict(rss <= TARGET_MB)} ({rss:.0f} MB)")
    finally:
        if temporary:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

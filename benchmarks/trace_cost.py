"""What the forensic trace adds to a Gear-4 turn at zero latency, side by side in one run; and what a
default Gear-2 turn's trace weighs with every model call kept verbatim and without.

    .venv/bin/python benchmarks/trace_cost.py [--runs 40] [--root DIR] [--no-default-turn]

Three runtimes run the cascade of ``benchmarks/cascade.py`` (11 model calls on its fixed-reply
fake model, every detector plugin of a default install, ora-grounding's included) in turns,
rotating their order: trace-fs with ``fsync = true`` (the default), with ``fsync = false``, and
with the trace disabled; ``[trace] durability = "turn"`` (the default: the close is on the turn's
path; with ``"async"`` it is not, see ``benchmarks/cascade.py``). Printed:
the median ms per turn of each, what trace-fs adds over the disabled trace (target: <= 3 ms
with fsync off), and where the time of the turn's close goes (the part of the trace's work the
pipeline waits for at zero latency: everything, since it is never quiet). The trace files go
under ``--root`` (default: a temporary directory in /tmp); on a shared machine the absolute
figures are noisy, the differences measured in one run are what counts.

Then (unless ``--no-default-turn``) one turn on the bundled default configuration (the README's
prompt, Gear 2, the local model, real retrieval; ~15-30 s): the bytes of its trace directory as
written (``[trace] calls = "verbatim"``, the default: every call's messages, parameters and raw output
in its step file), and the bytes the same turn's files take without the verbatim fields (each step's
JSON re-encoded and its Markdown re-rendered by trace-fs without them: what ``calls = "ledger"``
writes), file by file.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 3.0


def _runtime(root: Path, *, trace: bool, fsync: bool) -> Any:
    """The Ora side of ``benchmarks/cascade.py`` (its fake model, every default detector plugin)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import cascade

    return cascade.ora_runtime(root, 0.0, fsync=fsync, trace=trace, durability="turn"), cascade.PROMPT


class CloseTimer:
    """Times the parts of ``TraceFsSink``'s close (on the pipeline's thread) while on."""

    def __init__(self) -> None:
        from ora_trace_fs import sink

        parts = ((sink.TraceFsSink, "_close", "close (total)"),
                 (sink.TraceFsSink, "_drain", "  handle the events (and open)"),
                 (sink.TurnWriter, "take_staged", "  encode JSON + Markdown"),
                 (sink, "write_files", "  write the files"))
        self.parts: dict[str, float] = {label: 0.0 for _, _, label in parts}
        self.on = False
        self._originals: list[tuple[Any, str, Any]] = []
        for owner, name, label in parts:
            self._wrap(owner, name, label)

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        self._originals.append((owner, name, original))

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return original(*args, **kwargs)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.parts[label] += time.perf_counter() - start

        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)


async def main_async(args: argparse.Namespace) -> int:
    from ora_core.engine.runner import run_turn_async

    base = Path(args.root)
    sides = {"trace-fs, fsync on": _runtime(base / "fsync", trace=True, fsync=True),
             "trace-fs, fsync off": _runtime(base / "nofsync", trace=True, fsync=False),
             "trace disabled": _runtime(base / "off", trace=False, fsync=False)}
    for name, (rt, prompt) in sides.items():
        for _ in range(5):
            result = await run_turn_async(rt, prompt, mode="cui-bono")
            traced = name != "trace disabled"
            if result.status != "ok" or result.tracing_degraded or traced != bool(result.trace_path):
                raise SystemExit(f"{name}: not the clean traced turn being measured: {result.status} "
                                 f"degraded={result.tracing_degraded} {rt.stderr.getvalue()[-500:]}")
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for i in range(args.runs):
        for name in names[i % len(names):] + names[:i % len(names)]:
            rt, prompt = sides[name]
            start = time.perf_counter()
            await run_turn_async(rt, prompt, mode="cui-bono")
            times[name].append(time.perf_counter() - start)
    median = {name: 1000 * statistics.median(t) for name, t in times.items()}
    off = median["trace disabled"]
    print(f"Gear-4 cascade at zero latency, median of {args.runs} turns each, interleaved "
          f"(trace root {base}; machine shared: compare within this run)")
    for name, ms in median.items():
        added = "" if name == "trace disabled" else f"   trace adds {ms - off:+6.2f} ms"
        print(f"    {name:22s} {ms:8.2f} ms/turn{added}")
    added_nofsync = median["trace-fs, fsync off"] - off
    verdict = "PASS" if added_nofsync <= TARGET_MS else "MISS"
    print(f"    target: trace-fs (fsync off) adds <= {TARGET_MS:.0f} ms per turn: {added_nofsync:.2f} -> {verdict}")

    timer = CloseTimer()
    rt, prompt = sides["trace-fs, fsync off"]
    timer.on = True
    for _ in range(args.runs):
        await run_turn_async(rt, prompt, mode="cui-bono")
    timer.on = False
    timer.restore()
    print(f"\nwhere the close of a turn goes (fsync off, mean of {args.runs} turns):")
    for label, total in timer.parts.items():
        print(f"    {label:30s} {1000 * total / args.runs:7.3f} ms")
    return 0


README_PROMPT = "Explain how Ora's Supplemental RAG protocol handles a step that lacks a fact."
VERBATIM = ("messages", "params", "output")


def default_turn_weight(root: Path) -> int:
    """One default Gear-2 turn; its trace's bytes with the calls verbatim and without (same turn)."""
    import json

    from ora_trace_fs.encoding import compact
    from ora_trace_fs.render import render_step_markdown

    from ora_core.api import Ora

    ora = Ora.open(trace={"root": str(root / "default")})
    start = time.perf_counter()
    result = ora.run(README_PROMPT)
    wall = time.perf_counter() - start
    if not result.trace_path:
        raise SystemExit(f"the default turn left no trace: {result.status} {result.diagnostic}")
    path = Path(result.trace_path)
    verbatim = ledger = 0
    calls = 0
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        size = file.stat().st_size
        verbatim += size
        if file.suffix == ".json" and file.name[:2].isdigit():
            doc = json.loads(file.read_text())
            calls += len(doc.get("calls") or [])
            doc["calls"] = [{k: v for k, v in c.items() if k not in VERBATIM} for c in doc.get("calls") or []]
            ledger += len(compact(doc))
            md = file.with_suffix(".md")
            if md.exists():
                ledger += len(render_step_markdown(doc).encode("utf-8"))
        elif file.suffix == ".md" and file.name[:2].isdigit():
            continue  # counted with its JSON above
        else:
            ledger += size
    print(f"\nthe trace of a default Gear-2 turn (README prompt, status {result.status}, gear {result.gear}, "
          f"{calls} model calls, {wall:.1f} s), the same turn's files:")
    print(f"    calls verbatim (the default)   {verbatim / 1024:8.1f} KiB")
    print(f"    calls as ledger entries only   {ledger / 1024:8.1f} KiB")
    print(f"    the verbatim calls add         {(verbatim - ledger) / 1024:8.1f} KiB "
          f"(x{verbatim / max(ledger, 1):.2f})   {path}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="timed turns per side")
    parser.add_argument("--root", help="trace root (default: a new temporary directory)")
    parser.add_argument("--no-default-turn", dest="default_turn", action="store_false",
                        help="skip the default turn's trace weight (it runs the local model)")
    args = parser.parse_args()

    def both() -> int:
        code = asyncio.run(main_async(args))
        return code or (default_turn_weight(Path(args.root)) if args.default_turn else 0)

    if args.root:
        raise SystemExit(both())
    with tempfile.TemporaryDirectory(prefix="ora-trace-cost-") as tmp:
        args.root = tmp
        raise SystemExit(both())


if __name__ == "__main__":
    main()

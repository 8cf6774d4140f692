"""What the forensic trace adds to a Gear-4 turn at zero latency, side by side in one run.

    .venv/bin/python benchmarks/trace_cost.py [--runs 40] [--root DIR]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="timed turns per side")
    parser.add_argument("--root", help="trace root (default: a new temporary directory)")
    args = parser.parse_args()
    if args.root:
        raise SystemExit(asyncio.run(main_async(args)))
    with tempfile.TemporaryDirectory(prefix="ora-trace-cost-") as tmp:
        args.root = tmp
        raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()

"""Start-up time of `ora --help` and `ora plugins list`, beside `python -c pass`.

Every first-party plugin installed in this environment is loaded by both commands; none may
import torch, chromadb, sentence-transformers, llama_cpp or playwright (tests/test_cli_plugins.py
checks that). Target: median <= 0.5 s each on a 2-core machine.

    python benchmarks/startup.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.5
ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Byte-compile the checkout first, as an installed package is (scripts/install.sh does the
    same): with PYTHONDONTWRITEBYTECODE set, as it is on some machines, an editable install would
    otherwise recompile every source file of the kernel and the plugins on every command."""
    dirs = [str(ROOT / d) for d in ("ora_core", "ora_modes", "plugins") if (ROOT / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], capture_output=True, check=True)


def median_wall(argv: list[str], runs: int) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    subprocess.run(argv, capture_output=True, env=env, check=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per command (at least 5)")
    args = parser.parse_args()
    runs = max(5, args.runs)
    compile_bytecode()
    ora = str(Path(sys.executable).with_name("ora"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "ora --help": [ora, "--help"],
        "ora plugins list": [ora, "plugins", "list"],
    }
    results = {label: median_wall(argv, runs) for label, argv in commands.items()}
    baseline = results["python -c pass"][0]
    print(f"startup, median of {runs} runs (min in brackets); target <= {TARGET_S:.2f} s for ora commands")
    print(f"{'command':<20} {'median s':>9} {'min s':>7} {'x python':>9}  verdict")
    failed = False
    for label, (median, fastest) in results.items():
        verdict = "-"
        if label.startswith("ora"):
            ok = median <= TARGET_S
            failed |= not ok
            verdict = "meets target" if ok else "MISSES target"
        print(f"{label:<20} {median:>9.3f} {fastest:>7.3f} {median / baseline:>9.1f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Start-up time of `ora --help` and `ora plugins list`, beside `python -c pass`.

Every first-party plugin installed in this environment is loaded by both commands; none may
import torch, chromadb, sentence-transformers, llama_cpp or playwright (tests/test_cli_plugins.py
checks that). Targets on a 2-core machine: median `ora --help` <= 0.3 s, `ora plugins list`
<= 0.4 s. The entry-point scan is served from its cache (warmed by the first, untimed run);
the same commands with the cache off (``ORA_PLUGIN_CACHE=off``) are timed interleaved, for
comparison. Wall time swings with the machine's load: the CPU time (user + system) of the
command is printed beside it.

    python benchmarks/startup.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS_S = {"ora --help": 0.3, "ora plugins list": 0.4}
ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Byte-compile the checkout first, as an installed package is (scripts/install.sh does the
    same): with PYTHONDONTWRITEBYTECODE set, as it is on some machines, an editable install would
    otherwise recompile every source file of the kernel and the plugins on every command."""
    dirs = [str(ROOT / d) for d in ("ora_core", "ora_modes", "plugins") if (ROOT / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], capture_output=True, check=True)


Commands = dict[str, tuple[list[str], dict[str, str]]]


def timed_runs(commands: Commands, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of each command, ``runs`` times, the commands interleaved."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    for argv, env in commands.values():
        subprocess.run(argv, capture_output=True, env={**base, **env}, check=True)  # file cache, entry-point cache
    out: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in commands}
    for _ in range(runs):
        for label, (argv, env) in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, env={**base, **env}, check=True)
            out[label][0].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[label][1].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per command (at least 5)")
    args = parser.parse_args()
    runs = max(5, args.runs)
    compile_bytecode()
    ora = str(Path(sys.executable).with_name("ora"))
    off = {"ORA_PLUGIN_CACHE": "off"}
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], {}),
        "ora --help": ([ora, "--help"], {}),
        "ora plugins list": ([ora, "plugins", "list"], {}),
        "ora --help (cache off)": ([ora, "--help"], off),
        "ora plugins list (cache off)": ([ora, "plugins", "list"], off),
    }
    results = timed_runs(commands, runs)
    load = os.getloadavg()[0]
    print(f"startup, median of {runs} interleaved runs (min in brackets), load {load:.2f} on {os.cpu_count()} CPUs")
    print(f"{'command':<30} {'median s':>9} {'min s':>7} {'cpu s':>7} {'x python':>9}  target")
    baseline = statistics.median(results["python -c pass"][0])
    failed = False
    for label, (walls, cpus) in results.items():
        median = statistics.median(walls)
        verdict = "-"
        if label in TARGETS_S:
            ok = median <= TARGETS_S[label]
            failed |= not ok
            verdict = f"<= {TARGETS_S[label]:.1f} s: {'MET' if ok else 'MISS'}"
        print(f"{label:<30} {median:>9.3f} {min(walls):>7.3f} {statistics.median(cpus):>7.3f} "
              f"{median / baseline:>9.1f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

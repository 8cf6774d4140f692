"""README command 1 (``bash scripts/install.sh && .venv/bin/ora run "…"``) on a fresh machine, phase by phase.

A scratch clone of this checkout's committed HEAD, an empty private pip cache (``PIP_CACHE_DIR``: the
user's ``~/.cache/pip`` is never read, written or cleared), fresh XDG data, cache and config
directories (no vault store, no model copy, no entry-point cache): README command 1, read from the
README's first ``bash`` block, runs there as written. Every ``==> `` line ``scripts/install.sh`` writes
on stderr starts a phase; the time after ``==> installed:`` is the README prompt's ``ora run``. Each
phase is printed with its seconds, its share of the total and the load average when it started and
ended (other processes share the cores: the figures are as noisy as the load says). Then the same
command runs again in the same clone (a re-run: nothing to install).

Targets on this 2-core machine: the fresh run <= 4 minutes, the re-run <= 30 s; each MET or MISS
(``--strict``: exit 1 on a MISS).

    python benchmarks/install.py [--strict] [--keep] [--workdir DIR] [--no-rerun] [--baseline REV]

``--baseline REV`` first times the same fresh install of an earlier revision (e.g. ``487323f``, before
this script's round: llama.cpp built whole, in the foreground), each in its own scratch clone and
empty pip cache, and prints the two totals side by side with their ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRESH_TARGET_S = 240.0
RERUN_TARGET_S = 30.0
MARK = "==> "


def readme_command_1(readme: Path = ROOT / "README.md") -> str:
    """The first line of the README's first ``bash`` block: README command 1."""
    block = re.search(r"^```bash\n(.*?)^```", readme.read_text(encoding="utf-8"), re.M | re.S)
    if block is None:
        raise SystemExit("README.md has no ```bash block: where is command 1?")
    return block.group(1).splitlines()[0].strip()


@dataclass
class Phase:
    name: str
    start: float
    load_start: float
    end: float = 0.0
    load_end: float = 0.0

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Run:
    label: str
    phases: list[Phase] = field(default_factory=list)
    total_s: float = 0.0
    returncode: int = 0
    tail: list[str] = field(default_factory=list)


def run_phased(label: str, command: str, cwd: Path, env: dict[str, str]) -> Run:
    """``command`` under bash in ``cwd``; its stderr read as it comes, each ``==> `` line a new phase."""
    run = Run(label)
    start = time.perf_counter()
    run.phases.append(Phase("(start: until install.sh's first phase)", start, os.getloadavg()[0]))
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stdout is not None and proc.stderr is not None
    out_lines: list[str] = []
    reader = threading.Thread(target=lambda: out_lines.extend(proc.stdout), daemon=True)
    reader.start()
    for line in proc.stderr:
        run.tail = (run.tail + [line.rstrip()])[-30:]
        if line.startswith(MARK):
            now, load = time.perf_counter(), os.getloadavg()[0]
            current = run.phases[-1]
            current.end, current.load_end = now, load
            name = line[len(MARK):].strip()
            if name.startswith("installed:"):
                name = "ora run (the README prompt)"
            run.phases.append(Phase(name, now, load))
    run.returncode = proc.wait()
    reader.join(timeout=10)
    end = time.perf_counter()
    run.phases[-1].end, run.phases[-1].load_end = end, os.getloadavg()[0]
    run.total_s = end - start
    run.tail += [f"(stdout) {line.rstrip()}" for line in out_lines[-8:]]
    return run


def print_run(run: Run, target_s: float) -> bool:
    print(f"\n{run.label}: {run.total_s:.1f} s in all (exit {run.returncode})")
    print(f"  {'phase':<72} {'s':>7} {'share':>6}  load start -> end")
    for phase in run.phases:
        share = 100 * phase.seconds / run.total_s if run.total_s else 0.0
        print(f"  {phase.name[:72]:<72} {phase.seconds:7.1f} {share:5.1f}%  {phase.load_start:4.2f} -> "
              f"{phase.load_end:4.2f}")
    ok = run.returncode == 0 and run.total_s <= target_s
    why = "" if run.returncode == 0 else " (the command failed: its last lines are below)"
    print(f"  target <= {target_s:.0f} s: {'MET' if ok else 'MISS'}{why}")
    if run.returncode != 0:
        print("\n".join(f"    {line}" for line in run.tail))
    return ok


def fresh_env(scratch: Path) -> dict[str, str]:
    """This process's environment minus Ora's and Python's own settings, with an empty pip cache and
    fresh XDG directories under ``scratch``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORA", "PYTHON", "VIRTUAL_ENV", "XDG_", "PIP_CACHE_DIR"))}
    env.update(PIP_CACHE_DIR=str(scratch / "pip-cache"), XDG_DATA_HOME=str(scratch / "data"),
               XDG_CACHE_HOME=str(scratch / "cache"), XDG_CONFIG_HOME=str(scratch / "config"),
               HF_HUB_OFFLINE="1")
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--keep", action="store_true", help="keep the scratch clone (its .venv is several GB)")
    parser.add_argument("--workdir", type=Path, help="where the scratch clone goes (default: a new temporary dir)")
    parser.add_argument("--no-rerun", action="store_true", help="time the fresh run only")
    parser.add_argument("--baseline", metavar="REV", help="also time an earlier revision's fresh install, first")
    args = parser.parse_args()

    command = readme_command_1()
    print(f"README command 1: {command}")
    print(f"CPUs: {os.cpu_count()}; load average now: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if Path("/usr/bin/chromium").exists():
        print("Chromium: /usr/bin/chromium is already installed here, so install.sh skips that phase "
              "(on a machine without it, apt-get installs Debian's package: not measured here)")
    print("Other processes share the cores: every figure below is as noisy as the load beside it.")
    totals: dict[str, float] = {}
    verdicts = []
    for rev in ([args.baseline] if args.baseline else []) + ["HEAD"]:
        scratch = Path(tempfile.mkdtemp(prefix="ora-install-bench-", dir=args.workdir))
        clone = scratch / "ora"
        cloned = subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], capture_output=True, text=True)
        checked = subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", rev], capture_output=True, text=True)
        if cloned.returncode != 0 or checked.returncode != 0:
            print(f"git clone/checkout of {rev} failed: {cloned.stderr}{checked.stderr}", file=sys.stderr)
            return 1
        sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
        print(f"\n--- {rev} ({sha}): scratch clone {clone}, empty pip cache {scratch / 'pip-cache'}"
              + (" (uncommitted changes in the checkout are NOT in the clone)"
                 if rev == "HEAD" and dirty.stdout.strip() else ""))
        env = fresh_env(scratch)
        try:
            fresh = run_phased(f"{sha}: fresh machine (empty pip cache, no venv)", command, clone, env)
            totals[sha] = fresh.total_s
            judged = rev == "HEAD"
            ok = print_run(fresh, FRESH_TARGET_S)
            verdicts += [ok] if judged else []
            if judged and not args.no_rerun and fresh.returncode == 0:
                rerun = run_phased(f"{sha}: re-run (same clone, nothing to install)", command, clone, env)
                verdicts.append(print_run(rerun, RERUN_TARGET_S))
        finally:
            if args.keep:
                print(f"kept: {scratch}")
            else:
                shutil.rmtree(scratch, ignore_errors=False)
    if len(totals) == 2:
        (base, base_s), (head, head_s) = totals.items()
        print(f"\nside by side, fresh machine: {base} {base_s:.1f} s, {head} {head_s:.1f} s: x{head_s / base_s:.2f} "
              f"of the baseline's time ({base_s / head_s:.2f}x faster)")
    return 1 if args.strict and not all(verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Build a wheel and an sdist of every distribution of this checkout into one directory (``nox -s build``
runs it into ``dist/``):

    python scripts/build_dists.py [--outdir dist] [--wheel-only]

Each distribution (``scripts/distributions.py``: ora-core, plugins/*, contrib/*, meta/*) is built with
pypa/build without isolation (the running interpreter has the build backend, hatchling): the sdist first,
then the wheel *from that sdist*, so a file the sdist forgets fails the build instead of shipping a
wheel that works only from a checkout. ``--wheel-only`` builds wheels straight from the source tree with
pip (no pypa/build needed; what the clean-environment test does when ``dist/`` is not built). Earlier
builds of Ora's distributions in the directory are removed first, so it holds exactly one version.
A failed build names the distribution and exits 1 after trying the others.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distributions import distribution_dirs, project  # noqa: E402 - the sibling module, found through the path set above


def artefact_prefixes() -> list[str]:
    """The file-name prefixes of every distribution's wheel and sdist (``ora_core-``, ``ora_openai-`` ...)."""
    return [project(d)["name"].replace("-", "_") + "-" for d in distribution_dirs()]


def clean(outdir: Path) -> list[Path]:
    """Remove the earlier wheels and sdists of this checkout's distributions from ``outdir``."""
    prefixes = tuple(artefact_prefixes())
    removed = [p for p in outdir.glob("*") if p.name.startswith(prefixes) and p.name.endswith((".whl", ".tar.gz"))]
    for path in removed:
        path.unlink()
    return removed


def build_one(directory: Path, outdir: Path, *, wheel_only: bool) -> subprocess.CompletedProcess[str]:
    if wheel_only:
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                "--disable-pip-version-check", "-w", str(outdir), str(directory)]
    else:
        argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), str(directory)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def build_all(outdir: Path, *, wheel_only: bool = False, echo=print) -> list[str]:
    """Build every distribution into ``outdir``; the failures (distribution: the end of the builder's output)."""
    outdir.mkdir(parents=True, exist_ok=True)
    clean(outdir)
    failures = []
    for directory in distribution_dirs():
        name = project(directory)["name"]
        start = time.perf_counter()
        done = build_one(directory, outdir, wheel_only=wheel_only)
        if done.returncode != 0:
            failures.append(f"{name}: {(done.stdout + done.stderr).strip()[-3000:]}")
            echo(f"FAILED {name} ({directory})")
        else:
            echo(f"built  {name} ({time.perf_counter() - start:.1f} s)")
    return failures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", type=Path, default=Path(__file__).resolve().parents[1] / "dist")
    parser.add_argument("--wheel-only", action="store_true", help="wheels only, built by pip from the source trees")
    args = parser.parse_args(argv)
    failures = build_all(args.outdir.resolve(), wheel_only=args.wheel_only)
    for failure in failures:
        print(f"\nbuild failed: {failure}", file=sys.stderr)
    built = sorted(p.name for p in args.outdir.glob("*") if p.name.endswith((".whl", ".tar.gz")))
    print(f"{len(built)} file(s) in {args.outdir}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Developer sessions. `tests` and `bench` run in the project's environment (.venv, built by
scripts/install.sh, which pins torch and builds llama-cpp-python); `lint` needs only ruff.

    nox -s tests      # scripts/install.sh, then the test suite
    nox -s lint       # ruff
    nox -s bench      # every benchmark under benchmarks/
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
ROOT = Path(__file__).parent
VENV_PY = str(ROOT / ".venv" / "bin" / "python")


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    session.run("bash", "scripts/install.sh", external=True)
    session.run(VENV_PY, "-m", "pytest", *session.posargs, external=True)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    session.run("bash", "scripts/install.sh", external=True)
    # The `bench` extra: benchmark-only dependencies (LangGraph for benchmarks/cascade.py).
    session.run(VENV_PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-build-isolation",
                "-c", "constraints.txt", "-e", ".[bench]", external=True)
    scripts = session.posargs or sorted(str(p) for p in (ROOT / "benchmarks").glob("*.py"))
    for script in scripts:
        session.run(VENV_PY, script, external=True)

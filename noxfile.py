"""Developer sessions. `tests` and `bench` run in the project's environment (.venv, built by
scripts/install.sh, which pins torch and builds llama-cpp-python); `lint` builds a small one of its
own (ruff, mypy and its stubs as the `dev` extra pins them, and ora-core with its HTTP and HTML kits).

    nox -s tests      # scripts/install.sh, then the test suite
    nox -s lint       # ruff, then mypy over ora_core ([tool.mypy] in pyproject.toml)
    nox -s bench      # every benchmark under benchmarks/
    nox -s build      # a wheel and an sdist of every distribution into dist/ (scripts/build_dists.py)
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
ROOT = Path(__file__).parent
VENV_PY = str(ROOT / ".venv" / "bin" / "python")
#: The linters as the `dev` extra pins them (one place for the versions): ruff, mypy, the stubs mypy needs,
#: and pytest (ora_core.testing, the pytest plugin, is checked too).
LINT_TOOLS = [req for req in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
              ["project"]["optional-dependencies"]["dev"]
              if req.split("=")[0].split(">")[0].strip() in {"ruff", "mypy", "types-PyYAML", "pytest"}]


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    session.run("bash", "scripts/install.sh", external=True)
    session.run(VENV_PY, "-m", "pytest", *session.posargs, external=True)


@nox.session
def lint(session: nox.Session) -> None:
    session.install(*LINT_TOOLS)
    session.run("ruff", "check", ".")
    # mypy imports what ora_core imports (pydantic for its plugin, pluggy, typer, httpx, jinja2 ...)
    session.install("-e", ".[http,html]")
    session.run("mypy")  # the files and the settings: [tool.mypy] in pyproject.toml


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    session.run("bash", "scripts/install.sh", external=True)
    # The `bench` extra: benchmark-only dependencies (LangGraph for benchmarks/cascade.py).
    session.run(VENV_PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-build-isolation",
                "-c", "constraints.txt", "-e", ".[bench]", external=True)
    scripts = session.posargs or sorted(str(p) for p in (ROOT / "benchmarks").glob("*.py"))
    for script in scripts:
        session.run(VENV_PY, script, external=True)


@nox.session
def build(session: nox.Session) -> None:
    """A wheel and an sdist of ora-core and of every distribution under plugins/, contrib/ and meta/ into
    dist/: pypa/build over hatchling (the build backend every pyproject.toml names), each wheel built from
    its sdist. ``tests/test_dist_install.py`` installs them into a clean environment."""
    session.install("build>=1.2", "hatchling>=1.24")
    session.run("python", "scripts/build_dists.py", "--outdir", str(ROOT / "dist"), *session.posargs)

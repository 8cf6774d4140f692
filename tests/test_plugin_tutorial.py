"""docs/plugins.md, run as written: the three distributions are built from the page's file blocks,
installed with pip into a throwaway environment layered over this one, listed by ``ora plugins list``,
run on the page's configurations with the page's commands (the detector fires, the verifier decides the
verdict, the backend answers a turn on llama.cpp), and their tests (also from the page) pass. The
backend's blocks are ``contrib/example-backend``'s files, byte for byte. The page cannot drift from
what works."""

from __future__ import annotations

import json
import os
import re
import shlex
import site
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "plugins.md"
FILE_BLOCK = re.compile(r"^`([\w./-]+)`:\n\n```\w*\n(.*?)^```", re.M | re.S)
COMMAND_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)

pytestmark = pytest.mark.slow


def page_files() -> dict[str, str]:
    return {path: body for path, body in FILE_BLOCK.findall(PAGE.read_text(encoding="utf-8"))}


def page_commands() -> list[list[str]]:
    lines = [line for block in COMMAND_BLOCK.findall(PAGE.read_text(encoding="utf-8"))
             for line in block.splitlines() if line.strip()]
    return [shlex.split(line) for line in lines]


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the directory holding the page's files, a virtual environment layered over this one)."""
    work = tmp_path_factory.mktemp("tutorial")
    for rel, body in page_files().items():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    env_root = work / ".venv"
    venv.EnvBuilder(with_pip=False).create(env_root)
    child_site = next(env_root.glob("lib/python*/site-packages"))
    # the parent's site directories added as site directories: their .pth files (this checkout's editable
    # installs among them) are processed, so the layered environment sees every installed distribution
    (child_site / "_ora_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()))
    return work, env_root


def run(work: Path, env_root: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A command of the page, its ``.venv/bin/...`` the layered environment's (pip through its python)."""
    python = str(env_root / "bin" / "python")
    if argv[0] == ".venv/bin/pip":
        argv = [python, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps", "--no-build-isolation",
                "--no-index", *argv[2:]]
    elif argv[0] == ".venv/bin/ora":
        argv = [python, "-m", "ora_core.cli", *argv[1:]]
    elif argv[0] == ".venv/bin/python":
        argv = [python, *argv[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORA", "PYTHON"))}
    env.update(XDG_DATA_HOME=str(work / "data"), XDG_CONFIG_HOME=str(work / "config"), HF_HUB_OFFLINE="1")
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, cwd=work)


def test_the_page_has_the_three_distributions_and_their_tests() -> None:
    files = page_files()
    for dist in ("my-detector", "my-verifier", "example-backend"):
        assert {f"{dist}/pyproject.toml", f"{dist}/ora.toml"} <= set(files)
        assert any(f.startswith(f"{dist}/tests/test_") for f in files)


def test_the_backend_section_shows_contrib_example_backend_as_it_is() -> None:
    contrib = REPO / "contrib" / "example-backend"
    shown = {path.removeprefix("example-backend/"): body for path, body in page_files().items()
             if path.startswith("example-backend/")}
    assert set(shown) == {"pyproject.toml", "ora.toml", "ora_example_backend/__init__.py",
                          "ora_example_backend/backend.py", "tests/test_example_backend.py"}
    for rel, body in shown.items():
        assert body == (contrib / rel).read_text(encoding="utf-8"), f"docs/plugins.md's {rel} differs from {contrib}"


def test_every_command_of_the_page_does_what_the_page_says(tutorial: tuple[Path, Path]) -> None:
    work, env_root = tutorial
    commands = page_commands()
    assert [c[0] for c in commands].count(".venv/bin/pip") == 3
    for argv in commands:
        done = run(work, env_root, argv)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        joined = shlex.join(argv)
        if joined.endswith("plugins list"):
            assert "my-detector" in done.stdout
        if "example-backend/ora.toml" in joined:
            assert done.stdout.strip(), done.stderr
        if "my-detector/ora.toml" in joined:
            assert "appeal-to-common-knowledge:common-knowledge" in done.stdout, done.stdout
        if "my-verifier/ora.toml" in joined:
            assert "gear2-cycle1-verify FAIL" in done.stdout, done.stdout
            assert "[warning: verification FAILED" in done.stdout
        if argv[-1].endswith("/tests"):
            assert " passed" in done.stdout and "failed" not in done.stdout
    listed = run(work, env_root, [".venv/bin/ora", "plugins", "list", "--json"])
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["my-detector"]["status"] == rows["my-verifier"]["status"] == "ok"
    assert rows["my-detector"]["components"] == {"detector": ["appeal-to-common-knowledge"]}
    assert rows["my-verifier"]["components"] == {"verifier": ["citations-exist"]}
    assert rows["example-backend"]["status"] == "ok"
    assert rows["example-backend"]["components"] == {"backend": ["text-completion"]}
    answered = run(work, env_root, [".venv/bin/ora", "--config", "example-backend/ora.toml", "run", "--json",
                                    "--mode", "simple", "What is the capital of France?"])
    assert answered.returncode == 0, answered.stderr[-2000:]
    result = json.loads(answered.stdout)
    assert result["status"] in {"ok", "degraded"} and result["answer"].strip()
    effective = {(c["effective_provider"], c["effective_model"]) for c in result["runtime_role_models"]}
    assert effective == {("text-completion", "SmolLM2-135M")}

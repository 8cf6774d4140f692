"""`pip install contrib/example-detector` makes it appear in `ora plugins list`; uninstall removes it.

The install goes into a throwaway virtual environment layered over this one (a ``.pth`` file
points at this environment's site-packages), so a real ``pip install`` / ``pip uninstall`` runs
without touching the environment the rest of the suite uses.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def layered_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(root)
    child_site = next(root.glob("lib/python*/site-packages"))
    (child_site / "_ora_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return root


def run(venv_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORA", "PYTHON"))}
    return subprocess.run([str(venv_root / "bin" / "python"), *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=REPO)


def listed(venv_root: Path) -> dict[str, dict]:
    proc = run(venv_root, "-m", "ora_core.cli", "plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout)}


@pytest.mark.slow
@pytest.mark.parametrize(("dist_dir", "dist", "entry", "kind", "component"), [
    ("example-detector", "ora-example-detector", "example-overclaim", "detector", "example-overclaim"),
    ("example-verifier", "ora-example-verifier", "example-citations", "verifier", "example-citations"),
])
def test_pip_install_makes_the_example_appear_and_uninstall_removes_it(
        layered_venv: Path, dist_dir: str, dist: str, entry: str, kind: str, component: str) -> None:
    assert entry not in listed(layered_venv)
    pip = ["-m", "pip", "--disable-pip-version-check"]
    installed = run(layered_venv, *pip, "install", "--no-deps", "--no-build-isolation", "--no-index",
                    str(REPO / "contrib" / dist_dir))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    row = listed(layered_venv)[entry]
    version = tomllib.loads((REPO / "contrib" / dist_dir / "pyproject.toml").read_text())["project"]["version"]
    assert (row["distribution"], row["version"], row["status"]) == (dist, version, "ok")
    assert row["components"] == {kind: [component]}
    if kind == "detector":
        assert row["layers"][0]["layer"] == "model_output"
        assert row["layers"][0]["assumes"] == ["model_generated"]

    removed = run(layered_venv, *pip, "uninstall", "-y", dist)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert entry not in listed(layered_venv)

"""`ora plugins install` / `ora plugins uninstall`: pip in the interpreter that runs `ora`, the records
of what was installed as `ora plugins list` shows them, and the refusals and failures named.

Every install goes into a throwaway virtual environment layered over this one (a ``.pth`` file adds
this environment's site directories), so real pip installs and uninstalls run without touching the
environment the rest of the suite uses; pip runs offline (``PIP_NO_INDEX``) on the checkout's sources.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.slow


@pytest.fixture
def layered(tmp_path: Path) -> Path:
    root = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(root)
    child_site = next(root.glob("lib/python*/site-packages"))
    (child_site / "_ora_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()))
    return root


def ora(venv_root: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORA", "PYTHON", "PIP"))}
    # offline, on what is here: no index, the build backend (hatchling) taken from this environment
    env.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_FIND_LINKS="",
               ORA_PLUGIN_CACHE=str(venv_root / "entry-points.json"))
    return subprocess.run([str(venv_root / "bin" / "python"), "-m", "ora_core.cli", *args], capture_output=True,
                          text=True, env=env, timeout=600, cwd=cwd)


def pip_list(venv_root: Path) -> dict[str, str]:
    done = subprocess.run([str(venv_root / "bin" / "python"), "-m", "pip", "list", "--path",
                           str(next(venv_root.glob("lib/python*/site-packages"))), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {row["name"]: row["version"] for row in json.loads(done.stdout)}


def listed(venv_root: Path) -> dict[str, dict]:
    done = ora(venv_root, "plugins", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in json.loads(done.stdout)}


def test_install_prints_the_new_plugin_as_plugins_list_shows_it_and_uninstall_removes_it(layered: Path) -> None:
    done = ora(layered, "plugins", "install", "--no-deps", str(REPO / "contrib" / "example-detector"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"-m pip install --no-deps {REPO / 'contrib' / 'example-detector'}" in done.stderr  # pip in this python
    assert str(layered / "bin" / "python") in done.stderr
    assert f"ora: installed ora-example-detector {VERSION}" in done.stderr
    assert "ora: entry points: cache miss" in done.stderr  # rebuilt for the new environment
    assert json.loads((layered / "entry-points.json").read_text())["groups"]["ora"]  # the cache, refreshed
    header, rule, first = done.stdout.splitlines()[:3]
    assert header.split()[:3] == ["plugin", "distribution", "version"]
    assert first.split()[:4] == ["example-overclaim", "ora-example-detector", VERSION, "detector:"]
    assert "ok" in first.split()
    assert listed(layered)["example-overclaim"]["status"] == "ok"

    removed = ora(layered, "plugins", "uninstall", "ora-example-detector")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"removed ora-example-detector {VERSION} (plugin(s): example-overclaim)" in removed.stdout
    assert "example-overclaim" not in listed(layered)
    assert "ora-example-detector" not in pip_list(layered)


def test_editable_and_json_are_passed_through(layered: Path) -> None:
    done = ora(layered, "plugins", "install", "--json", "--no-deps", "-e", str(REPO / "contrib" / "example-verifier"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"--editable {REPO / 'contrib' / 'example-verifier'}" in done.stderr
    out = json.loads(done.stdout)
    assert out["changed"] == {"ora-example-verifier": {"before": None, "after": VERSION}}
    (row,) = out["plugins"]
    assert (row["name"], row["status"], row["components"]) == ("example-citations", "ok",
                                                               {"verifier": ["example-citations"]})
    removed = ora(layered, "plugins", "uninstall", "--json", "ora-example-verifier")
    assert json.loads(removed.stdout)["plugins_removed"] == {"ora-example-verifier": ["example-citations"]}


def test_find_links_and_upgrade_are_passed_through(layered: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(wheels), str(REPO / "contrib" / "example-detector")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    done = ora(layered, "plugins", "install", "--upgrade", "--no-deps", "--find-links", str(wheels),
               "ora-example-detector")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"install --upgrade --no-deps --find-links {wheels} ora-example-detector" in done.stderr
    assert pip_list(layered)["ora-example-detector"] == VERSION
    again = ora(layered, "plugins", "install", "--no-deps", "--find-links", str(wheels), "ora-example-detector")
    assert again.returncode == 0
    assert "nothing changed: every requirement was already installed" in again.stderr


def test_a_name_pip_cannot_find_passes_pips_message_on_and_changes_nothing(layered: Path) -> None:
    before = pip_list(layered)
    done = ora(layered, "plugins", "install", "ora-no-such-plugin-anywhere")
    assert done.returncode == 1
    assert "No matching distribution found for ora-no-such-plugin-anywhere" in done.stderr  # pip's own words
    assert "ora: pip install failed (exit 1; its message is above): the environment is unchanged" in done.stderr
    assert done.stdout == ""
    assert pip_list(layered) == before


def test_a_plugin_whose_entry_point_fails_to_import_is_installed_and_named_as_failed(layered: Path,
                                                                                     tmp_path: Path) -> None:
    project = tmp_path / "ora-broken-import"
    (project / "ora_broken_import").mkdir(parents=True)
    (project / "ora_broken_import" / "__init__.py").write_text("import no_such_module_anywhere\n")
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["hatchling>=1.21"]
        build-backend = "hatchling.build"

        [project]
        name = "ora-broken-import"
        version = "1.0.0"

        [project.entry-points.ora]
        broken-import = "ora_broken_import"
        """))
    done = ora(layered, "plugins", "install", "--no-deps", str(project))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ora: installed ora-broken-import 1.0.0" in done.stderr  # what happened is still reported
    assert "broken-import" in done.stdout and "failed" in done.stdout  # its record, as plugins list shows it
    assert ("installed, but 1 plugin(s) did not load: broken-import (ora-broken-import): failed: import failed: "
            "ModuleNotFoundError: No module named 'no_such_module_anywhere' at __init__.py:1") in done.stderr
    assert pip_list(layered)["ora-broken-import"] == "1.0.0"


def test_uninstalling_ora_core_is_refused_with_the_reason(layered: Path) -> None:
    done = ora(layered, "plugins", "uninstall", "ora-core")
    assert done.returncode == 1
    assert ("ora: nothing was uninstalled: ora-core: refused: it is Ora's kernel: every plugin and the 'ora' "
            "command need it") in done.stderr
    assert "running" not in done.stderr  # pip never ran
    assert listed(layered)["modes-default"]["distribution"] == "ora-core"


def test_uninstalling_what_is_not_installed_is_named(layered: Path) -> None:
    done = ora(layered, "plugins", "uninstall", "ora-example-detector", "ora-not-here")
    assert done.returncode == 1
    assert "ora-not-here: not installed in" in done.stderr
    assert "ora-example-detector: not installed in" in done.stderr


def test_install_without_anything_to_install_is_a_usage_error(layered: Path) -> None:
    done = ora(layered, "plugins", "install")
    assert done.returncode == 2
    assert "nothing to install" in done.stderr

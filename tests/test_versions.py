"""One version for every distribution: each pyproject.toml (ora-core, plugins/*, contrib/*, meta/* —
any distribution added later included), each package's ``__version__``, ora-default's pins, and
CHANGELOG.md's latest entry agree. ``ora --version`` says it, ``-v`` for every Ora distribution."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _scripts_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_ora_scripts_{name}", REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


dists = _scripts_module("distributions")


def test_every_distribution_is_found_in_every_group() -> None:
    found = {dists.project(d)["name"] for d in dists.distribution_dirs()}
    expected = {"ora-core", "ora-default", "ora-example-detector", "ora-example-verifier", "ora-example-backend"}
    expected |= {dists.project(p.parent)["name"] for p in REPO.glob("plugins/*/pyproject.toml")}
    assert found == expected


def test_every_distribution_carries_ora_cores_version() -> None:
    core = dists.core_version()
    wrong = {dists.project(d)["name"]: dists.project(d)["version"] for d in dists.distribution_dirs()
             if dists.project(d)["version"] != core}
    assert not wrong, f"every distribution moves with ora-core {core} (python scripts/set_version.py): {wrong}"


def test_every_package_version_attribute_says_the_same() -> None:
    core = dists.core_version()
    stated = {str(m.relative_to(REPO)): dists.MODULE_VERSION.search(m.read_text(encoding="utf-8")).group(2)
              for d in dists.distribution_dirs() for m in dists.version_modules(d)}
    assert "ora_core/__init__.py" in stated
    assert {path: v for path, v in stated.items() if v != core} == {}


def test_the_changelog_latest_entry_is_the_version() -> None:
    assert dists.changelog_latest() == dists.core_version()
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "Keep a Changelog" in text and "## [Unreleased]" in text
    # Keep a Changelog's shape: every entry dated, newest first, only its section names
    entries = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert len(entries) >= 3
    versions = [tuple(int(x) for x in v.split(".")) for v, _ in entries]
    assert versions == sorted(versions, reverse=True)
    assert [d for _, d in entries] == sorted((d for _, d in entries), reverse=True)
    assert set(re.findall(r"^### (\w+)$", text, re.M)) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed",
                                                         "Security"}


def test_ora_default_pins_ora_core_and_every_first_party_plugin_at_the_version() -> None:
    core = dists.core_version()
    requirements = dists.project(REPO / "meta" / "ora-default")["dependencies"]
    pins = {}
    for req in requirements:
        name, _, version = re.sub(r"\[[^\]]*\]", "", req).partition("==")
        pins[name.strip()] = version.strip()
    plugins = {dists.project(p.parent)["name"] for p in REPO.glob("plugins/*/pyproject.toml")}
    missing = plugins - set(pins)
    assert not missing, f"meta/ora-default/pyproject.toml does not pin {sorted(missing)}"
    assert {n: v for n, v in pins.items() if n.startswith("ora-") and v != core} == {}
    assert "ora-core[http,html]==" + core in requirements


def test_set_version_moves_every_distribution_together(tmp_path: Path) -> None:
    """The script on a copy of the checkout's version-bearing files: every one moved, nothing else touched."""
    import shutil

    for d in dists.distribution_dirs():
        rel = d.relative_to(REPO)
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
        shutil.copy(d / "pyproject.toml", tmp_path / rel / "pyproject.toml")
        for module in dists.version_modules(d):
            (tmp_path / module.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(module, tmp_path / module.relative_to(REPO))
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    done = subprocess.run([sys.executable, str(tmp_path / "scripts" / "set_version.py"), "9.8.7"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    moved = [dists.project(d)["version"] for d in dists.distribution_dirs(tmp_path)]
    assert moved and set(moved) == {"9.8.7"}
    assert '"ora-core[http,html]==9.8.7"' in (tmp_path / "meta" / "ora-default" / "pyproject.toml").read_text()
    assert '__version__ = "9.8.7"' in (tmp_path / "ora_core" / "__init__.py").read_text()
    refused = subprocess.run([sys.executable, str(tmp_path / "scripts" / "set_version.py"), "next"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "usage" in refused.stderr


def ora(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True, timeout=120)


def test_ora_version_prints_ora_cores_version() -> None:
    from importlib.metadata import version

    done = ora("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ora-core {version('ora-core')}"


def test_ora_version_verbose_lists_every_installed_ora_distribution() -> None:
    from importlib.metadata import version

    done = ora("--version", "-v")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()}
    assert done.stdout.splitlines()[0].startswith("ora-core ")
    for dist in ("ora-core", "ora-scripted", "ora-openai", "ora-trace-fs"):
        assert rows[dist] == version(dist)
    assert "plugin: scripted" in done.stdout


def test_verbose_without_version_is_a_usage_error() -> None:
    done = ora("-v", "plugins", "list")
    assert done.returncode == 2
    assert "-v/--verbose goes with --version" in done.stderr


def test_the_readme_commands_table_documents_version_and_every_plugins_command() -> None:
    from ora_core.cli.plugins import group

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = [line for line in readme.splitlines() if line.startswith("| `ora ")]
    names = sorted(c.name for c in group.registered_commands)
    assert names == ["check", "install", "list", "uninstall"]
    for name in names:
        assert any(line.startswith(f"| `ora plugins {name}") for line in table), f"ora plugins {name}"
    assert any(line.startswith("| `ora --version [-v]`") for line in table)

"""`ora plugins list|check` and `ora --help` against the plugins really installed here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ora_core.testing import write_distribution

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "chromadb", "sentence_transformers", "llama_cpp", "playwright", "transformers")


def ora(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=120)


def first_party_distributions() -> set[str]:
    names = set()
    for pyproject in REPO.glob("plugins/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        if "ora" in project.get("entry-points", {}):  # libraries such as ora-minilm register nothing
            names.add(project["name"])
    return names


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A distribution publishing an ``ora`` plugin that raises at import."""
    return write_distribution(
        tmp_path / "site", "ora-broken-example",
        modules={"ora_broken_example.py": "import no_such_module_anywhere\n"},
        entry_points={"broken-example": "ora_broken_example"},
    )


def test_plugins_list_json_shows_every_first_party_distribution_ok() -> None:
    proc = ora("plugins", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    by_dist = {row["distribution"]: row for row in rows}
    expected = first_party_distributions() | {"ora-core"}
    missing = expected - set(by_dist)
    assert not missing, f"installed but not listed (is it installed? scripts/install.sh): {missing}"
    not_ok = {d: (by_dist[d]["status"], by_dist[d]["error"]) for d in expected if by_dist[d]["status"] != "ok"}
    assert not not_ok
    for row in rows:
        assert set(row) >= {"name", "distribution", "version", "hooks", "components", "layers", "status", "error"}
        assert row["version"], row


def test_plugins_list_table_names_the_columns() -> None:
    proc = ora("plugins", "list")
    assert proc.returncode == 0, proc.stderr
    for column in ("plugin", "distribution", "version", "components", "hooks", "layer / assumes", "status"):
        assert column in proc.stdout
    assert "modes-default" in proc.stdout
    assert "retriever: chroma-conversation" in proc.stdout  # every name whole, never broken mid-word


def test_a_broken_installed_plugin_shows_failed_while_help_still_works(broken_site: Path) -> None:
    env = {"PYTHONPATH": str(broken_site)}
    listing = ora("plugins", "list", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    row = next(r for r in json.loads(listing.stdout) if r["name"] == "broken-example")
    assert row["status"] == "failed"
    assert row["distribution"] == "ora-broken-example" and row["version"] == "0.1.0"
    assert "import failed: ModuleNotFoundError: No module named 'no_such_module_anywhere'" in row["error"]

    helped = ora("--help", env=env)
    assert helped.returncode == 0 and "plugins" in helped.stdout

    checked = ora("plugins", "check", env=env)
    assert checked.returncode == 1
    assert "broken-example (ora-broken-example 0.1.0): failed: import failed" in checked.stderr


def test_plugins_check_passes_on_a_clean_install() -> None:
    proc = ora("plugins", "check")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "0 with problems" in proc.stdout


def test_strict_mode_turns_a_broken_plugin_into_a_startup_error(broken_site: Path) -> None:
    proc = ora("plugins", "list", env={"PYTHONPATH": str(broken_site), "ORA_STRICT_PLUGINS": "1"})
    assert proc.returncode == 1
    assert "plugin 'broken-example' (ora-broken-example): import failed" in proc.stderr


def test_an_empty_allow_list_disables_even_the_first_party_plugins() -> None:
    proc = ora("plugins", "list", "--json", env={"ORA_PLUGINS": ""})
    rows = json.loads(proc.stdout)
    assert rows and {r["status"] for r in rows} == {"disabled"}


IMPORT_PROBE = """
import json, sys
from ora_core import cli
loaded_at_import = sorted(m for m in sys.modules if m.split('.')[0] in {plugin_modules!r})
try:
    cli.main({argv!r})
except SystemExit as done:  # typer ends every command this way: a success goes on to the report
    if done.code not in (0, None):
        raise
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})
print(json.dumps({{"heavy": heavy, "loaded_at_import": loaded_at_import}}), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["plugins", "list"], ["plugins", "list", "--json"]])
def test_help_and_plugins_list_import_no_heavy_library(argv: list[str]) -> None:
    plugin_modules = {"ora_scripted", "ora_modes"} | {
        p.name.replace("-", "_") for p in REPO.glob("plugins/*") if p.is_dir()
    }
    code = IMPORT_PROBE.format(argv=argv, heavy=set(HEAVY), plugin_modules=plugin_modules)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={k: v for k, v in os.environ.items() if not k.startswith("ORA")})
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["heavy"] == [], f"`ora {' '.join(argv)}` imported {report['heavy']}"
    assert report["loaded_at_import"] == [], "plugins must load in the CLI callback, not at import"


HELP_PROBE = """
import json, sys
from ora_core import cli
try:
    cli.main(["--help"])
except SystemExit as done:  # typer ends every command this way: a success goes on to the report
    if done.code not in (0, None):
        raise
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_help_registers_plugins_without_collecting_their_components_or_importing_pydantic() -> None:
    """`ora --help` needs the plugins' commands only: every plugin is imported and registered (its
    commands listed), but no component module is imported and no registration hook runs, so
    neither does pydantic (the host collects components on the first look at them)."""
    proc = subprocess.run([sys.executable, "-c", HELP_PROBE], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={k: v for k, v in os.environ.items() if not k.startswith("ORA")})
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stderr.strip().splitlines()[-1])
    assert "ora_broken" in modules and "ora_grounding" in modules  # loaded and registered
    components = [m for m in modules if m in {"ora_broken.detector", "ora_grounding.verifier",
                                              "ora_grounding.detector", "ora_scripted.backend",
                                              "ora_health_detectors.detectors", "ora_evidence_guard.detectors",
                                              "ora_bypass.clock", "ora_core.kernel.models"}]
    assert components == [], components
    assert not [m for m in modules if m.split(".")[0] in {"pydantic", "pydantic_core"}]
    assert "vault" in proc.stdout and "trace" in proc.stdout  # the plugins' commands are listed


PYDANTIC_SCAN_PROBE = """
import json, sys
from ora_core import cli
try:
    cli.main(["plugins", "list", "--json"])
except SystemExit as done:  # typer ends every command this way: a success goes on to the report
    if done.code not in (0, None):
        raise
from pydantic.plugin import _loader
print(json.dumps({"scanned": _loader._plugins is not None}), file=sys.stderr)
"""


@pytest.mark.parametrize(("env", "scanned"), [({}, False), ({"PYDANTIC_DISABLE_PLUGINS": ""}, True)])
def test_the_ora_command_skips_pydantics_plugin_scan_unless_the_variable_is_set(env: dict, scanned: bool) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ORA") and k != "PYDANTIC_DISABLE_PLUGINS"}
    proc = subprocess.run([sys.executable, "-c", PYDANTIC_SCAN_PROBE], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**base, **env})
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == {"scanned": scanned}, proc.stderr[-500:]

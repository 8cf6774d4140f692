"""``ora config show`` and ``ora run`` refuse a plugin table or a backend ``options`` table that its
plugin's declared model refuses (exit 1, the file, the table and the key named, before any turn);
a table nobody declares is shown with a warning. Run as a user would: ``python -m ora_core.cli``
with the installed plugins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPTED = """
    [backends.local]
    type = "scripted"
    model = "scripted-1"
    [backends.local.options]
    default = "Paris."
"""


def ora(tmp_path: Path, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "ora.toml"
    path.write_text(textwrap.dedent(SCRIPTED) + textwrap.dedent(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    env.update(ORA_CONFIG=str(path), ORA__TRACE__ROOT=str(tmp_path / "traces"), ORA_PLUGIN_CACHE="off")
    return subprocess.run([sys.executable, "-m", "ora_core.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=180)


def test_an_unknown_key_in_a_plugin_table_fails_config_show_and_run_before_the_turn(tmp_path: Path) -> None:
    """Observed: ``[plugins.grounding] threshhold = 0.7`` was ignored with exit 0."""
    typo = "[plugins.grounding]\nthreshhold = 0.7\n"
    shown = ora(tmp_path, typo, "config", "show")
    assert shown.returncode == 1, shown.stderr
    assert f"ora: {tmp_path / 'ora.toml'}: [plugins.grounding] threshhold: unknown key" in shown.stderr
    assert "known keys: exclude_streams" in shown.stderr and shown.stdout == ""
    ran = ora(tmp_path, typo, "run", "--no-progress", "What is the capital of France?")
    assert ran.returncode == 1, ran.stderr[-2000:]
    assert "[plugins.grounding] threshhold: unknown key" in ran.stderr
    assert not (tmp_path / "traces").exists(), "refused before the turn opened: no trace, no model call"


def test_a_wrong_type_a_misspelt_table_and_a_backend_option_typo_are_named_together(tmp_path: Path) -> None:
    config = """
        [backends.local.options.rules]
        [plugins.trace-fs]
        fsync = "maybe"
        [plugins.groundng]
        exclude_streams = []
    """
    shown = ora(tmp_path, config.replace("[backends.local.options.rules]\n", ""), "config", "show")
    assert shown.returncode == 1, shown.stderr
    assert "2 problems in plugin and backend options" in shown.stderr
    assert "[plugins.trace-fs] fsync: Input should be a valid boolean, unable to interpret input (got 'maybe')" \
        in shown.stderr
    assert "[plugins.groundng] names no installed plugin; did you mean 'grounding'?" in shown.stderr
    backend_typo = ora(tmp_path, '[backends.local.options.extra]\n', "run", "--no-progress", "Capital of France?")
    assert backend_typo.returncode == 1, backend_typo.stderr[-2000:]
    assert "[backends.local.options] extra: unknown key; known keys: rules, replies, default, latency_s" \
        in backend_typo.stderr
    assert not (tmp_path / "traces").exists()


def test_a_table_no_plugin_declares_a_model_for_is_shown_with_a_warning(tmp_path: Path) -> None:
    shown = ora(tmp_path, "[plugins.minilm]\nbatch = 8\n", "config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "[plugins.minilm]\nbatch = 8" in shown.stdout
    assert ("ora: warning: [plugins.minilm] is not checked: plugin 'minilm' declares no options model "
            "(ora_register_options); its keys are passed on as written") in shown.stderr
    listed = ora(tmp_path, "[plugins.minilm]\nbatch = 8\n", "plugins", "list", "--json")
    assert listed.returncode == 0 and "ora: warning: [plugins.minilm] is not checked" in listed.stderr


def test_an_empty_prompt_is_a_usage_error_before_any_model_call(tmp_path: Path) -> None:
    """Observed (fixed before this change; verified here): ``ora run ""`` made a model call."""
    empty = ora(tmp_path, "", "run", "--no-progress", "")
    assert empty.returncode == 2 and "the prompt is empty" in empty.stderr
    assert not (tmp_path / "traces").exists()

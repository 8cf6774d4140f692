"""The shared ``trace`` command group (``ora.group``), ``ora trace otel [--check]``, the
``[plugins.otel]`` table, and the convention names checked against the semantic-conventions package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ora_otel
import ora_trace_fs
import pytest
import typer
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.semconv.schemas import Schemas
from ora_otel import conventions as c
from ora_otel.commands import TRACE_HELP
from ora_otel.options import TABLE, OtelOptions, traces_url
from typer.testing import CliRunner

from ora_core.api import CommandContext, ConfigError, PluginError
from ora_core.testing import build_app, make_config, make_host

TRACE_FS_HELP = "The forensic trace: turns and their model calls."


def _app(*plugins: object, otel: dict | None = None) -> typer.Typer:
    resolved = make_config({"plugins": {TABLE: otel}} if otel is not None else {})
    app = build_app()
    host = make_host(*plugins)
    host.register_commands(app, CommandContext(host, lambda: resolved, app=app))
    return app


# pluggy calls the commands hook last-registered first: the group is the first *called* plugin's
@pytest.mark.parametrize(("plugins", "help_text"), [((ora_otel, ora_trace_fs), TRACE_FS_HELP),
                                                    ((ora_trace_fs, ora_otel), TRACE_HELP)],
                         ids=["trace-fs-called-first", "otel-called-first"])
def test_both_plugins_commands_land_in_one_trace_group_whichever_registers_first(plugins, help_text) -> None:
    app = _app(*plugins)
    assert [g.name for g in app.registered_groups].count("trace") == 1
    shown = CliRunner().invoke(app, ["trace", "--help"])
    assert shown.exit_code == 0, shown.output
    for command in ("ls", "show", "view", "export", "otel"):
        assert f" {command} " in shown.stdout, shown.stdout
    assert help_text in shown.stdout  # the group is the first registrant's, created once


def test_the_ora_command_line_gives_plugins_its_root_app_for_the_shared_group(tmp_path) -> None:
    ora = str(Path(sys.executable).with_name("ora"))
    env = {**os.environ, "ORA_PLUGINS": "trace-fs,otel", "ORA_CONFIG": str(tmp_path / "none.toml")}
    shown = subprocess.run([ora, "trace", "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert shown.returncode == 0, shown.stderr
    assert all(f" {command} " in shown.stdout for command in ("ls", "show", "view", "export", "otel")), shown.stdout


def test_group_returns_the_group_already_on_the_root_app_and_needs_one() -> None:
    app = typer.Typer()
    existing = typer.Typer()
    app.add_typer(existing, name="trace")
    ora = CommandContext(None, lambda: None, app=app)
    assert ora.group("trace", help="ignored") is existing and ora.group("trace") is existing
    with pytest.raises(PluginError, match=r"ora.group\('trace'\): this CommandContext has no root app"):
        CommandContext(None, lambda: None).group("trace")


def test_trace_otel_says_the_export_is_off_until_the_table_turns_it_on(receiver, dead_url) -> None:
    off = CliRunner().invoke(_app(ora_otel), ["trace", "otel", "--check"])
    assert off.exit_code == 0 and off.stdout.startswith("otel: off (no [plugins.otel] endpoint)")
    disabled = CliRunner().invoke(_app(ora_otel, otel={"endpoint": receiver.url, "enabled": False}), ["trace", "otel"])
    assert disabled.stdout.startswith("otel: off (enabled = false)")
    on = CliRunner().invoke(_app(ora_otel, otel={"endpoint": receiver.url}), ["trace", "otel", "--check"])
    assert on.exit_code == 0, on.output
    assert on.stdout == (f"otel: on: spans to {receiver.url}/v1/traces, without message content, timeout 5 s\n"
                         f"otel: the collector at {receiver.url}/v1/traces takes exports\n")
    assert receiver.paths == ["/v1/traces"] and receiver.spans == []  # an empty export, nothing made up
    down = CliRunner().invoke(_app(ora_otel, otel={"endpoint": dead_url, "timeout_s": 0.5}),
                              ["trace", "otel", "--check"])
    assert down.exit_code != 0 and down.exception.code == 1
    assert down.exception.message.startswith(f"the collector at {dead_url}/v1/traces did not take an export: ")


def test_the_otel_table_is_checked_and_off_unless_it_names_an_endpoint_or_enabled() -> None:
    assert not OtelOptions().active
    assert OtelOptions(endpoint="http://127.0.0.1:4318").active
    assert not OtelOptions(endpoint="http://127.0.0.1:4318", enabled=False).active
    on = OtelOptions(enabled=True)
    assert on.active and on.traces_url == "http://localhost:4318/v1/traces"
    assert traces_url("http://c:4318/") == traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
    with pytest.raises(ConfigError, match="endpont"):
        OtelOptions.from_table({"endpont": "http://c:4318"}, "plugins.otel")
    with pytest.raises(ConfigError, match="not an http"):
        OtelOptions.from_table({"endpoint": "c:4318"}, "plugins.otel")


def test_every_genai_name_is_the_semantic_conventions_own_and_the_schema_url_is_a_published_one() -> None:
    ours = {value for name, value in vars(c).items() if isinstance(value, str) and value.startswith("gen_ai.")
            and name.isupper()}
    published = {value for name, value in vars(gen_ai_attributes).items() if name.startswith("GEN_AI_")}
    published.add("gen_ai.evaluation.result")  # an event name, not an attribute
    assert ours - published == set()
    assert c.ERROR_TYPE == error_attributes.ERROR_TYPE
    assert c.SCHEMA_URL in {schema.value for schema in Schemas}

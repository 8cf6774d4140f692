"""``ora models list`` (``--json``, ``--check``): backends, models, families, roles, the plugin
behind each type, and reachability from each backend's own ``check()``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ora_openai
import ora_scripted
import pytest
from typer.testing import CliRunner

from ora_core import hookimpl
from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app
from ora_core.kernel.errors import BackendUnavailable
from ora_core.testing import make_host

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "chromadb", "sentence_transformers", "llama_cpp", "playwright", "transformers")


class Probed:
    """A backend type whose check() answers, or fails, as its model name says."""

    name = "probed"

    def create(self, settings: Any) -> Any:
        model = settings.model

        class _Backend:
            provider, family = "probed", "test"

            def __init__(self) -> None:
                self.model = model

            async def complete(self, messages: Any, params: Any) -> Any:
                raise AssertionError("models list never generates")

            async def check(self) -> dict[str, Any]:
                if model == "down":
                    raise BackendUnavailable("probe refused", provider="probed", model=model)
                return {"note": "fine"}

        return _Backend()

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        register(self)


@pytest.fixture
def invoke(tmp_path: Path) -> Iterator[Any]:
    saved = (cli_state.state.host, cli_state.state.config_path)
    cli_state.state.host = make_host(ora_scripted, ora_openai, Probed())

    def _invoke(config: str, *args: str) -> Any:
        path = tmp_path / "ora.toml"
        path.write_text(config)
        return CliRunner().invoke(build_app(), ["--config", str(path), "models", "list", *args])

    yield _invoke
    cli_state.state.host, cli_state.state.config_path = saved


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONFIG = """
[backends.local]
type = "probed"
model = "up"
family = "fam-a"
fallbacks = ["spare"]

[backends.spare]
type = "scripted"
model = "scripted-1"

[roles]
analyst = "spare"
"""


def test_json_lists_backends_models_families_roles_and_plugins(invoke) -> None:
    result = invoke(CONFIG, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["backend"]: r for r in json.loads(result.output)["backends"]}
    local, spare = rows["local"], rows["spare"]
    assert (local["type"], local["model"], local["family"]) == ("probed", "up", "fam-a")
    assert "analyst" not in local["roles"] and "direct" in local["roles"] and spare["roles"] == ["analyst"]
    assert local["fallbacks"] == ["spare"] and spare["fallback_for"] == ["local"]
    assert spare["plugin"] == "ora_scripted" and spare["type_registered"] is True
    assert "check" not in local


def test_check_reports_reachable_unreachable_and_unknown_and_exits_1(invoke) -> None:
    config = CONFIG.replace('model = "up"', 'model = "down"') + f"""
[backends.remote]
type = "openai"
model = "gpt-x"
base_url = "http://127.0.0.1:{dead_port()}/v1"
"""
    result = invoke(config, "--json", "--check")
    assert result.exit_code == 1, result.output
    rows = {r["backend"]: r for r in json.loads(result.output)["backends"]}
    assert rows["local"]["check"]["reachable"] is False
    assert rows["local"]["check"]["error"]["kind"] == "unavailable"
    assert rows["remote"]["check"]["reachable"] is False and "cannot connect" in rows["remote"]["check"]["error"][
        "message"]
    assert rows["spare"]["check"] == {"reachable": None, "detail": "this backend type has no check()"}


def test_check_all_reachable_exits_0_and_the_table_says_so(invoke) -> None:
    result = invoke(CONFIG, "--check")
    assert result.exit_code == 0, result.output
    assert "reachable" in result.output and "fam-a" in result.output and "UNREACHABLE" not in result.output


def test_a_type_no_plugin_registers_is_shown_not_hidden(invoke) -> None:
    result = invoke(CONFIG.replace('type = "probed"', 'type = "vllm-native"'), "--check", "--json")
    assert result.exit_code == 1
    local = json.loads(result.output)["backends"][0]
    assert local["type_registered"] is False and local["plugin"] is None
    assert local["check"]["reachable"] is False and local["check"]["error"]["kind"] == "config"
    assert "no installed plugin registers that backend type" in local["check"]["error"]["message"]


def test_models_list_with_the_installed_plugins_imports_nothing_heavy() -> None:
    code = ("import sys\nfrom ora_core.cli.app import main\ntry:\n    main(['models', 'list', '--json'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY []"
    rows = json.loads(proc.stdout[:proc.stdout.rindex("HEAVY")])["backends"]
    assert any(r["type"] == "local-llm" and r["distribution"] == "ora-local-llm" for r in rows)


def test_each_backend_says_whether_it_can_hold_a_reply_to_a_json_schema(invoke) -> None:
    config = CONFIG + """
[backends.served]
type = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"

[backends.served-text]
type = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
options = { response_format = "off" }

[backends.elsewhere]
type = "vllm-native"
model = "m"
"""
    result = invoke(config, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["backend"]: r for r in json.loads(result.output)["backends"]}
    assert rows["served"]["structured_output"] is True and rows["served-text"]["structured_output"] is False
    assert rows["spare"]["structured_output"] is False, "a backend without the attribute cannot"
    assert rows["elsewhere"]["structured_output"] is None and "structured_output_error" not in rows["elsewhere"]
    table = invoke(config)
    assert "structured" in table.output and "yes" in table.output and "unknown" in table.output

"""Commands are defined at module level (simonw/llm's layout), in the kernel's command line and in every
plugin, and the layout ``docs/hooks.md`` shows a plugin author runs as written."""

from __future__ import annotations

import ast
import re
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ora_core.api import CommandContext
from ora_core.testing import build_app, make_host, scripted_config

REPO = Path(__file__).resolve().parents[1]
HOOKS_PAGE = REPO / "docs" / "hooks.md"
PYTHON_BLOCK = re.compile(r"^```python\n(# (my_plugin/[\w/]+\.py)[^\n]*\n.*?)^```", re.M | re.S)


def command_definitions_inside_functions(paths: list[Path]) -> list[str]:
    """``file:line name`` of every function decorated as a typer command or callback (``@x.command(...)``,
    ``@x.callback(...)``) that is defined inside another function."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for outer in ast.walk(tree):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(outer):
                if inner is outer or not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for decorator in inner.decorator_list:
                    call = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if isinstance(call, ast.Attribute) and call.attr in ("command", "callback"):
                        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                        found.append(f"{where}:{inner.lineno} {inner.name}")
    return found


def command_modules() -> list[Path]:
    """The kernel's command line and every module of every plugin and contrib distribution (tests aside)."""
    kernel = sorted((REPO / "ora_core" / "cli").glob("*.py"))
    plugins = [p for root in ("plugins", "contrib") for p in sorted((REPO / root).glob("*/*/**/*.py"))
               if "tests" not in p.relative_to(REPO).parts]
    assert any(p.name == "calibrate.py" for p in kernel)
    assert {p.parent.name for p in plugins} >= {"ora_trace_fs", "ora_otel", "ora_chroma"}
    return kernel + plugins


def test_every_command_is_defined_at_module_level() -> None:
    assert command_definitions_inside_functions(command_modules()) == []


def test_the_check_finds_a_command_defined_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "closure.py"
    source.write_text("import typer\n\ndef register(app):\n    @app.command('x')\n    def x() -> None: ...\n")
    assert len(command_definitions_inside_functions([source])) == 1


def test_the_documented_plugin_command_layout_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = {path: body for body, path in PYTHON_BLOCK.findall(HOOKS_PAGE.read_text(encoding="utf-8"))}
    assert set(blocks) == {"my_plugin/cli.py", "my_plugin/__init__.py"}
    package = f"my_plugin_{uuid.uuid4().hex[:8]}"
    for path, body in blocks.items():
        target = tmp_path / path.replace("my_plugin", package, 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = __import__(package)
    resolved = scripted_config(tmp_path / "traces")
    app = build_app()
    host = make_host(plugin)
    host.register_commands(app, CommandContext(host, lambda: resolved, app=app))
    shown = CliRunner().invoke(app, ["notes", "where"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == f"{tmp_path / 'traces'}\n"
    assert f"{package}.cli" in sys.modules

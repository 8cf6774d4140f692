"""The public API: ``ora_core.api`` exports what docs/api.md lists, lazily, and ``Ora`` runs
turns the way the CLI does (docs/api.md's examples run as written)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import ora_scripted
import pytest

import ora_core.api as api
from ora_core.api import Ora, UsageError
from ora_core.testing import make_host, scripted_config

REPO = Path(__file__).resolve().parents[1]
API_DOC = REPO / "docs" / "api.md"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def test_every_name_in_all_resolves_and_the_names_documented_are_exported() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", API_DOC.read_text()))
    missing = sorted(n for n in api.__all__ if n not in documented)
    assert missing == [], f"exported but not documented in docs/api.md: {missing}"


def test_importing_the_api_door_loads_no_engine_and_no_pydantic_models() -> None:
    code = ("import sys; from ora_core.api import hookimpl; "
            "print(any(m.startswith('ora_core.engine') for m in sys.modules), 'ora_core.kernel.models' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        api.Nope  # noqa: B018


def _ora(tmp_path: Path, **config: object) -> Ora:
    import ora_modes

    resolved = scripted_config(tmp_path / "traces", default="Paris is the capital of France.", **config)
    return Ora(host=make_host(ora_scripted, ora_modes), config=resolved)


def test_run_returns_the_turn_result_with_its_trace_role_ledger_and_status(tmp_path: Path) -> None:
    result = _ora(tmp_path).run("Hello, what is the capital of France?", mode="simple")
    assert result.status in ("ok", "degraded") and result.answer == "Paris is the capital of France."
    assert [c.role for c in result.runtime_role_models][-1] == "direct"  # a forced mode skips stage 0, not Phase A


def test_stream_yields_typed_step_events_in_order_and_ends_with_the_result(tmp_path: Path) -> None:
    ora = _ora(tmp_path)

    async def collect() -> list:
        return [event async for event in ora.stream("Hello there", mode="simple")]

    events = asyncio.run(collect())
    types = [e.type for e in events]
    assert types[-1] == "turn_finished" and types.count("turn_finished") == 1
    assert "step_started" in types and "step_finished" in types
    started = [e.step for e in events if e.type == "step_started"]
    finished = [e.step for e in events if e.type == "step_finished"]
    assert started == finished  # every step that started also finished, in the same order
    assert events[-1].result.answer == "Paris is the capital of France."
    assert all(e.turn_id == events[-1].result.turn_id for e in events)


def test_an_empty_prompt_is_a_usage_error_before_any_model_call(tmp_path: Path) -> None:
    ora = _ora(tmp_path)
    for prompt in ("", "   \n\t "):
        with pytest.raises(UsageError, match="empty"):
            ora.run(prompt)
    assert not (tmp_path / "traces").exists()  # no turn was opened


def test_run_inside_an_event_loop_says_to_await_arun(tmp_path: Path) -> None:
    ora = _ora(tmp_path)

    async def inside() -> None:
        with pytest.raises(UsageError, match="arun"):
            ora.run("Hello")

    asyncio.run(inside())


def test_open_applies_overrides_over_file_and_environment(tmp_path: Path) -> None:
    ora = Ora.open(trace={"root": str(tmp_path / "t1")}, **{"pipeline.best_guess": True}, retrieval__k=2)
    config = ora.config.config
    assert str(config.trace.root) == str(tmp_path / "t1")
    assert config.pipeline.best_guess is True and config.retrieval.k == 2
    assert any("application overrides" in s for s in ora.config.sources)
    assert ora.host.records  # plugins were loaded from the entry points, as the CLI does


def test_the_examples_of_docs_api_md_run(tmp_path: Path) -> None:
    config = tmp_path / "ora.toml"
    config.write_text(
        f'[trace]\nroot = "{tmp_path / "traces"}"\n'
        '[backends.local]\ntype = "scripted"\nmodel = "scripted-1"\nfamily = "scripted"\n'
        '[backends.local.options]\ndefault = "An answer resting on the evidence.\\nCONFIDENCE: 0.9"\n'
        '[verification]\nverifier = "model"\nfinal_verifier = "model"\n'
        f'[retrieval]\npath = "{tmp_path / "chroma"}"\n'
        '[retrieval.streams]\nconcept = false\nconversation = false\nrelationship = false\n',
        encoding="utf-8")
    env = {**os.environ, "ORA_CONFIG": str(config), "HF_HUB_OFFLINE": "1"}
    for block in python_blocks(API_DOC.read_text()):
        proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "trace" in proc.stdout.lower() or str(tmp_path / "traces") in proc.stdout


def _top_level_names(exclude: tuple[str, ...]) -> set[str]:
    """Every class and function defined at the top of an ``ora_core`` module (not in ``exclude``'d ones)."""
    import ast

    names: set[str] = set()
    for path in (REPO / "ora_core").rglob("*.py"):
        rel = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if any(rel.startswith(prefix) for prefix in exclude):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kinds = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        names |= {node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")}
    return names


def test_every_name_the_api_page_uses_for_users_is_exported() -> None:
    """The other direction: a class or function of Ora's that docs/api.md names plainly (not as
    ``ora_core.testing``'s or a module path) is importable from ``ora_core.api``."""
    text = API_DOC.read_text()
    used = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\([^`]*\))?`", text))
    # a call inside a longer span (``ora.run(prompt, clarification=answer_clarification(...))``), not a method
    used |= {name for span in re.findall(r"`([^`\n]+)`", text)
             for name in re.findall(r"(?<![.\w])([A-Za-z_]\w*)\(", span)}
    used -= {"ok", "degraded", "needs_clarification", "halted"}  # the statuses of a turn, not names
    testing = _top_level_names(()) - _top_level_names(("ora_core.testing",))
    defined = _top_level_names(("ora_core.testing", "ora_core.cli"))
    import ora_core.api.html as html_door
    import ora_core.api.http as http_door
    import ora_core.api.text as text_door
    from ora_core.kernel import hookspecs

    doors = {*api.__all__, *http_door.__all__, *text_door.__all__, *html_door.__all__,
             *(n for n in dir(hookspecs) if n.startswith("ora_"))}
    unexported = sorted(n for n in used & defined if n not in doors and n not in testing)
    assert unexported == [], f"docs/api.md names these, but no door of ora_core.api exports them: {unexported}"

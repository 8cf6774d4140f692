"""Fixtures for the Chroma plugin's tests: real Chroma in temporary directories, and the real
``minilm`` embedder (plugin ora-minilm) found by a plugin host, as a turn or a command finds it;
its model loads once per session."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ora_core.api import StandaloneContext
from ora_core.testing import make_config, make_host


def embedder_host() -> Any:
    """A plugin host with the embedder a default install has (ora-minilm's ``minilm``)."""
    import ora_minilm.plugin

    return make_host(ora_minilm.plugin)


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The ``minilm`` embedder, its model loaded once for the whole session."""
    embedder = embedder_host().embedder("minilm")
    embedder.warm_up()
    return embedder


def write_notes(root: Path, notes: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in notes.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def chroma_config(tmp_path: Path) -> Callable[..., Any]:
    """``chroma_config(**plugin_settings)`` -> an OraConfig whose store is under tmp_path."""

    def _make(*, retrieval: dict[str, Any] | None = None, **settings: Any) -> Any:
        overrides: dict[str, Any] = {
            "retrieval": {"path": str(tmp_path / "chroma"), **(retrieval or {})},
            "trace": {"root": str(tmp_path / "traces")},
        }
        if settings:
            overrides["plugins"] = {"chroma": settings}
        return make_config(overrides).config

    return _make


def standalone(config: Any, conversation_id: str = "default") -> StandaloneContext:
    ctx = StandaloneContext(config, host=embedder_host())
    ctx.conversation_id = conversation_id  # type: ignore[attr-defined]
    return ctx


@pytest.fixture
def notes() -> Callable[[Path, dict[str, str]], Path]:
    """``notes(root, {"a.md": text, ...})`` writes a vault (text dedented) and returns root."""
    return write_notes


@pytest.fixture
def ctx_for() -> Callable[..., StandaloneContext]:
    """``ctx_for(config, conversation_id="default")``: the ctx a retriever gets outside a turn (its
    host registers the ``minilm`` embedder)."""
    return standalone

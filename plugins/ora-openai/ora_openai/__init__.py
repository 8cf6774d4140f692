"""Ora plugin: OpenAI-compatible chat completion backends over httpx.

``[backends.<name>] type = "openai"`` with ``base_url`` (default the OpenAI API) and the key in
``api_key`` or, better, the environment variable named by ``api_key_env``. Works with anything
that speaks ``POST {base_url}/chat/completions``: vLLM, Ollama, llama.cpp's server, hosted APIs.

Retries with backoff on 429/5xx and dropped connections (honouring ``Retry-After``), a circuit
breaker per endpoint, explicit timeouts, one pooled ``httpx.AsyncClient`` per backend, an
opt-in response cache keyed by the full request. Every failure is a typed ``BackendError``.

``options = { stream = true, stream_usage = true }`` streams every reply of a turn (server-sent
events, assembled into one ``Completion``): a stream that breaks, stalls, errs or ends without
``[DONE]`` is a typed ``BackendError`` carrying the text received so far as ``partial_output``,
which the turn's call record keeps. A prompt over the server's context window is
``BackendContextExceeded`` (kind ``context_window``), its message naming the window and the
prompt's size, never retried. ``OpenAIOptions`` (``ora_openai.options``) documents every option.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import LazyBackendFactory, lazy_exports

#: Public names, imported on first access (PEP 562) so that loading the plugin stays cheap.
_LAZY = {"OpenAIBackend": "backend", "OpenAIFactory": "backend", "CircuitBreaker": "breaker", "breaker_for": "breaker"}

__all__ = [*sorted(_LAZY), "ora_register_backends"]


__getattr__ = lazy_exports(__name__, _LAZY)


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(LazyBackendFactory("openai", "ora_openai.backend:OpenAIFactory",
                                options="ora_openai.options:OpenAIOptions"))

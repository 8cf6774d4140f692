"""Ora plugin: OpenAI-compatible chat completion backends over httpx.

``[backends.<name>] type = "openai"`` with ``base_url`` (default the OpenAI API) and the key in
``api_key`` or, better, the environment variable named by ``api_key_env``. Works with anything
that speaks ``POST {base_url}/chat/completions``: vLLM, Ollama, llama.cpp's server, hosted APIs.

Retries with backoff on 429/5xx and dropped connections (honouring ``Retry-After``), a circuit
breaker per endpoint, explicit timeouts, one pooled ``httpx.AsyncClient`` per backend, an
opt-in response cache keyed by the full request. Every failure is a typed ``BackendError``.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl

from .backend import OpenAIBackend, OpenAIFactory
from .breaker import CircuitBreaker, breaker_for

__all__ = ["CircuitBreaker", "OpenAIBackend", "OpenAIFactory", "breaker_for", "ora_register_backends"]


@hookimpl
def ora_register_backends(register: Callable[..., None]) -> None:
    register(OpenAIFactory())

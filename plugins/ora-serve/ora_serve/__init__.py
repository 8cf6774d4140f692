"""``ora serve``: an OpenAI-compatible endpoint over Ora's application API (``Ora.stream``).

- ``POST /v1/chat/completions`` (JSON body or ``stream: true``), ``GET /v1/models`` (one model per
  mode, ``ora/<mode>``, and ``ora/auto`` for pre-routing);
- the failure semantics of ``docs/serve.md``: a halted turn, a configuration error or a backend
  failure is an HTTP error (or, in a stream, a ``data: {"error": ...}`` event and a close), never
  ``[DONE]``; a degraded answer carries its status, verdicts and contingencies (``ora`` object,
  ``x-ora-status``); a client that disconnects cancels its turn, and the trace says so;
- ``GET /v1/ora/turns/{trace_id}/events``: the turn's typed events as Server-Sent Events, with
  ``Last-Event-ID`` resume;
- ``GET /healthz`` (``?deep=1`` probes the backends), a bound on concurrent turns (429 and
  ``Retry-After``), a body size limit, graceful SIGTERM, access lines without prompt text.

This module stays light: uvicorn, Starlette and the engine load only when the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl


@hookimpl
def ora_register_commands(cli: Any, ora: Any) -> None:
    from .commands import register

    register(cli, ora)


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .settings import TABLE, ServeOptions

    register(ServeOptions, table=TABLE)

"""The forensic trace on disk, and the commands that read it back.

Per turn ``<trace_root>/<conversation_id>/<turn_id>/`` (the turn id starts with its UTC
timestamp) holds ``NN-<step>.json`` + ``NN-<step>.md`` per step, the append-only logs
``rag-failures.jsonl``, ``supplemental-rag.jsonl``, ``contingencies.jsonl`` and
``oversight-queue.jsonl``, ``turn.json`` and ``step-health.json``; while the turn is open, its
``.turn.lock`` (``liveness``). Beside the traces, ``<trace_root>/.ora-index.jsonl``: one line per
closed turn (``index``), which ``ora health`` and its dashboard read. ``ora trace view`` and ``ora
health --html`` render HTML pages from the files (``views``).

Options, in ``[plugins.trace-fs]`` of ``ora.toml``: ``fsync`` (default true: every file is
flushed to the disk before the turn returns) and ``close_timeout_s`` (default 30: how long a
closing turn waits for the writer thread to let go of the disk; past it the turn returns with
its tracing marked degraded, and the writer thread writes the turn's files when it can), declared
as ``ora_trace_fs.options.TraceFsOptions``: an unknown key or a wrong type is refused before a turn.
``[trace] durability`` (the kernel's setting) says when a turn's files are committed: ``"turn"``
before the turn returns, ``"async"`` by the writer thread after it returns, finished turns in
groups behind one barrier (see ``sink``; a crash loses at most the last group).

This module stays light: the sink and the commands import their modules when used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl


@hookimpl
def ora_register_trace_sinks(register: Callable[..., None]) -> None:
    from .sink import TraceFsSink

    register(TraceFsSink())


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .options import TABLE, TraceFsOptions

    register(TraceFsOptions, table=TABLE)


@hookimpl
def ora_register_commands(cli: Any, ora: Any) -> None:
    from .commands import register

    register(cli, ora)

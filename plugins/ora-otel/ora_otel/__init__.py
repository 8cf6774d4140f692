"""OpenTelemetry GenAI export of Ora's turns (off unless ``[plugins.otel]`` turns it on).

- the ``otel`` trace sink: each turn as a span tree (``invoke_workflow ora`` > steps > ``chat`` model
  calls and ``retrieval`` spans) following the GenAI semantic conventions, verdicts as
  ``gen_ai.evaluation.result`` events, contingencies as span events; sent over OTLP/HTTP by a batch
  span processor off the pipeline's thread. A failed export is a named contingency of the turn (or,
  once the turn has returned, a line on stderr), recorded for replay: never a broken turn.
- ``ora trace export --otlp URL [TURNS]``: the same spans rebuilt from the turns on disk.
- ``ora trace otel [--check]``: is the export on, and does the collector take it.

Options in ``[plugins.otel]`` (``ora_otel.options.OtelOptions``); ``docs/otel.md`` has the span tree,
every attribute and the failure behaviour. This module stays light: the OpenTelemetry SDK is imported
only when the export is on, or a command needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ora_core import hookimpl


@hookimpl
def ora_register_trace_sinks(register: Callable[..., None]) -> None:
    from .sink import OtelSink

    register(OtelSink())


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .options import TABLE, OtelOptions

    register(OtelOptions, table=TABLE)


@hookimpl
def ora_register_commands(cli: Any, ora: Any) -> None:
    from .commands import register

    register(cli, ora)

"""Re-send one recorded model call (``ora trace replay``): how a user checks whether a fix to a
prompt, a model or a server changed what a failing call does.

The recorded call (a ``model_call`` record of a step file: ``ModelCallRecord`` with its messages and
parameters) is sent again, message for message, to a configured backend: the one the configuration
now names for the call's role, or the one asked for. The parameters that shape the reply (``max_tokens``,
``temperature``, ``stop``, ``stop_unless``, a response schema) are the recorded ones; the model id is the
target backend's. Nothing is traced (it is not a turn); the answer, or the typed error, is returned
beside the recorded output.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ora_core.engine.backends import BackendPool, complete_once
from ora_core.kernel.errors import BackendError, UsageError
from ora_core.kernel.models import CompletionParams, Message, ModelCallRecord

#: Recorded parameters that shape the reply and are sent again; the rest (the model id, the timeout)
#: are the target backend's.
REPLAYED_PARAMS = ("max_tokens", "temperature", "stop", "stop_unless", "response_schema", "schema_name", "extra")


class ReplayResult(BaseModel):
    """A recorded call and what the same messages get now."""

    model_config = ConfigDict(extra="forbid")

    step: str
    step_call: int
    call: int
    why: str
    recorded_backend: str
    recorded_model: str
    recorded_output: str | None
    recorded_finish_reason: str
    recorded_error: dict[str, str] | None = None
    backend: str
    model: str
    output: str | None = None
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: dict[str, str] | None = None

    @property
    def changed(self) -> bool:
        return (self.output or "") != (self.recorded_output or "") or bool(self.error) != bool(self.recorded_error)


def recorded_call(record: dict[str, Any] | ModelCallRecord) -> ModelCallRecord:
    """A step file's call record as a ``ModelCallRecord`` (its messages and parameters included); a
    record without messages (written before calls were kept verbatim) is a ``UsageError``."""
    if isinstance(record, ModelCallRecord):
        return record
    fields = {k: v for k, v in record.items() if k in ModelCallRecord.model_fields}
    try:
        call = ModelCallRecord.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"the recorded call cannot be read: {first['loc']}: {first['msg']}") from None
    if not call.messages:
        raise UsageError(f"call {call.step_call} of step {call.step!r} has no recorded messages (the trace predates "
                         "verbatim call records): there is nothing to re-send")
    return call


def target_backend(config: Any, call: ModelCallRecord, backend: str | None) -> str:
    """``backend``, else the backend the configuration names for the call's role, else the recorded one;
    a name the configuration does not hold is a ``UsageError`` listing the configured backends."""
    name = backend or getattr(config.roles, call.role, None) or call.backend
    if name not in config.backends:
        known = ", ".join(sorted(config.backends)) or "none"
        why = "--backend" if backend else f"the recorded backend of role {call.role!r}"
        raise UsageError(f"backend {name!r} ({why}) is not configured (configured backends: {known})")
    return name


async def replay_call(pool: BackendPool, record: dict[str, Any] | ModelCallRecord,
                      backend: str | None = None) -> ReplayResult:
    """Send ``record``'s messages again to ``backend`` (default: ``target_backend``); a backend failure
    is returned as the result's ``error`` (typed, described), never raised."""
    call = recorded_call(record)
    name = target_backend(pool.config, call, backend)
    settings = pool.settings(name)
    shaped = {k: v for k, v in call.params.items() if k in REPLAYED_PARAMS and k in CompletionParams.model_fields}
    params = pool.params_for(name, **shaped)
    messages = [m if isinstance(m, Message) else Message.model_validate(m) for m in call.messages]
    base = dict(step=call.step, step_call=call.step_call, call=call.call, why=call.why,
                recorded_backend=call.backend, recorded_model=call.effective_model, recorded_output=call.output,
                recorded_finish_reason=call.finish_reason, recorded_error=call.error, backend=name)
    start = time.perf_counter()
    try:
        completion = await complete_once(pool, name, settings, messages, params)
    except BackendError as exc:
        partial = getattr(exc, "partial_output", "") or None
        return ReplayResult(**base, model=settings.model, output=partial, finish_reason="error", error=exc.describe(),
                            latency_s=time.perf_counter() - start)
    finally:
        await pool.aclose()
    return ReplayResult(**base, model=completion.model or settings.model, output=completion.text,
                        finish_reason=completion.finish_reason, prompt_tokens=completion.prompt_tokens,
                        completion_tokens=completion.completion_tokens,
                        latency_s=completion.latency_s or (time.perf_counter() - start))

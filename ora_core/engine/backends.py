"""Resolving roles to backends and calling them: the role ledger, the fallback chain and the
tokens-per-minute guard.

Every model call goes through ``call_role``: it refuses messages that lack the universal
anti-confabulation directive, records ``{role, promptKey, plannedProvider, plannedModel,
effectiveProvider, effectiveModel, fallbackFlags, tokens, latency}`` in the turn, and walks the
role's fallback chain (the planned backend's ``fallbacks``, followed transitively, each backend
once) when a backend fails or is over its tokens-per-minute budget, flagging what ran instead.
A failure of the whole chain raises the last ``BackendError``: it never becomes text. Each
``BackendError`` has the turn's secrets replaced in its message and detail (``BackendError.redact``
with ``turn.redactor``) before it is recorded, named in a contingency or raised: a key a server
echoes back reaches neither the ledger nor an exception.

What a plugin does wrong is a ``BackendError`` too: a backend that raises something else, returns
something that is not a ``Completion``, or outlives its deadline is recorded by name and the
chain goes on.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import IO, Any

from pydantic import BaseModel

from ora_core.engine.prompts import carries_directive
from ora_core.kernel.components import ComponentContext, ComponentRegistry
from ora_core.kernel.config import BackendConfig, OraConfig
from ora_core.kernel.errors import (
    BackendBadResponse,
    BackendError,
    BackendRateLimited,
    BackendTimeout,
    ConfigError,
    PluginError,
)
from ora_core.kernel.models import Completion, CompletionParams, Message, ModelCallRecord, assembled
from ora_core.kernel.providers import distribution_status, missing_hint
from ora_core.kernel.stash import StashKey
from ora_core.kernel.trace import TurnContext
from ora_core.kits.deadlines import deadline as _deadline

#: Tokens per message the chat formats add around the content (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4
#: Added to a backend's own worst case (``timeout_s`` per attempt, ``max_retries`` retries)
#: before the kernel gives up on a call that never returns.
DEADLINE_GRACE_S = 30.0
TPM_WINDOW_S = 60.0
_new_object = object.__new__
_set_attribute = object.__setattr__


def _built_record(fields: dict[str, Any]) -> ModelCallRecord:
    """A ``ModelCallRecord`` from parts already typed, every field given in field order: what
    validating them would build, without that cost on every model call (``_success_record``
    checks the types first). ``tests/test_backends_call_path.py`` pins it equal to the validated record."""
    return assembled(ModelCallRecord, fields)


def _success_record(role: str, prompt_key: str, planned_name: str, planned: BackendConfig, name: str,
                    settings: BackendConfig, flags: list[str], latency_s: float, completion: Completion, why: str,
                    messages: list[Message], params: dict[str, Any]) -> ModelCallRecord:
    """The record of a call that answered: the ledger entry and the call verbatim. Built without a
    validation pass when every part already has its field's type (a validated ``Completion``, the
    validated configuration); anything unusual (a plugin that bent its ``Completion`` after
    validation) takes the validating path and fails there by name, as it always did."""
    c = completion
    fields = {"role": role, "prompt_key": prompt_key, "planned_provider": planned.type,
              "planned_model": planned.model, "effective_provider": c.provider, "effective_model": c.model,
              "fallback_flags": flags, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
              "latency_s": latency_s, "error": None, "attempts": c.attempts, "cached": c.cached,
              "call": 0, "step": "", "step_call": 0, "planned_backend": planned_name, "backend": name,
              "family": settings.family, "why": why, "finish_reason": c.finish_reason, "messages": messages,
              "params": params, "output": c.text}
    if (type(role) is str and type(prompt_key) is str and type(c.provider) is str and type(c.model) is str
            and type(planned.type) is str and type(planned.model) is str and type(c.prompt_tokens) is int
            and type(c.completion_tokens) is int and type(latency_s) is float and type(c.attempts) is int
            and c.attempts >= 1 and type(c.cached) is bool and all(type(f) is str for f in flags)
            and type(why) is str and type(c.finish_reason) is str and type(c.text) is str
            and type(settings.family) is str and all(type(m) is Message for m in messages)):
        return _built_record(fields)
    return ModelCallRecord(**fields)


def _failure_record(role: str, prompt_key: str, planned_name: str, planned: BackendConfig, name: str,
                    settings: BackendConfig, flags: list[str], why: str, messages: list[Message],
                    params: dict[str, Any], error: BackendError, latency_s: float = 0.0) -> ModelCallRecord:
    """The record of a call that failed (or was never sent: the tokens-per-minute guard): the
    error, and the partial output the backend had received when it failed, if any."""
    partial = getattr(error, "partial_output", "") or None
    return ModelCallRecord(role=role, prompt_key=prompt_key, planned_provider=planned.type,
                           planned_model=planned.model, fallback_flags=flags, latency_s=latency_s,
                           effective_provider=settings.type, effective_model=settings.model,
                           error=error.describe(), attempts=max(1, int(getattr(error, "attempts", 1) or 1)),
                           planned_backend=planned_name, backend=name, family=settings.family, why=why,
                           finish_reason="error", messages=messages, params=params,
                           output=partial if isinstance(partial, str) else None)


def params_record(params: CompletionParams) -> dict[str, Any]:
    """``params`` as the call record keeps them (JSON-native): what ``model_dump(mode="json")``
    gives, built from the fields without a serialisation pass."""
    data = dict(params.__dict__)
    data["stop"] = list(data["stop"])
    data["extra"] = dict(data["extra"])
    for key, value in data.items():
        if isinstance(value, BaseModel):
            data[key] = value.model_dump(mode="json")
    return data


def _shallow_copy(model: Any) -> Any:
    """``model.model_copy()`` (a shallow copy: same values, same fields set) at a third of its cost."""
    copy = _new_object(type(model))
    _set_attribute(copy, "__dict__", dict(model.__dict__))
    _set_attribute(copy, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    extra, private = model.__pydantic_extra__, model.__pydantic_private__
    _set_attribute(copy, "__pydantic_extra__", None if extra is None else dict(extra))
    _set_attribute(copy, "__pydantic_private__", None if private is None else dict(private))
    return copy


def estimate_tokens(messages: Sequence[Message], max_tokens: int = 0) -> int:
    """A tokenizer-free estimate of one call's cost: prompt chars/4 plus the reply budget.

    Deliberately conservative (it counts ``max_tokens`` in full): the guard must act before a
    provider's own limit does, and it runs before any tokenizer could be loaded.
    """
    prompt = sum(len(m.content) for m in messages) // 4 + MESSAGE_OVERHEAD_TOKENS * len(messages)
    return prompt + max_tokens


class TokenBudget:
    """A sliding one-minute window of tokens spent per backend name (thread-safe).

    A running total per backend keeps every call O(1) amortised: summing the window on each
    call cost O(calls per minute), which a busy endpoint turns into real CPU.
    """

    def __init__(self, window_s: float = TPM_WINDOW_S, clock: Any = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._spent: dict[str, deque[list[Any]]] = {}
        self._totals: dict[str, float] = {}
        self._lock = threading.Lock()

    def _prune(self, name: str, now: float) -> deque[list[Any]]:
        entries = self._spent.setdefault(name, deque())
        total = self._totals.get(name, 0.0)
        while entries and now - entries[0][0] >= self.window_s:
            gone = entries.popleft()
            gone[3] = False  # out of the window: a late settle must not touch the total
            total -= gone[1]
        self._totals[name] = total if entries else 0.0  # no drift once the window empties
        return entries

    def used(self, name: str) -> int:
        with self._lock:
            self._prune(name, self.clock())
            return int(self._totals[name])

    def try_reserve(self, name: str, tokens: int, limit: int | None) -> tuple[list[Any] | None, int]:
        """Reserve ``tokens`` for ``name`` if that keeps it within ``limit`` per window.

        Returns ``(reservation, used_before)``; the reservation is None when over budget.
        """
        with self._lock:
            now = self.clock()
            entries = self._prune(name, now)
            used = int(self._totals[name])
            if limit is not None and used + tokens > limit:
                return None, used
            entry: list[Any] = [now, float(tokens), name, True]  # at, tokens, backend, in window
            entries.append(entry)
            self._totals[name] += float(tokens)
            return entry, used

    def settle(self, reservation: list[Any] | None, actual: int) -> None:
        """Replace an estimate by what the provider reported (when it reported anything)."""
        if reservation is not None and actual > 0:
            with self._lock:
                if reservation[3]:
                    self._totals[reservation[2]] += float(actual) - reservation[1]
                reservation[1] = float(actual)

    def seconds_until_free(self, name: str, tokens: int, limit: int) -> float:
        """How long until a call of ``tokens`` fits (the window length if it never will)."""
        with self._lock:
            now = self.clock()
            entries = self._prune(name, now)
            total = self._totals[name]
            if total + tokens <= limit:
                return 0.0
            for at, spent, _name, _live in entries:
                total -= spent
                if total + tokens <= limit:
                    return max(0.0, at + self.window_s - now)
            return self.window_s


class BackendPool:
    """Builds configured backends lazily (heavy models load on first use) and caches them.

    ``aclose`` (the runner calls it at the end of every turn) closes what is idle and defers
    closing a backend that another concurrent turn is still calling until that call ends. A
    backend stays usable after ``aclose``: it reopens its connections on its next call (the next
    turn may run on a new event loop). The token budget lives here, so it spans turns.
    """

    def __init__(self, config: OraConfig, host: ComponentRegistry, *, stderr: IO[str] | None = None) -> None:
        self.config = config
        self.host = host
        self.stderr = stderr
        self.budget = TokenBudget()
        self._built: dict[str, Any] = {}
        self._inflight: dict[int, int] = {}
        self._close_when_idle: dict[int, tuple[str, Any]] = {}
        self._params: dict[str, tuple[BackendConfig, CompletionParams]] = {}
        #: Close failures no trace has heard of yet (a close deferred to the end of another turn's
        #: call, or an ``aclose`` without a recorder): the next ``aclose(recorder)`` records them.
        self.close_failures: list[tuple[str, str]] = []

    def settings(self, name: str) -> BackendConfig:
        try:
            return self.config.backends[name]
        except KeyError:
            raise ConfigError(f"backend {name!r} is not configured", field=f"backends.{name}") from None

    def get(self, name: str) -> Any:
        if name not in self._built:
            settings = self.settings(name)
            try:
                factory = self.host.get("backend", settings.type)
            except PluginError as exc:
                hint = missing_hint("backend", settings.type, plugin_status=distribution_status(self.host))
                raise ConfigError(
                    f"backend {name!r} has type {settings.type!r}, but no installed plugin registers "
                    f"that backend type ({exc}); {hint}", field=f"backends.{name}.type") from None
            self._built[name] = factory.create(settings)
        return self._built[name]

    def planned(self, role: str) -> tuple[str, BackendConfig]:
        name = getattr(self.config.roles, role)
        return name, self.settings(name)

    def chain(self, name: str) -> list[str]:
        """``name`` then its fallbacks, depth first, each backend once (cycles are cut)."""
        order: list[str] = []
        pending = [name]
        while pending:
            current = pending.pop(0)
            if current in order:
                continue
            order.append(current)
            pending = [fb for fb in self.settings(current).fallbacks if fb not in order] + pending
        return order

    def params_for(self, name: str, **overrides: Any) -> CompletionParams:
        s = self.settings(name)
        values: dict[str, Any] = {"model": s.model, "max_tokens": s.max_tokens,
                                  "temperature": s.temperature, "timeout_s": s.timeout_s}
        if not overrides:  # the usual call: one validated CompletionParams per backend, reused
            cached = self._params.get(name)
            if cached is None or cached[0] is not s:
                cached = self._params[name] = (s, CompletionParams(**values))
            return _shallow_copy(cached[1])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return CompletionParams(**values)

    def deadline_s(self, name: str) -> float:
        """How long the kernel waits for one call before declaring it hung."""
        s = self.settings(name)
        return s.timeout_s * (s.max_retries + 1) + DEADLINE_GRACE_S

    @asynccontextmanager
    async def lease(self, name: str) -> AsyncIterator[Any]:
        """The backend for ``name``, counted as busy until the block ends."""
        backend = self.acquire(name)
        try:
            yield backend
        finally:
            pending = self.release(backend)
            if pending is not None:
                await self._close(*pending)

    def acquire(self, name: str) -> Any:
        """The backend for ``name``, counted as busy until ``release``: ``lease`` without its
        context manager, for the per-call path (``complete_once``)."""
        backend = self.get(name)
        key = id(backend)
        self._inflight[key] = self._inflight.get(key, 0) + 1
        return backend

    def release(self, backend: Any) -> tuple[str, Any] | None:
        """One call of ``backend`` ended; returns ``(name, backend)`` when an ``aclose`` deferred
        while it was busy is now due: the caller awaits ``_close`` on it."""
        key = id(backend)
        left = self._inflight[key] - 1
        if left:
            self._inflight[key] = left
            return None
        del self._inflight[key]
        return self._close_when_idle.pop(key, None)

    async def _close(self, name: str, backend: Any, recorder: ComponentContext | None = None) -> None:
        closer = getattr(backend, "aclose", None)
        if closer is None:
            return
        try:
            await closer()
        except Exception as exc:  # noqa: BLE001 - closing must not break the turn; reported by name
            message = f"closing backend {name!r} failed: {type(exc).__name__}: {exc}"
            print(f"ora: {message}", file=getattr(recorder, "stderr", None) or self.stderr or sys.stderr)
            if recorder is not None:
                _record_close_failure(recorder, name, message)
            else:
                self.close_failures.append((name, message))

    async def aclose(self, recorder: ComponentContext | None = None) -> None:
        """Close every idle backend (a busy one when its call ends). A close that fails is said on
        stderr and, with ``recorder`` (the turn, or a ``StandaloneContext``), named as a
        ``backend-close-failed`` contingency; failures no recorder heard of yet are recorded too."""
        if recorder is not None:
            pending, self.close_failures = self.close_failures, []
            for name, message in pending:
                _record_close_failure(recorder, name, f"{message} (after an earlier call; recorded here)")
        for name, backend in list(self._built.items()):
            if self._inflight.get(id(backend)):
                self._close_when_idle[id(backend)] = (name, backend)
            else:
                await self._close(name, backend, recorder)


class RoutedPool:
    """A ``BackendPool`` as one turn's gears call it: ``planned(role)`` honours the turn's role
    overrides (the breadth slot's diversity substitution, the Gear 3 fallback's healthier endpoint,
    a judging step re-routed by the lineage rule), while every backend, fallback chain and
    tokens-per-minute budget stays the shared pool's (``shared``; ``call_role`` calls through it).
    ``overrides`` is the turn's own dict: a gear that re-routes a role later is seen at once."""

    __slots__ = ("overrides", "shared")

    def __init__(self, shared: BackendPool, overrides: dict[str, str]) -> None:
        self.shared = shared
        self.overrides = overrides

    @property
    def config(self) -> OraConfig:
        return self.shared.config

    def planned(self, role: str) -> tuple[str, BackendConfig]:
        name = self.overrides.get(role) or getattr(self.shared.config.roles, role)
        return name, self.shared.settings(name)

    def chain(self, name: str) -> list[str]:
        return self.shared.chain(name)

    def settings(self, name: str) -> BackendConfig:
        return self.shared.settings(name)

    def get(self, name: str) -> Any:
        return self.shared.get(name)


#: What ``call_role`` and the lineage routing plan a role on: the shared pool, or a turn's routed view of it.
Pool = BackendPool | RoutedPool


CLOSE_FAILED = "backend-close-failed"


def _record_close_failure(recorder: ComponentContext, name: str, message: str) -> None:
    recorder.contingency(CLOSE_FAILED, "turn", message, severity="warning", backend=name)


#: The ``(backend, warning)`` pairs of ``Completion.warnings`` this turn has named already.
WARNED: StashKey[set[tuple[str, str]]] = StashKey("backend_warnings")


def _record_warnings(turn: TurnContext, where: str, role: str, name: str, completion: Completion) -> None:
    """``Completion.warnings`` as ``<step>-backend-warning`` contingencies, each once per turn."""
    seen = turn.stash.setdefault(WARNED, set())
    for warning in completion.warnings:
        if (name, warning) in seen:
            continue
        seen.add((name, warning))
        turn.contingency(f"{where}-backend-warning", where, warning, severity="warning", role=role, backend=name,
                         provider=completion.provider, model=completion.model)


def _plugin_fault(name: str, settings: BackendConfig, exc: BaseException) -> BackendError:
    """A plugin raised something other than a BackendError: name it and treat it as one."""
    stack = "".join(traceback.format_exception(exc))[-2000:]
    return BackendError(f"backend {name!r} raised {type(exc).__name__}: {exc}", provider=settings.type,
                        model=settings.model, detail=stack)


async def complete_once(pool: BackendPool, name: str, settings: BackendConfig, messages: list[Message],
                    params: CompletionParams) -> Completion:
    """One call to one backend; every way it can go wrong comes out as a ``BackendError``."""
    deadline = pool.deadline_s(name)
    try:
        backend = pool.acquire(name)
        try:
            async with _deadline(deadline):  # asyncio.timeout's contract, without a timer per call
                completion = await backend.complete(messages, params)
        finally:
            pending = pool.release(backend)
            if pending is not None:
                await pool._close(*pending)
    except BackendError:
        raise
    except TimeoutError as exc:
        raise BackendTimeout(f"backend {name!r} did not return within the kernel deadline of {deadline:.1f}s",
                             provider=settings.type, model=settings.model,
                             detail=f"timeout_s={settings.timeout_s} max_retries={settings.max_retries}"
                             ) from exc
    except (ConfigError, PluginError):
        raise
    except Exception as exc:  # noqa: BLE001 - converted into a typed, recorded BackendError
        raise _plugin_fault(name, settings, exc) from exc
    if not isinstance(completion, Completion):
        raise BackendBadResponse(
            f"backend {name!r} returned {type(completion).__name__}, not a Completion",
            provider=settings.type, model=settings.model, detail=repr(completion)[:2000])
    return completion


async def call_role(turn: TurnContext, routed: Pool, role: str, messages: Sequence[Message], *,
                    prompt_key: str, step: str = "", max_tokens_cap: int | None = None, why: str = "",
                    **param_overrides: Any) -> Completion:
    """Call the backend planned for ``role``, falling back along its chain; record every call.

    ``max_tokens_cap`` lowers (never raises) each backend's configured ``max_tokens`` for this
    call: a step whose reply has a known size (Phase A echoes the prompt) need not pay for more.
    ``why`` says why the call is made (``ModelCallRecord.why``; default: the prompt key). Every
    backend tried is recorded (``turn.record_call``) with the messages sent, the parameters, the
    raw output (or the partial output of a failure) and the backend that ran it. ``routed``: the
    shared ``BackendPool``, or a turn's ``RoutedPool`` view of it (the role is planned by its
    overrides; the backends are the shared pool's).
    """
    pool = routed.shared if isinstance(routed, RoutedPool) else routed
    if not carries_directive(messages):
        raise ValueError(
            f"model call for role {role!r} ({prompt_key}) was built without the universal "
            "anti-confabulation directive; build messages with ora_core.engine.prompts.build_messages")
    planned_name, planned = routed.planned(role)
    chain = pool.chain(planned_name)
    where = step or role
    why = why or prompt_key
    sent = list(messages)
    redactor = getattr(turn, "redactor", None)
    flags: list[str] = []
    last_error: BackendError | None = None
    for position, name in enumerate(chain):
        settings = pool.settings(name)
        following = chain[position + 1] if position + 1 < len(chain) else None
        params = pool.params_for(name, **param_overrides)
        if max_tokens_cap is not None and max_tokens_cap < params.max_tokens:
            params = params.model_copy(update={"max_tokens": max(1, max_tokens_cap)})
        estimate = estimate_tokens(messages, params.max_tokens)
        reservation, used = pool.budget.try_reserve(name, estimate, settings.tokens_per_minute)
        if reservation is None:
            limit = settings.tokens_per_minute or 0
            detail = (f"{name} has used {used} of {limit} tokens this minute and this call needs "
                      f"~{estimate}")
            if following is not None:
                flags.append(f"tpm:{name}->{following}")
                turn.contingency(f"{where}-backend-tpm-fallback", where, f"{detail}; falling back to {following}",
                                 severity="degraded", role=role, backend=name, used=used, limit=limit,
                                 estimate=estimate)
                continue
            last_error = BackendRateLimited(
                f"tokens-per-minute budget of backend {name!r} exhausted and no fallback is left",
                provider=settings.type, model=settings.model, detail=detail,
                retry_after=pool.budget.seconds_until_free(name, estimate, limit))
            turn.record_call(_failure_record(role, prompt_key, planned_name, planned, name, settings,
                                             [*flags, f"tpm:{name}->none"], f"{why} (not sent: over its "
                                             "tokens-per-minute budget)", sent, params_record(params),
                                             last_error), step=step)
            break
        start = time.perf_counter()
        try:
            completion = await complete_once(pool, name, settings, sent, params)
        except BackendError as exc:
            if redactor is not None:
                exc.redact(redactor)
            turn.record_call(_failure_record(role, prompt_key, planned_name, planned, name, settings, list(flags),
                                             why, sent, params_record(params), exc, time.perf_counter() - start),
                             step=step)
            last_error = exc
            if following is not None:
                flags.append(f"fallback:{name}->{following}:{exc.kind}")
                turn.contingency(f"{where}-backend-{exc.kind}-fallback", where,
                                 f"{name} failed ({exc}); falling back to {following}",
                                 severity="degraded", role=role, backend=name)
            continue
        pool.budget.settle(reservation, completion.prompt_tokens + completion.completion_tokens)
        record = _success_record(role, prompt_key, planned_name, planned, name, settings, list(flags),
                                 completion.latency_s or (time.perf_counter() - start), completion, why, sent,
                                 params_record(params))
        turn.record_call(record, step=step)
        if completion.warnings:
            _record_warnings(turn, where, role, name, completion)
        return completion
    assert last_error is not None
    raise last_error

"""The kernel's role calls: the fallback chain, the role ledger, and plugins that misbehave.

A backend failure never becomes text: whatever a plugin does wrong (raises something else,
returns a string, never returns) comes out as a typed, recorded ``BackendError``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ora_scripted
import pytest

from ora_core import hookimpl
from ora_core.engine import backends as kernel_backends
from ora_core.engine.backends import BackendPool, call_role
from ora_core.engine.prompts import build_messages
from ora_core.kernel.errors import BackendBadResponse, BackendError, BackendTimeout, BackendUnavailable
from ora_core.kernel.models import Completion, ModelCallRecord, TurnResult
from ora_core.kernel.trace import TurnContext
from ora_core.testing import make_config, make_host

MESSAGES = build_messages("Answer.", "Question?")


class Misbehaving:
    """Backends that break the contract in the ways a careless plugin would."""

    class _Factory:
        def __init__(self, name: str, behaviour: Any) -> None:
            self.name = name
            self.behaviour = behaviour

        def create(self, settings: Any) -> Any:
            behaviour = self.behaviour

            class _Backend:
                provider, model, family = self.name, settings.model, "test"

                async def complete(self, messages: Any, params: Any) -> Any:
                    return await behaviour(params)

            return _Backend()

    @hookimpl
    def ora_register_backends(self, register: Any) -> None:
        async def raises(params: Any) -> Any:
            return {}["missing"]

        async def returns_text(params: Any) -> Any:
            return "Error: session expired, please log in again"

        async def hangs(params: Any) -> Any:
            await asyncio.sleep(3600)

        register(self._Factory("raises", raises))
        register(self._Factory("returns-text", returns_text))
        register(self._Factory("hangs", hangs))


def scripted(reply: str, model: str = "scripted-1", **more: Any) -> dict[str, Any]:
    return {"type": "scripted", "model": model, "options": {"default": reply}, **more}


def run_role(backends: dict[str, Any], role: str = "analyst") -> tuple[TurnContext, Any]:
    resolved = make_config({"backends": backends}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_scripted, Misbehaving()))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> Any:
        try:
            return await call_role(turn, pool, role, MESSAGES, prompt_key="test.key", step="step-x")
        except BackendError as exc:
            return exc
        finally:
            await pool.aclose()

    return turn, asyncio.run(go())


def test_the_chain_is_followed_transitively_each_backend_once() -> None:
    turn, outcome = run_role({
        "local": scripted("!error:unavailable", fallbacks=["b"]),
        "b": scripted("!error:timeout", model="b-model", fallbacks=["c", "local"]),
        "c": scripted("from c", model="c-model", fallbacks=["b"]),
    })
    assert isinstance(outcome, Completion) and outcome.text == "from c"
    assert [(c.effective_model, c.error["kind"] if c.error else None) for c in turn.calls] == [
        ("scripted-1", "unavailable"), ("b-model", "timeout"), ("c-model", None)]
    assert turn.calls[-1].fallback_flags == ["fallback:local->b:unavailable", "fallback:b->c:timeout"]
    assert [c.name for c in turn.contingencies] == ["step-x-backend-unavailable-fallback",
                                                    "step-x-backend-timeout-fallback"]


def test_a_failed_chain_raises_the_last_typed_error_and_records_every_attempt() -> None:
    turn, outcome = run_role({"local": scripted("!error:unavailable", fallbacks=["b"]),
                              "b": scripted("!error:auth", model="b-model")})
    assert isinstance(outcome, BackendError) and outcome.kind == "auth"
    assert [c.error["kind"] for c in turn.calls] == ["unavailable", "auth"]


def test_a_plugin_that_raises_something_else_is_a_recorded_backend_error_and_the_chain_goes_on() -> None:
    turn, outcome = run_role({"local": {"type": "raises", "model": "m", "fallbacks": ["b"]},
                              "b": scripted("fine", model="b-model")})
    assert outcome.text == "fine"
    error = turn.calls[0].error
    assert error["error_class"] == "BackendError" and "raised KeyError" in error["message"]
    assert "Traceback" in error["detail"]


def test_a_plugin_that_returns_error_text_never_has_it_taken_as_an_answer() -> None:
    turn, outcome = run_role({"local": {"type": "returns-text", "model": "m"}})
    assert isinstance(outcome, BackendBadResponse)
    assert "returned str, not a Completion" in str(outcome) and "session expired" in outcome.detail
    assert turn.calls[0].error["kind"] == "bad_response"


def test_a_plugin_that_never_returns_meets_the_kernel_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_backends, "DEADLINE_GRACE_S", 0.2)
    turn, outcome = run_role({"local": {"type": "hangs", "model": "m", "timeout_s": 0.1, "max_retries": 1,
                                        "fallbacks": ["b"]},
                              "b": scripted("after the hang", model="b-model")})
    assert outcome.text == "after the hang"
    assert turn.calls[0].error["error_class"] == BackendTimeout.__name__
    assert "kernel deadline of 0.4s" in turn.calls[0].error["message"]


def test_an_unknown_backend_type_is_a_configuration_error_not_a_fallback() -> None:
    from ora_core.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match="no installed plugin registers"):
        run_role({"local": {"type": "nope", "model": "m", "fallbacks": ["b"]}, "b": scripted("x")})


def test_the_turn_result_carries_a_mismatch_flag_per_call_and_overall() -> None:
    turn, outcome = run_role({"local": scripted("!error:unavailable", fallbacks=["b"]),
                              "b": scripted("ok", model="b-model")})
    result = turn.finalize(TurnResult(status="ok", answer=outcome.text))
    dumped = result.model_dump(mode="json")
    assert [c["mismatch"] for c in dumped["runtime_role_models"]] == [False, True]
    assert dumped["runtime_role_models_mismatch"] is True
    assert TurnResult.model_validate_json(result.model_dump_json()) == result
    clean = TurnResult(status="ok", runtime_role_models=[ModelCallRecord(
        role="a", prompt_key="k", planned_provider="p", planned_model="m", effective_provider="p",
        effective_model="m")])
    assert clean.model_dump()["runtime_role_models_mismatch"] is False


def test_aclose_waits_for_calls_in_flight_and_the_backend_stays_usable() -> None:
    closed: list[str] = []

    class Closing(ora_scripted.ScriptedBackend):
        async def aclose(self) -> None:
            closed.append("closed")

    class Factory:
        name = "closing"

        def create(self, settings: Any) -> Any:
            return Closing(model=settings.model, default="done", latency_s=0.2)

    class Plugin:
        @hookimpl
        def ora_register_backends(self, register: Any) -> None:
            register(Factory())

    resolved = make_config({"backends": {"local": {"type": "closing", "model": "m"}}}, base_default=False)
    pool = BackendPool(resolved.config, make_host(Plugin()))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> None:
        call = asyncio.create_task(call_role(turn, pool, "direct", MESSAGES, prompt_key="k"))
        await asyncio.sleep(0.05)
        await pool.aclose()  # another turn ended while this call is still running
        assert closed == [], "a backend in use is not closed under a running call"
        assert (await call).text == "done"
        assert closed == ["closed"]
        assert (await call_role(turn, pool, "direct", MESSAGES, prompt_key="k")).text == "done"

    asyncio.run(go())


def test_backend_unavailable_is_a_backend_error() -> None:
    assert issubclass(BackendUnavailable, BackendError)

"""The tokens-per-minute guard: estimated before the call; over budget, the configured
fallback runs instead and the ledger says so; with no fallback left, a typed rate limit."""

from __future__ import annotations

import asyncio
from typing import Any

import ora_scripted

from ora_core.engine.backends import BackendPool, TokenBudget, call_role, estimate_tokens
from ora_core.engine.prompts import build_messages
from ora_core.kernel.errors import BackendRateLimited
from ora_core.kernel.models import Message
from ora_core.kernel.trace import TurnContext
from ora_core.testing import make_config, make_host

MESSAGES = build_messages("Answer.", "Question? " * 40)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_estimate_counts_the_prompt_and_the_whole_reply_budget() -> None:
    messages = [Message(role="system", content="x" * 400), Message(role="user", content="y" * 40)]
    assert estimate_tokens(messages, 0) == 110 + 8
    assert estimate_tokens(messages, 256) == 110 + 8 + 256


def test_the_window_slides_and_settles_to_reported_usage() -> None:
    clock = Clock()
    budget = TokenBudget(clock=clock)
    first, used = budget.try_reserve("a", 600, 1000)
    assert first is not None and used == 0
    assert budget.try_reserve("a", 600, 1000) == (None, 600)
    budget.settle(first, 300)  # the provider reported fewer tokens than estimated
    second, used = budget.try_reserve("a", 600, 1000)
    assert second is not None and used == 300
    assert budget.try_reserve("a", 200, 1000)[0] is None
    assert budget.seconds_until_free("a", 200, 1000) == 60.0
    clock.now += 30
    third, _ = budget.try_reserve("b", 900, 1000)
    assert third is not None, "budgets are per backend"
    clock.now += 30.5
    assert budget.used("a") == 0 and budget.try_reserve("a", 1000, 1000)[0] is not None
    assert budget.try_reserve("c", 5000, 1000)[0] is None and budget.seconds_until_free("c", 5000, 1000) == 60.0


def test_a_settle_after_the_window_slid_past_its_call_does_not_skew_the_total() -> None:
    clock = Clock()
    budget = TokenBudget(clock=clock)
    slow, _ = budget.try_reserve("a", 500, 1000)
    clock.now += 61  # the call took longer than the window
    fresh, used = budget.try_reserve("a", 400, 1000)
    assert used == 0 and fresh is not None
    budget.settle(slow, 900)  # the slow call's usage arrives now: it is outside the window
    assert budget.used("a") == 400
    budget.settle(fresh, 100)
    assert budget.used("a") == 100
    for _ in range(1000):  # many reservations: the running total equals the window's sum
        budget.try_reserve("a", 1, None)
    clock.now += 30
    budget.try_reserve("a", 7, None)
    assert budget.used("a") == 100 + 1000 + 7
    clock.now += 31
    assert budget.used("a") == 7


def run_calls(backends: dict[str, Any], n: int) -> tuple[TurnContext, list[Any]]:
    resolved = make_config({"backends": backends}, base_default=False)
    pool = BackendPool(resolved.config, make_host(ora_scripted))
    turn = TurnContext(prompt="q", config=resolved.config, config_hash=resolved.hash)

    async def go() -> list[Any]:
        out: list[Any] = []
        for _ in range(n):
            try:
                out.append(await call_role(turn, pool, "analyst", MESSAGES, prompt_key="k", step="analyst"))
            except BackendRateLimited as exc:
                out.append(exc)
        return out

    return turn, asyncio.run(go())


def test_over_budget_the_fallback_model_runs_and_is_flagged() -> None:
    need = estimate_tokens(MESSAGES, 64)
    turn, outcomes = run_calls({
        "local": {"type": "scripted", "model": "big", "max_tokens": 64, "tokens_per_minute": need + 10,
                  "fallbacks": ["small"], "options": {"default": "from big"}},
        "small": {"type": "scripted", "model": "small", "max_tokens": 64, "options": {"default": "from small"}},
    }, 2)
    assert [o.text for o in outcomes] == ["from big", "from small"]
    first, second = turn.calls
    assert first.fallback_flags == [] and not first.mismatch
    assert second.fallback_flags == ["tpm:local->small"] and second.effective_model == "small" and second.mismatch
    [contingency] = turn.contingencies
    assert contingency.name == "analyst-backend-tpm-fallback" and contingency.data["limit"] == need + 10


def test_over_budget_with_no_fallback_left_is_a_typed_rate_limit_on_the_ledger() -> None:
    need = estimate_tokens(MESSAGES, 64)
    turn, outcomes = run_calls({"local": {"type": "scripted", "model": "big", "max_tokens": 64,
                                          "tokens_per_minute": need, "options": {"default": "ok"}}}, 2)
    assert outcomes[0].text == "ok" and isinstance(outcomes[1], BackendRateLimited)
    assert 0 < outcomes[1].retry_after <= 60
    refused = turn.calls[1]
    assert refused.fallback_flags == ["tpm:local->none"] and refused.error["kind"] == "rate_limited"


def test_no_limit_means_no_guard() -> None:
    turn, outcomes = run_calls({"local": {"type": "scripted", "model": "m", "options": {"default": "ok"}}}, 5)
    assert all(o.text == "ok" for o in outcomes) and not turn.contingencies

"""The kernel's trace API: typed events reach every sink; a failing sink is isolated."""

from __future__ import annotations

import io
from typing import Any

import pytest

from ora_core.kernel.models import TraceEvent, TurnResult
from ora_core.kernel.trace import StandaloneContext, TurnContext, sanitize_id
from ora_core.testing import make_config


class ListSink:
    def __init__(self, name: str = "list") -> None:
        self.name = name
        self.events: list[TraceEvent] = []
        self.opened: list[str] = []
        self.closed: list[str] = []

    def open_turn(self, turn: Any, ctx: Any) -> None:
        self.opened.append(turn.turn_id)

    def handle(self, event: TraceEvent) -> None:
        self.events.append(event)

    def close_turn(self, turn: Any) -> dict[str, Any]:
        self.closed.append(turn.turn_id)
        return {"trace_path": f"/traces/{turn.turn_id}"}


class ExplodingSink(ListSink):
    def handle(self, event: TraceEvent) -> None:
        raise OSError("disk full")


def make_turn(*sinks: Any, stderr: io.StringIO | None = None, **kw: Any) -> TurnContext:
    resolved = make_config()
    return TurnContext(prompt="hello", config=resolved.config, config_hash=resolved.hash, sinks=sinks,
                       stderr=stderr or io.StringIO(), **kw)


def test_every_sink_receives_every_event_in_order_with_sequence_numbers() -> None:
    a, b = ListSink("a"), ListSink("b")
    turn = make_turn(a, b, conversation_id="c1", plugins={"scripted": "0.1.0"}).open()
    with turn.step("phase-a", prompt="hello") as step:
        step.output["cleaned"] = "Hello."
    turn.contingency("rag-down", "context", "chroma unreachable", severity="degraded")
    result = turn.close(TurnResult(status="ok", answer="hi"))
    kinds = [e.kind for e in a.events]
    assert kinds == ["turn_started", "step_started", "step_finished", "contingency", "turn_finished"]
    assert [e.seq for e in a.events] == [1, 2, 3, 4, 5]
    assert [e.model_dump() for e in a.events] == [e.model_dump() for e in b.events]
    assert a.events[0].data["plugins"] == {"scripted": "0.1.0"}
    assert a.events[2].data["output"] == {"cleaned": "Hello."}
    assert a.opened == a.closed == [turn.turn_id]
    assert result.trace_path == f"/traces/{turn.turn_id}"
    assert result.contingencies == ["rag-down"]
    assert turn.health["context"].degraded is True


def test_a_sink_that_raises_is_isolated_and_reported_once() -> None:
    stderr = io.StringIO()
    good, bad = ListSink("good"), ExplodingSink("bad")
    turn = make_turn(bad, good, stderr=stderr).open()
    for i in range(5):
        turn.emit("note", text=f"event {i}")
    result = turn.close(TurnResult(status="ok"))
    reports = [line for line in stderr.getvalue().splitlines() if "trace sink 'bad' failed" in line]
    assert len(reports) == 1
    assert "OSError: disk full" in reports[0] and "the run goes on" in reports[0]
    assert len(good.events) == 7  # turn_started, five notes, turn_finished
    assert result.tracing_degraded is True
    assert turn.sink_failures == {"bad": "handle: OSError: disk full"}
    assert good.events[-1].data["sink_failures"] == {"bad": "handle: OSError: disk full"}


def test_a_step_that_raises_is_recorded_broken_and_the_error_propagates() -> None:
    sink = ListSink()
    turn = make_turn(sink).open()
    with pytest.raises(ZeroDivisionError), turn.step("divide"):
        1 / 0  # noqa: B018
    finished = [e for e in sink.events if e.kind == "step_finished"][0]
    assert finished.data["health"]["verdict"] == "BROKEN"
    assert finished.data["output"]["error"]["error_class"] == "ZeroDivisionError"


def test_secrets_are_redacted_by_the_turn() -> None:
    turn = make_turn(secrets=["sk-abcdef123"])
    assert turn.redact("key sk-abcdef123 used") == "key [REDACTED] used"


@pytest.mark.parametrize(("raw", "safe"), [
    ("../../etc", "etc"),
    ("a/b\\c", "a-b-c"),
    ("...", "default"),
    ("conv 1: ünïcode", "conv-1-n-code"),
    ("x" * 200, "x" * 80),
])
def test_conversation_ids_become_one_safe_directory_name(raw: str, safe: str) -> None:
    assert sanitize_id(raw) == safe
    assert "/" not in sanitize_id(raw) and ".." not in sanitize_id(raw)


def test_a_standalone_context_reports_contingencies_on_stderr() -> None:
    stderr = io.StringIO()
    ctx = StandaloneContext(make_config().config, stderr=stderr)
    ctx.contingency("index-empty", "vault-search", "nothing ingested yet")
    assert [c.name for c in ctx.contingencies] == ["index-empty"]
    assert stderr.getvalue() == "ora: vault-search: index-empty (nothing ingested yet)\n"

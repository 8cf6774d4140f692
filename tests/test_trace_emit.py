"""Events built on the fast path are the events validation would build; odd ones still fail."""

from __future__ import annotations

import pydantic
import pytest

from ora_core.kernel.models import TraceEvent
from ora_core.kernel.trace import TurnContext
from ora_core.testing import RecordingSink


def _turn(sink: RecordingSink) -> TurnContext:
    return TurnContext(prompt="p", config=None, config_hash="h", sinks=[sink]).open()


def test_fast_path_event_equals_a_validated_one() -> None:
    sink = RecordingSink()
    turn = _turn(sink)
    event = turn.emit("note", step="s", step_index=3, text="hello", nested={"a": [1, 2]})
    again = TraceEvent.model_validate(event.model_dump())
    assert again == event and again.model_dump(mode="json") == event.model_dump(mode="json")
    assert [e.seq for e in sink.events] == [1, 2] and sink.events[-1] is event
    assert event.model_fields_set == set(TraceEvent.model_fields)
    assert event.model_dump_json() == again.model_dump_json()
    assert event.model_copy(update={"step": "t"}).step == "t" and event.step == "s"


def test_an_unknown_kind_is_still_a_validation_error() -> None:
    turn = _turn(RecordingSink())
    with pytest.raises(pydantic.ValidationError, match="kind"):
        turn.emit("no-such-kind")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="step_index"):
        turn.emit("note", step_index="three")  # type: ignore[arg-type]


class _BreaksOnHandle(RecordingSink):
    name = "breaks"

    def handle(self, event: TraceEvent) -> None:
        if event.kind == "step_started":
            raise OSError("disk gone")
        super().handle(event)


def test_payloads_only_a_sink_reads_are_built_only_while_one_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_core.kernel.models import StepHealth, TurnResult

    dumped: list[str] = []
    real_dump = StepHealth.model_dump

    def counting_dump(self: StepHealth, **kw: object) -> dict[str, object]:
        dumped.append(self.step)
        return real_dump(self, **kw)  # type: ignore[arg-type]  # the keywords pass through unchanged

    monkeypatch.setattr(StepHealth, "model_dump", counting_dump)
    quiet = TurnContext(prompt="p", config=None, config_hash="h").open()
    assert not quiet.listened
    with quiet.step("s"):
        pass
    quiet.close(TurnResult(status="ok", answer="a"))
    assert dumped == [] and quiet.health["s"].latency_s is not None  # the health is still kept

    sink = RecordingSink()
    heard = _turn(sink)
    assert heard.listened
    with heard.step("s"):
        pass
    heard.close(TurnResult(status="ok", answer="a"))
    assert [e.kind for e in sink.events][-2:] == ["step_finished", "turn_finished"] and dumped

    failing = _BreaksOnHandle()
    broken = _turn(failing)
    with broken.step("s"):
        pass
    assert not broken.listened and "breaks" in broken.sink_failures
    assert "step_finished" not in [e.kind for e in failing.events]

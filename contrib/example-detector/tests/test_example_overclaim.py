"""The example detector: it registers, fires on overclaims only, and fires inside a run."""

from __future__ import annotations

import ora_example_detector
import pytest

from ora_core.testing import make_host, make_runtime, run_turn, scripted_config


@pytest.fixture
def detector(ora_host, register_plugin):
    register_plugin(ora_example_detector, name="example-overclaim")
    return ora_host.get("detector", "example-overclaim")


def test_it_registers_on_the_model_output_layer(ora_host, register_plugin) -> None:
    register_plugin(ora_example_detector, name="example-overclaim")
    record = ora_host.registry["detector"]["example-overclaim"]
    assert (record.status, record.layer, record.assumes) == ("ok", "model_output", ("model_generated",))


@pytest.mark.parametrize(("text", "found"), [
    ("This is definitely the answer.", [("definitely", "weak")]),
    ("I am 100% certain, it is proven.", [("100% certain", "strong"), ("it is proven", "strong")]),
    ("Without a doubt.", [("Without a doubt", "strong")]),
    ("The results are indefinitely postponed.", []),  # word boundary: no match inside a word
    ("The guaranteedness of it", []),
    ("I cannot verify this; the evidence is thin.", []),
])
def test_it_flags_overclaims_and_nothing_else(detector, text: str, found: list[tuple[str, str]]) -> None:
    signals = detector.detect(text, None)
    assert [(s.matched, s.strength) for s in signals] == found
    for s in signals:
        assert text[s.start:s.end] == s.matched


class RecordingSink:
    """An in-process trace sink: the events of the turn, kept in memory."""

    name = "recording"

    def __init__(self) -> None:
        self.events = []

    def open_turn(self, turn, ctx) -> None: ...

    def handle(self, event) -> None:
        self.events.append(event)

    def close_turn(self, turn) -> None: ...


def test_it_fires_in_a_run(tmp_path) -> None:
    from ora_core import hookimpl

    sink = RecordingSink()

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(sink)

    import ora_scripted

    host = make_host(ora_example_detector, ora_scripted, SinkPlugin())
    resolved = scripted_config(tmp_path / "traces", default="It is definitely Tuesday, 100% certain.")
    result = run_turn(make_runtime(host, resolved), "Hello, what day is it?")
    assert result.status in {"ok", "degraded"}
    detections = [e for e in sink.events if e.kind == "detection" and e.data["layer"] == "model_output"]
    found = [s for e in detections for s in e.data["signals"] if s["detector"] == "example-overclaim"]
    assert [s["matched"] for s in found] == ["definitely", "100% certain"]

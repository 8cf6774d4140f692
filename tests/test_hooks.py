"""Every hookspec exercised through the plugin host the way a plugin would use it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import ora_scripted
import pytest
import typer
from typer.testing import CliRunner

from ora_core import hookimpl
from ora_core.cli.app import build_app
from ora_core.engine import run_turn
from ora_core.testing import make_host, make_runtime, scripted_config


class MemorySink:
    name = "memory"

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.closed = False

    def open_turn(self, turn: Any, ctx: Any) -> None:
        self.events.clear()

    def handle(self, event: Any) -> None:
        self.events.append(event)

    def close_turn(self, turn: Any) -> dict[str, Any]:
        self.closed = True
        return {"trace_path": "memory://" + turn.turn_id}


def test_ora_register_backends_supplies_the_backend_a_role_runs_on(tmp_path: Path) -> None:
    host = make_host(ora_scripted)
    assert host.registry["backend"]["scripted"].plugin == "ora_scripted"
    assert host.records["ora_scripted"].hooks == ["ora_register_backends"]
    result = run_turn(make_runtime(host, scripted_config(default="Hi there.")), "Hello")
    assert result.answer == "Hi there."
    assert [(c.role, c.effective_provider, c.effective_model) for c in result.runtime_role_models] == [
        ("direct", "scripted", "scripted-1")]


def test_ora_register_trace_sinks_receives_the_whole_turn(tmp_path: Path) -> None:
    sink = MemorySink()

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(sink)

    host = make_host(ora_scripted, SinkPlugin())
    result = run_turn(make_runtime(host, scripted_config(default="Hi.")), "Hello")
    kinds = [e.kind for e in sink.events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished"
    assert "model_call" in kinds and sink.closed
    assert result.trace_path == "memory://" + result.turn_id


def test_ora_register_modes_adds_a_mode_pack_and_refuses_a_missing_directory(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()

    class Pack:
        @hookimpl
        def ora_register_modes(self, register):
            register(pack, name="extra")
            register(tmp_path / "nowhere", name="ghost")

    host = make_host(Pack(), strict=False)
    assert host.components("mode_pack") == {"extra": pack}
    record = host.records[next(iter(host.records))]
    assert record.status == "failed"
    assert record.errors == [f"mode pack directory {str(tmp_path / 'nowhere')!r} does not exist"]


def test_ora_register_commands_adds_a_command_to_the_cli() -> None:
    class Commands:
        @hookimpl
        def ora_register_commands(self, cli):
            @cli.command("hello-plugin")
            def hello(name: str = typer.Argument("world")) -> None:
                typer.echo(f"hello {name} from a plugin")

    host = make_host(Commands())
    app = build_app()
    host.register_commands(app)
    result = CliRunner().invoke(app, ["hello-plugin", "ora"])
    assert result.exit_code == 0, result.output
    assert result.output == "hello ora from a plugin\n"


def test_a_command_hook_that_raises_is_recorded_and_the_cli_still_builds() -> None:
    class Broken:
        @hookimpl
        def ora_register_commands(self, cli):
            raise RuntimeError("typer app not what I expected")

    host = make_host(Broken(), strict=False)
    app = build_app()
    host.register_commands(app)
    record = next(iter(host.records.values()))
    assert record.status == "failed"
    assert "ora_register_commands raised RuntimeError: typer app not what I expected" in record.errors[0]
    assert CliRunner().invoke(app, ["--help"]).exit_code == 0


def test_ora_turn_started_and_ora_turn_finished_observe_the_turn() -> None:
    seen: list[tuple[str, Any]] = []

    class Observer:
        @hookimpl
        def ora_turn_started(self, turn):
            seen.append(("started", turn.prompt))

        @hookimpl
        def ora_turn_finished(self, turn, result):
            seen.append(("finished", result.answer))

    host = make_host(ora_scripted, Observer())
    run_turn(make_runtime(host, scripted_config(default="Fine.")), "How are you?")
    assert seen == [("started", "How are you?"), ("finished", "Fine.")]


def test_an_observer_that_raises_is_a_named_contingency_and_never_breaks_the_turn() -> None:
    class Failing:
        @hookimpl
        def ora_turn_finished(self, turn, result):
            raise ConnectionError("conversation index unreachable")

    stderr = io.StringIO()
    host = make_host(ora_scripted, Failing())
    runtime = make_runtime(host, scripted_config(default="Fine."), stderr=stderr)
    result = run_turn(runtime, "How are you?")
    assert result.answer == "Fine."
    name = next(iter(n for n in host.records if n != "ora_scripted"))
    assert f"plugin {name!r} failed in a turn observer: ConnectionError: conversation index unreachable" \
        in stderr.getvalue()


@pytest.mark.parametrize("hook", ["ora_register_detectors", "ora_register_verifiers",
                                  "ora_register_retrievers"])
def test_registry_hooks_may_take_no_arguments(hook: str) -> None:
    """pluggy lets an implementation take a subset of the spec's arguments."""
    calls: list[str] = []

    class Quiet:
        pass

    def impl() -> None:
        calls.append(hook)

    setattr(Quiet, hook, staticmethod(hookimpl(impl)))
    make_host(Quiet())
    assert calls == [hook]


def test_a_turn_closes_its_sinks_off_the_event_loop_so_other_turns_go_on(tmp_path: Path) -> None:
    import asyncio
    import threading

    from ora_core.engine.runner import run_turn_async

    closing, other_turn_ran = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    class SlowCloseSink(MemorySink):
        name = "slow-close"

        def close_turn(self, info: Any) -> dict[str, Any]:
            seen["thread"] = threading.current_thread()
            closing.set()
            # On the loop's thread this wait could never end: the coroutine that sets it, once it
            # sees the close begin, is scheduled on that same loop.
            seen["others_ran_meanwhile"] = other_turn_ran.wait(timeout=3)
            return super().close_turn(info)

    sink = SlowCloseSink()

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(sink)

    runtime = make_runtime(make_host(ora_scripted, SinkPlugin()), scripted_config(default="Hi."))

    async def main() -> Any:
        async def meanwhile() -> None:
            while not closing.is_set():
                await asyncio.sleep(0.005)
            other_turn_ran.set()

        result, _ = await asyncio.gather(run_turn_async(runtime, "Hello"), meanwhile())
        return result

    loop_thread = threading.current_thread()
    result = asyncio.run(main())
    assert seen["others_ran_meanwhile"] is True and seen["thread"] is not loop_thread
    assert sink.closed and result.trace_path == "memory://" + result.turn_id


def test_a_turn_whose_sinks_do_not_wait_closes_on_the_loops_thread_and_one_that_may_wait_does_not() -> None:
    import threading

    threads: dict[str, Any] = {}

    class HandOffSink(MemorySink):
        name = "hand-off"
        waits = False

        def close_waits(self, info: Any) -> bool:
            return self.waits

        def close_turn(self, info: Any) -> dict[str, Any]:
            threads[self.name] = threading.current_thread()
            return super().close_turn(info)

    class PlainSink(HandOffSink):  # no close_waits: assumed to wait
        name = "plain"
        close_waits = None  # type: ignore[assignment]

    def run_with(*sinks: Any) -> Any:
        class SinkPlugin:
            @hookimpl
            def ora_register_trace_sinks(self, register):
                for sink in sinks:
                    register(sink)

        threads.clear()
        return run_turn(make_runtime(make_host(ora_scripted, SinkPlugin()), scripted_config(default="Hi.")), "Hello")

    here = threading.current_thread()  # run_turn runs its loop on this thread
    quick = HandOffSink()
    result = run_with(quick)
    assert threads["hand-off"] is here and result.trace_path == "memory://" + result.turn_id
    quick.waits = True
    run_with(quick)
    assert threads["hand-off"] is not here and threads["hand-off"].name == "ora-turn-close"
    quick.waits = False
    run_with(quick, PlainSink())
    assert threads["hand-off"] is not here and threads["plain"] is not here


def test_a_sink_whose_close_waits_raises_is_isolated_and_named() -> None:
    import threading

    seen: dict[str, Any] = {}

    class BrokenProbe(MemorySink):
        name = "broken-probe"

        def close_waits(self, info: Any) -> bool:
            raise RuntimeError("probe exploded")

    class Other(MemorySink):
        name = "other"

        def close_waits(self, info: Any) -> bool:
            return False

        def close_turn(self, info: Any) -> dict[str, Any]:
            seen["thread"] = threading.current_thread()
            return super().close_turn(info)

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(BrokenProbe())
            register(Other())

    stderr = io.StringIO()
    result = run_turn(make_runtime(make_host(ora_scripted, SinkPlugin()), scripted_config(default="Hi."),
                                   stderr=stderr), "Hello")
    assert result.answer == "Hi." and result.tracing_degraded
    assert "trace sink 'broken-probe' failed (close_waits: RuntimeError: probe exploded)" in stderr.getvalue()
    assert seen["thread"] is threading.current_thread()  # the one sink left does not wait


def test_a_sink_stuck_in_close_turn_degrades_the_turn_instead_of_hanging_it(tmp_path: Path) -> None:
    import threading
    import time

    release = threading.Event()

    class StuckSink(MemorySink):
        name = "stuck-disk"

        def close_turn(self, info: Any) -> dict[str, Any]:
            release.wait(timeout=30)  # a write that never comes back from the disk
            return super().close_turn(info)

    sink, quick = StuckSink(), MemorySink()

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(quick)  # closes at once, before the stuck one: not named
            register(sink)

    stderr = io.StringIO()
    resolved = scripted_config(default="Hi.", trace={"close_timeout_s": 0.3})
    started = time.monotonic()
    try:
        result = run_turn(make_runtime(make_host(ora_scripted, SinkPlugin()), resolved, stderr=stderr), "Hello")
        waited = time.monotonic() - started
    finally:
        release.set()
    assert result.answer == "Hi." and result.tracing_degraded and result.trace_path is None
    assert "trace sink 'stuck-disk' failed (close_turn: TimeoutError: did not return within 0.3 s" in stderr.getvalue()
    assert quick.closed and "'memory'" not in stderr.getvalue()
    assert waited < 10, "the turn returned long before the sink did"


def test_ora_register_commands_gives_commands_the_configuration_through_ora(tmp_path: Path) -> None:
    from ora_core.kernel.commands import CommandContext

    class Commands:
        @hookimpl
        def ora_register_commands(self, cli, ora):
            @cli.command("trace-root")
            def trace_root() -> None:
                typer.echo(str(ora.config().config.trace.resolved_root()))

            @cli.command("refuse")
            def refuse() -> None:
                raise ora.fail("nothing to refuse", code=2)

    resolved = scripted_config(tmp_path / "traces")
    host = make_host(Commands())
    app = build_app()
    host.register_commands(app, CommandContext(host, lambda: resolved))
    result = CliRunner().invoke(app, ["trace-root"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(tmp_path / "traces")
    failed = CliRunner().invoke(app, ["refuse"])
    assert failed.exception is not None and failed.exception.code == 2  # main() prints and exits with it


def test_ora_register_retrievers_feeds_the_context_package(tmp_path: Path) -> None:
    from ora_core.api import Chunk, Provenance, Retrieval

    class Notes:
        name = "notes"
        stream = "concept"

        def retrieve(self, query, filters, k, ctx):
            return Retrieval(stream="concept", query=query, chunks=[Chunk(
                id="n1", text="Harness vendors bundle models with tooling.",
                provenance=Provenance(collection="notes", source="notes/harness.md", score=0.9))])

    class Plugin:
        @hookimpl
        def ora_register_retrievers(self, register):
            register(Notes())

    import ora_modes

    host = make_host(ora_scripted, ora_modes, Plugin())
    config = scripted_config(default="An analysis.\nCONFIDENCE: 0.9", retrieval={"streams": {
        "conversation": False, "relationship": False}}, verification={"verifier": "none", "final_verifier": "none"})
    runtime = make_runtime(host, config)
    result = run_turn(runtime, "Who benefits from harness vendors?", mode="standard")
    assert host.registry["retriever"]["notes"].plugin == "Plugin"
    assert result.mode == "standard" and result.gear == 2
    assert any("notes" in c for c in result.contingencies) is False  # found, not a named failure


def test_ora_register_verifiers_supplies_the_verdict_of_a_gear_2_turn(tmp_path: Path) -> None:
    from ora_core.api import Verdict, VerdictStatus

    seen: list[Any] = []

    class Strict:
        name = "strict"

        def verify(self, subject, package, criteria, ctx):
            seen.append(ctx.verification)
            return Verdict(status=VerdictStatus.FAIL, verifier=self.name, reasons=["too confident"])

    class Plugin:
        @hookimpl
        def ora_register_verifiers(self, register):
            register(Strict())

    import ora_modes

    host = make_host(ora_scripted, ora_modes, Plugin())
    config = scripted_config(default="An analysis.\nCONFIDENCE: 0.9",
                             verification={"verifier": "strict", "final_verifier": "strict"})
    result = run_turn(make_runtime(host, config), "Who benefits from harness vendors?", mode="standard")
    assert set(result.verdicts.values()) == {"FAIL"}
    assert seen and seen[0].step == "gear2-cycle1-verify" and seen[0].role == "verifier"


def test_ora_register_fault_injectors_drives_the_path_its_mode_names(tmp_path: Path) -> None:
    """A registered injector acts on a Gear 2 turn's analyst output (the fault is on record, the step
    carries the injected text); the same turn without ``inject`` is untouched (the control)."""
    import ora_modes

    class Garbage:
        name = "say-garbage"
        description = "the analyst's output is replaced by garbage"

        def inject(self, point, value):
            if point.site == "model_output" and point.purpose == "analyst" and isinstance(value, str):
                return "garbage"
            return value

    class Plugin:
        @hookimpl
        def ora_register_fault_injectors(self, register):
            register(Garbage())

    def turn(inject: str | None) -> tuple[Any, MemorySink]:
        sink = MemorySink()

        class SinkPlugin:
            @hookimpl
            def ora_register_trace_sinks(self, register):
                register(sink)

        host = make_host(ora_scripted, ora_modes, Plugin(), SinkPlugin())
        config = scripted_config(default="The analysis: harness vendors bundle models.\nCONFIDENCE: 0.90",
                                 retrieval={"streams": {"concept": False, "conversation": False,
                                                        "relationship": False}})
        return run_turn(make_runtime(host, config), "Why do vendors bundle?", inject=inject, mode="standard"), sink

    result, sink = turn("say-garbage")
    assert result.gear == 2 and "fault-injection-say-garbage" in result.contingencies
    injected = [e for e in sink.events if e.kind == "fault_injected"]
    assert injected and {e.data.get("mode") for e in injected} == {"say-garbage"}
    assert {e.step for e in injected} == {"gear2-analyst"}
    [finished] = [e for e in sink.events if e.kind == "step_finished" and e.step == "gear2-analyst"]
    assert finished.data["output"]["text"] == "garbage"
    control, sink = turn(None)
    assert not [e for e in sink.events if e.kind == "fault_injected"]
    assert "fault-injection-say-garbage" not in control.contingencies
    [finished] = [e for e in sink.events if e.kind == "step_finished" and e.step == "gear2-analyst"]
    assert finished.data["output"]["text"].startswith("The analysis")


def test_ora_register_embedders_offers_an_embedder_by_name_and_names_the_registered_ones() -> None:
    from ora_core.api import PluginError, StandaloneContext

    class Letters:
        name = "letters"
        dimension = 2

        def embed(self, texts):
            return [[float(len(t)), float(t.count("a"))] for t in texts]

    class Plugin:
        @hookimpl
        def ora_register_embedders(self, register):
            register(Letters())

    host = make_host(Plugin())
    config = scripted_config().config.model_copy(update={"embedding": scripted_config().config.embedding.model_copy(
        update={"embedder": "letters"})})
    ctx = StandaloneContext(config, host=host)
    assert ctx.embedder().embed(["banana"]) == [[6.0, 3.0]]
    with pytest.raises(PluginError) as refused:
        ctx.embedder("minilm")
    assert "registered embedders: letters" in str(refused.value)


def test_an_embedder_without_embed_is_refused_at_registration() -> None:
    class Half:
        name = "half"
        dimension = 3

    class Plugin:
        @hookimpl
        def ora_register_embedders(self, register):
            register(Half())

    host = make_host(Plugin(), strict=False)
    record = next(iter(host.records.values()))
    assert record.status == "failed" and "lacks 'embed'" in record.errors[0]


def test_ora_turn_finished_observer_that_hangs_is_named_and_does_not_hold_the_turn() -> None:
    import threading
    import time

    release = threading.Event()

    class Stuck:
        @hookimpl
        def ora_turn_finished(self, turn: Any, result: Any) -> None:
            release.wait(10.0)  # a post-turn indexer whose store stopped answering

    sink = MemorySink()

    class SinkPlugin:
        @hookimpl
        def ora_register_trace_sinks(self, register):
            register(sink)

    host = make_host(ora_scripted, Stuck(), SinkPlugin())
    runtime = make_runtime(host, scripted_config(default="Hi there.", pipeline={"observer_timeout_s": 0.2}))
    start = time.perf_counter()
    result = run_turn(runtime, "Hello", mode=None)
    elapsed = time.perf_counter() - start
    release.set()
    assert elapsed < 8.0, "the turn waited for the stuck observer"
    named = [e for e in sink.events if e.kind == "contingency" and e.data.get("name", "").endswith("-timed-out")]
    assert [e.data["name"] for e in named] == ["observer-Stuck-timed-out"]
    assert "observer-Stuck-timed-out" in result.contingencies and result.answer == "Hi there."
    assert "did not return within 0.2 s" in named[0].data["detail"]

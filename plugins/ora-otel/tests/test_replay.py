"""``ora trace export --otlp URL [TURNS]``: turns read back from disk arrive as the live export sent
them (same span tree, times and ids), a turn that cannot be sent fails the command by name, and
``--failed`` sends what the live export lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ora_otel
import ora_trace_fs
from ora_otel import conventions as c
from ora_otel.failures import unreplayed
from typer.testing import CliRunner

from ora_core.api import CommandContext
from ora_core.testing import build_app, make_host

ERROR = 2


def _cli(resolved: Any) -> Any:
    app = build_app()
    host = make_host(ora_trace_fs, ora_otel)
    host.register_commands(app, CommandContext(host, lambda: resolved, app=app))
    return app


def _export(resolved: Any, *args: str) -> Any:
    return CliRunner().invoke(_cli(resolved), ["trace", "export", *args])


def _shape(span: Any) -> tuple[Any, ...]:
    attributes = {k: v for k, v in span.attributes.items() if k != c.REPLAYED}
    return (span.name, span.trace_id, span.parent_id, span.kind, span.start, span.end, span.status, attributes,
            sorted((name, at, sorted(attrs.items())) for name, at, attrs in span.events), span.links)


def test_a_turn_replayed_from_disk_arrives_as_the_live_export_sent_it(gear4, receivers) -> None:
    live, replayed = receivers(), receivers()
    flaky = {"type": "scripted", "model": "flaky-1", "family": "flaky", "fallbacks": ["local"], "max_retries": 0,
             "options": {"rules": [{"match": "ROLE: CONSOLIDATOR", "reply": "!error:unavailable", "on": "system"}]}}
    result, rt, sink = gear4.run(otel={"endpoint": live.url}, backends={"flaky": flaky},
                                 roles={"consolidator": "flaky"})
    assert sink.flush(10) and live.spans
    done = _export(rt.resolved, "--otlp", replayed.url, result.turn_id[:22], "--root", str(gear4.root))
    assert done.exit_code == 0, done.output
    assert done.stdout == f"exported {result.turn_id}: {len(live.spans)} span(s) to {replayed.url}/v1/traces\n"
    assert {s.span_id: _shape(s) for s in replayed.spans} == {s.span_id: _shape(s) for s in live.spans}
    root = replayed.one("invoke_workflow ora")
    assert root.attributes[c.REPLAYED] is True and c.REPLAYED not in live.one("invoke_workflow ora").attributes


def test_export_fails_naming_every_turn_it_could_not_send(gear4, dead_url) -> None:
    first, rt, _ = gear4.run()
    second, _, _ = gear4.run()
    done = _export(rt.resolved, "--otlp", dead_url, "--timeout", "0.5", "--all", "nosuchturn")
    assert done.exit_code != 0
    failure = done.exception
    assert failure.code == 1  # the CLI's main() prints "ora: <message>" and exits with it
    assert failure.message.startswith(f"3 turn(s) not exported to {dead_url}/v1/traces: ")
    assert f"{first.turn_id} (" in failure.message and f"{second.turn_id} (" in failure.message
    assert "nosuchturn: no such turn under" in failure.message


def test_a_collector_that_refuses_the_export_is_named_with_its_answer(gear4, receiver) -> None:
    result, rt, _ = gear4.run()
    receiver.refuse_with, receiver.refusal = 400, "unknown schema"
    done = _export(rt.resolved, "--otlp", receiver.url, result.turn_id)
    assert done.exit_code != 0
    assert f"{result.turn_id} (" in done.exception.message
    assert "HTTP 400 Bad Request: unknown schema" in done.exception.message


def test_export_failed_sends_what_the_live_export_lost_and_only_once(gear4, dead_url, receiver) -> None:
    result, rt, sink = gear4.run(otel={"endpoint": dead_url, "export_interval_s": 60, "timeout_s": 0.5})
    assert sink.flush(10)
    assert unreplayed(gear4.root) == ([result.turn_id], [])
    done = _export(rt.resolved, "--otlp", receiver.url, "--failed")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith(f"exported {result.turn_id}: ")
    assert receiver.one("invoke_workflow ora").attributes[c.TURN_ID] == result.turn_id
    assert unreplayed(gear4.root) == ([], [])
    again = _export(rt.resolved, "--otlp", receiver.url, "--failed")
    assert again.exit_code == 0 and again.stdout.startswith("nothing to export under ")


def test_a_turn_that_never_finished_is_exported_with_its_open_step_marked_unfinished(gear4, receiver) -> None:
    result, rt, _ = gear4.run()
    path = Path(result.trace_path)
    turn = json.loads((path / "turn.json").read_text())
    turn.update(status="running", finished_at=None)
    (path / "turn.json").write_text(json.dumps(turn))
    [last] = path.glob("[0-9][0-9]-final-output.json")
    step = json.loads(last.read_text())
    step.update(status="running")
    step.pop("finished_at")
    last.write_text(json.dumps(step))
    done = _export(rt.resolved, "--otlp", receiver.url, str(path))
    assert done.exit_code == 0, done.output
    root = receiver.one("invoke_workflow ora")
    assert root.status == ERROR and root.attributes[c.ERROR_TYPE] == "turn_unfinished"
    final = receiver.one("final-output")
    assert final.status == ERROR and final.attributes[c.STEP_UNFINISHED] is True
    assert receiver.one("step7-consolidation").status != ERROR


def test_an_unreadable_turn_is_named_and_the_others_still_go(gear4, receiver) -> None:
    broken, rt, _ = gear4.run()
    fine, _, _ = gear4.run()
    (Path(broken.trace_path) / "turn.json").write_text("{not json")
    done = _export(rt.resolved, "--otlp", receiver.url, str(Path(broken.trace_path)), fine.turn_id)
    assert done.exit_code != 0
    assert f"{broken.trace_path}/turn.json: JSONDecodeError" in done.exception.message
    assert f"exported {fine.turn_id}: " in done.stdout
    assert {s.attributes.get(c.TURN_ID) for s in receiver.spans} == {fine.turn_id, None}

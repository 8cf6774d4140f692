"""The raw SSE shape, read with ``curl -N``: the chat stream's exact lines for a short scripted turn, and the
events stream (``id:``/``event:``/``data:`` per typed event, ``Last-Event-ID`` resume, the stored events of a
finished turn replayed from its journal, then closed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import httpx
import pytest
from serve_harness import QUESTION, chat_body

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def curl(url, *args, body=None, timeout=60):
    cmd = ["curl", "-sS", "-N", "--max-time", str(timeout), *args, url]
    if body is not None:
        cmd += ["-H", "content-type: application/json", "-d", json.dumps(body)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 10, check=True).stdout


def test_the_chat_stream_of_a_short_scripted_turn_line_by_line(serve):
    served = serve()
    out = curl(served.base_url + "/v1/chat/completions", body=chat_body("Hello there", model="ora/simple",
                                                                          stream=True,
                                                                          stream_options={"include_usage": True}))
    lines = out.split("\n")
    # data, blank, data, blank ... [DONE], blank: nothing else (pure OpenAI SSE)
    assert lines[-3:] == ["data: [DONE]", "", ""]
    events = [line for line in lines if line]
    assert all(line.startswith("data: ") for line in events) and len(events) == 5
    assert all(lines[i] == "" for i in range(1, len(lines) - 1, 2))
    first, content, final, usage = (json.loads(line[6:]) for line in events[:4])
    trace_id = first["id"]
    assert first["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
                                 "logprobs": None}]
    assert content["id"] == trace_id and list(content["choices"][0]["delta"]) == ["content"]
    assert content["choices"][0]["delta"]["content"] == served.turn_json(trace_id)["answer"]
    assert final["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}
    assert final["ora"]["status"] in ("ok", "degraded") and final["ora"]["trace_id"] == trace_id
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    assert served.turn_json(trace_id)["status"] == final["ora"]["status"]


def test_the_halted_chat_stream_ends_with_the_error_line_and_no_done(serve):
    served = serve(analyst="!error:unavailable")
    out = curl(served.base_url + "/v1/chat/completions", body=chat_body(stream=True))
    events = [line for line in out.split("\n") if line]
    assert "data: [DONE]" not in events and len(events) == 2
    error = json.loads(events[-1][6:])["error"]
    assert error["type"] == "backend_error" and error["ora"]["status"] == "halted"


def sse_events(text):
    """``[(id, event, data)]`` of an SSE body; every event has exactly these three fields, in order."""
    found = []
    for block in text.strip("\n").split("\n\n"):
        lines = [line for line in block.split("\n") if not line.startswith(":")]
        if not lines:
            continue
        assert [line.split(":", 1)[0] for line in lines] == ["id", "event", "data"], block
        found.append((int(lines[0][4:]), lines[1][7:], json.loads(lines[2][6:])))
    return found


def test_the_events_of_a_finished_turn_are_replayed_from_its_journal_then_closed(serve):
    served = serve()
    done = httpx.post(served.base_url + "/v1/chat/completions", json=chat_body("Hello there", model="ora/simple"),
                      timeout=60)
    trace_id = done.headers["x-ora-trace-id"]
    events = sse_events(curl(served.base_url + f"/v1/ora/turns/{trace_id}/events"))
    assert [e[0] for e in events] == list(range(1, len(events) + 1))
    kinds = [e[1] for e in events]
    assert kinds[-1] == "turn_finished" and kinds.count("turn_finished") == 1
    assert kinds[0] == "step_started" and "step_finished" in kinds
    assert all(e[2]["type"] == e[1] and e[2]["turn_id"] == trace_id for e in events)
    assert events[-1][2]["result"]["status"] == done.json()["ora"]["status"]
    # resume after event 2: the rest, from id 3
    rest = sse_events(curl(served.base_url + f"/v1/ora/turns/{trace_id}/events", "-H", "Last-Event-ID: 2"))
    assert rest == events[2:]
    bad = httpx.get(served.base_url + f"/v1/ora/turns/{trace_id}/events", headers={"Last-Event-ID": "x"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"


def test_the_events_of_a_running_turn_stream_as_they_happen_and_end_with_turn_finished(serve):
    served = serve(latency_s=0.4)
    with httpx.stream("POST", served.base_url + "/v1/chat/completions", json=chat_body(QUESTION, stream=True),
                      timeout=60) as opened:
        trace_id = opened.headers["x-ora-trace-id"]
        started = time.monotonic()
        with httpx.stream("GET", served.base_url + f"/v1/ora/turns/{trace_id}/events", timeout=60) as events:
            first_at = None
            text = ""
            for piece in events.iter_text():
                if first_at is None and "event:" in piece:
                    first_at = time.monotonic()
                text += piece
        body = "".join(opened.iter_text())
    assert first_at is not None and first_at - started < 0.4 * 2  # live: before the turn's second model call ended
    found = sse_events(text)
    assert found[-1][1] == "turn_finished" and found[-1][2]["result"]["turn_id"] == trace_id
    assert "data: [DONE]" in body
    assert "\r" not in text  # every line ends with one newline, keep-alive comments too

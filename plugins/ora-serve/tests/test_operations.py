"""Operations against a real ``ora serve``: a client that leaves cancels its turn (the trace read back says
so, with the step it was in), SIGTERM names the turns in flight and cancels them after the grace (never a
trace left ``running``), ``--max-turns`` answers 429 with ``Retry-After``, ``/healthz`` (and ``?deep=1``),
the access lines without prompt text, two workers on one port sharing one trace root."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
from serve_harness import QUESTION, chat_body

SLOW = 1.5  # seconds per scripted model call: a gear-2 turn takes ~3 s


def wait_for_log(served, text, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while text not in served.log():
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{served.log()[-2000:]}"
        time.sleep(0.05)


def test_a_streaming_client_that_disconnects_cancels_the_turn_and_the_trace_says_so(serve):
    served = serve(latency_s=SLOW)
    client = openai.OpenAI(base_url=served.base_url + "/v1", api_key="x", max_retries=0, timeout=60)
    stream = client.chat.completions.create(model="ora/standard", messages=[{"role": "user", "content": QUESTION}],
                                            stream=True)
    first = next(iter(stream))
    trace_id = first.id
    time.sleep(0.5)  # inside the analyst's model call
    stream.close()
    turn = served.wait_turn_closed(trace_id)
    assert turn["status"] == "halted"
    assert turn["interruption"]["reason"] == "client-disconnected"
    assert turn["interruption"]["step"] == "gear2-analyst"
    assert "turn-interrupted-client-disconnected" in turn["contingencies"]
    # the model call in flight was cancelled, not left running: no verifier call was ever made
    calls = [c["role"] for c in turn["runtimeRoleModels"]]
    assert "verifier" not in calls
    wait_for_log(served, f"cancelling turn {trace_id} in step gear2-analyst")


def test_a_non_streaming_client_that_disconnects_cancels_the_turn(serve):
    served = serve(latency_s=SLOW)
    body = json.dumps(chat_body()).encode()
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     + f"content-length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(0.7)
    wait_for_log(served, "client gone; cancelling turn")
    trace_id = served.log().split("client gone; cancelling turn ")[1].split()[0]
    turn = served.wait_turn_closed(trace_id)
    assert turn["status"] == "halted" and turn["interruption"]["reason"] == "client-disconnected"


def test_sigterm_names_the_turns_in_flight_and_cancels_them_after_the_grace_never_leaving_one_running(serve):
    served = serve("--shutdown-grace", "0.5", latency_s=SLOW)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(httpx.post, served.base_url + "/v1/chat/completions", json=chat_body(), timeout=60)
                   for _ in range(2)]
        time.sleep(0.6)  # both turns inside their analyst's model call
        served.proc.send_signal(signal.SIGTERM)
        responses = [f.result() for f in futures]
    assert served.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught, once shut down
    for response in responses:
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "shutting_down" and error["ora"]["interruption"]["reason"] == "shutdown"
        turn = served.turn_json(response.headers["x-ora-trace-id"])
        assert turn["status"] == "halted" and turn["interruption"]["reason"] == "shutdown"
    log = served.log()
    assert "shutting down; turns in flight: " in log
    for response in responses:
        assert f"cancelling turn {response.headers['x-ora-trace-id']} in step" in log
    running = [p for p in served.trace_root.rglob("turn.json") if json.loads(p.read_text())["status"] == "running"]
    assert running == []


def test_max_turns_answers_429_with_retry_after_past_the_bound(serve):
    served = serve("--max-turns", "1", latency_s=SLOW)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(httpx.post, served.base_url + "/v1/chat/completions", json=chat_body(), timeout=60)
        deadline = time.monotonic() + 10
        while httpx.get(served.base_url + "/healthz", timeout=5).json()["turns"]["in_flight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        busy = httpx.post(served.base_url + "/v1/chat/completions", json=chat_body(), timeout=60)
        assert first.result().status_code == 200
    assert busy.status_code == 429 and int(busy.headers["retry-after"]) >= 1
    assert busy.json()["error"]["code"] == "too_many_turns" and "--max-turns 1" in busy.json()["error"]["message"]
    client = openai.OpenAI(base_url=served.base_url + "/v1", api_key="x", max_retries=0)
    assert client.chat.completions.create(model="ora/standard", messages=[{"role": "user", "content": QUESTION}])


def test_healthz_reports_plugins_and_turns_and_deep_probes_the_backends(serve):
    served = serve()
    health = httpx.get(served.base_url + "/healthz", timeout=30).json()
    assert health["status"] == "ok" and "serve" in health["plugins"]["loaded"] and "scripted" in \
        health["plugins"]["loaded"]
    assert health["turns"] == {"in_flight": 0, "max": health["turns"]["max"], "served": 0, "refused_busy": 0}
    assert "backends" not in health
    deep = httpx.get(served.base_url + "/healthz?deep=1", timeout=60)
    assert deep.status_code == 200 and set(deep.json()["backends"]) == {"local"}
    assert deep.json()["backends"]["local"]["reachable"] in (True, None)


def test_access_lines_carry_no_prompt_text_by_default(serve):
    served = serve()
    secret_prompt = "Compare the zyzzyva-quokka protocol with PostgreSQL for a small web app."
    response = httpx.post(served.base_url + "/v1/chat/completions", json=chat_body(secret_prompt), timeout=60)
    trace_id = response.headers["x-ora-trace-id"]
    wait_for_log(served, f"trace={trace_id} ora_status=ok")
    assert "zyzzyva" not in served.log()
    logged = serve("--log-prompts")
    httpx.post(logged.base_url + "/v1/chat/completions", json=chat_body(secret_prompt), timeout=60)
    wait_for_log(logged, "zyzzyva-quokka")


def test_two_workers_twenty_concurrent_turns_each_trace_complete_in_one_root(serve):
    served = serve("--workers", "2", "--max-turns", "20", latency_s=0.3)

    async def one(i):
        await asyncio.sleep(0.03 * i)  # one connection each, opened 30 ms apart: the kernel hands each to
        # whichever worker accepts first (uvicorn's workers share one listening socket)
        client = openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        try:
            return await client.chat.completions.with_raw_response.create(
                model="ora/standard", messages=[{"role": "user", "content": f"{QUESTION} ({i})"}])
        finally:
            await client.close()

    async def all_turns():
        return await asyncio.gather(*(one(i) for i in range(20)))

    raws = asyncio.run(all_turns())
    workers = {raw.headers["x-ora-worker"] for raw in raws}
    ids = [raw.parse().id for raw in raws]
    assert len(set(ids)) == 20
    assert len(workers) == 2, workers  # both workers took turns
    for raw, trace_id in zip(raws, ids, strict=True):
        assert raw.headers["x-ora-status"] == "ok"
        turn = served.turn_json(trace_id)
        assert turn["status"] == "ok" and turn["finished_at"] and turn["trace_write_errors"] == []
        trace = next(served.trace_root.glob(f"*/{trace_id}"))
        for step_file in turn["steps"]:
            assert (trace / step_file).exists() and (trace / step_file.replace(".json", ".md")).exists()
    # an events request to either worker replays any turn from the shared journal
    for trace_id in ids[:4]:
        text = httpx.get(served.base_url + f"/v1/ora/turns/{trace_id}/events", timeout=30).text
        assert text.rstrip().endswith("}") and "event: turn_finished" in text


def test_another_worker_follows_a_running_turn_from_its_journal_to_turn_finished(serve):
    served = serve("--workers", "2", latency_s=0.8)
    with httpx.stream("POST", served.base_url + "/v1/chat/completions", json=chat_body(stream=True),
                      timeout=60) as chat:
        trace_id, runner = chat.headers["x-ora-trace-id"], chat.headers["x-ora-worker"]
        followed = None
        for _ in range(40):  # new connections until one lands on the other worker
            with httpx.Client(timeout=60) as other, \
                    other.stream("GET", served.base_url + f"/v1/ora/turns/{trace_id}/events") as events:
                if events.headers["x-ora-worker"] != runner:
                    assert events.headers["x-ora-events-source"] == "journal"
                    followed = "".join(events.iter_text())
                    break
        rest = "".join(chat.iter_text())
    assert followed is not None, "no events request reached the other worker in 40 connections"
    assert "data: [DONE]" in rest
    kinds = [line[7:] for line in followed.split("\n") if line.startswith("event: ")]
    ids = [int(line[4:]) for line in followed.split("\n") if line.startswith("id: ")]
    assert kinds[0] == "step_started" and kinds[-1] == "turn_finished" and ids == list(range(1, len(ids) + 1))


def test_a_journal_that_cannot_be_written_is_named_in_the_answer_and_in_healthz(serve):
    served = serve()
    blocker = served.trace_root / ".ora-serve"
    if blocker.is_dir():  # the server may have made it at start: empty, it is replaced by a file
        for sub in sorted(blocker.rglob("*"), reverse=True):
            sub.rmdir()
        blocker.rmdir()
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")
    response = httpx.post(served.base_url + "/v1/chat/completions", json=chat_body(), timeout=60)
    assert response.status_code == 200
    error = response.json()["ora"]["event_journal_error"]
    assert ".ora-serve" in error and "events" in error
    health = httpx.get(served.base_url + "/healthz", timeout=30).json()
    assert health["status"] == "degraded" and health["event_journal_failures"] == 1

"""The official ``openai`` client against a real ``ora serve``: the failure semantics table of
``docs/serve.md`` row by row (ok, degraded, needs_clarification, halted: non-streaming and streaming),
streaming with usage, a clarification round trip, ``models.list()``."""

from __future__ import annotations

import json

import openai
import pytest
from serve_harness import FAIL, QUESTION

TIMEOUT = 60


def client(served, **kw):
    return openai.OpenAI(base_url=served.base_url + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0,
                         timeout=TIMEOUT, **kw)


def user(text):
    return [{"role": "user", "content": text}]


def test_ok_row_a_normal_completion_finish_reason_stop_with_its_ora_object_and_headers(serve):
    served = serve()
    raw = client(served).chat.completions.with_raw_response.create(model="ora/standard", messages=user(QUESTION))
    done = raw.parse()
    assert raw.headers["x-ora-status"] == "ok"
    assert raw.headers["x-ora-trace-id"] == done.id
    assert done.choices[0].finish_reason == "stop"
    assert done.choices[0].message.content.startswith("Harness vendors bundle")
    ora = done.model_extra["ora"]
    assert ora["status"] == "ok" and ora["verdicts"] == {"gear2-cycle1-verify": "PASS"}
    assert ora["trace_id"] == done.id and done.usage.total_tokens > 0
    turn = served.turn_json(done.id)
    assert turn["status"] == "ok" and turn["answer"] == done.choices[0].message.content


def test_degraded_row_the_answer_as_ora_run_prints_it_with_status_verdicts_and_contingencies(serve):
    served = serve(verify=FAIL)
    raw = client(served).chat.completions.with_raw_response.create(model="ora/standard", messages=user(QUESTION))
    done = raw.parse()
    assert raw.headers["x-ora-status"] == "degraded"
    ora = done.model_extra["ora"]
    assert ora["status"] == "degraded" and "FAIL" in ora["verdicts"].values()
    assert "gear2-cycle2-FAIL-cap-reached-not-verified" in ora["contingencies"]
    content = done.choices[0].message.content
    assert content.startswith("[warning: verification FAILED")  # the warning header, as `ora run` prints the answer
    assert served.turn_json(done.id)["answer"] == content


def test_degraded_row_streamed_the_final_chunk_carries_the_ora_object_before_done(serve):
    served = serve(verify=FAIL)
    chunks = list(client(served).chat.completions.create(model="ora/standard", messages=user(QUESTION), stream=True))
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(final) == 1 and final[0].model_extra["ora"]["status"] == "degraded"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("[warning: verification FAILED")


def test_streaming_with_usage_first_chunk_id_is_the_trace_id_and_usage_comes_last(serve):
    served = serve()
    stream = client(served).chat.completions.create(model="ora/standard", messages=user(QUESTION), stream=True,
                                                    stream_options={"include_usage": True})
    chunks = list(stream)
    trace_id = chunks[0].id
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.id == trace_id for c in chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("Harness vendors")
    assert served.turn_json(trace_id)["status"] == "ok"
    # without include_usage: no usage chunk
    plain = list(client(served).chat.completions.create(model="ora/standard", messages=user(QUESTION), stream=True))
    assert all(c.choices for c in plain)


def test_halted_row_non_streaming_is_an_http_error_with_the_diagnostic_and_the_trace(serve):
    served = serve(analyst="!error:unavailable")
    with pytest.raises(openai.APIStatusError) as caught:
        client(served).chat.completions.create(model="ora/standard", messages=user(QUESTION))
    error = caught.value
    assert error.status_code == 502  # every backend of the analyst failed: the upstream's fault
    body = error.body
    assert body["type"] == "backend_error" and body["code"] == "turn_halted"
    assert body["message"] == ("the turn halted: the analyst produced no usable output (backend:unavailable) "
                               "(BackendUnavailable: scripted unavailable)")
    assert body["ora"]["diagnostic"]["step"] == "gear2-analyst"
    trace_id = body["ora"]["trace_id"]
    assert error.response.headers["x-ora-status"] == "halted"
    assert served.turn_json(trace_id)["status"] == "halted"


def test_halted_row_streaming_ends_with_an_error_event_and_no_done_and_the_client_raises(serve):
    served = serve(analyst="!error:unavailable")
    stream = client(served).chat.completions.create(model="ora/standard", messages=user(QUESTION), stream=True)
    seen = []
    with pytest.raises(openai.APIError) as caught:
        for c in stream:
            seen.append(c)
    assert "halted" in str(caught.value.message)
    assert len(seen) == 1 and seen[0].choices[0].delta.role == "assistant"  # the opening chunk, then the error
    assert served.turn_json(seen[0].id)["status"] == "halted"


def test_needs_clarification_row_and_the_round_trip_on_the_clients_next_message(serve):
    served = serve()
    api = client(served)
    raw = api.chat.completions.with_raw_response.create(model="ora/auto", messages=user("blue"))
    asked = raw.parse()
    assert raw.headers["x-ora-status"] == "needs_clarification"
    ora = asked.model_extra["ora"]
    assert ora["status"] == "needs_clarification" and ora["options"][-1] == "just answer"
    content = asked.choices[0].message.content
    assert ora["question"] in content and "Options:" in content
    choice = ora["options"].index("standard") + 1
    messages = [*user("blue"), {"role": "assistant", "content": content}, *user(str(choice))]
    raw = api.chat.completions.with_raw_response.create(model="ora/auto", messages=messages)
    answered = raw.parse()
    assert raw.headers["x-ora-status"] in ("ok", "degraded")
    assert answered.model_extra["ora"]["mode"] == "standard"
    assert "clarification-answered-by-user" in answered.model_extra["ora"]["contingencies"]
    turn = served.turn_json(answered.id)
    assert turn["prompt"] == "blue"  # the question asked about, answered on the chosen mode
    # an answer that is none of the options: 400 naming the options
    bad = [*user("blue"), {"role": "assistant", "content": content}, *user("purple")]
    with pytest.raises(openai.BadRequestError, match="not one of the options"):
        api.chat.completions.create(model="ora/auto", messages=bad)


def test_models_list_one_model_per_mode_plus_auto_each_with_gear_and_backends(serve):
    served = serve()
    models = {m.id: m for m in client(served).models.list()}
    assert "ora/auto" in models and "ora/standard" in models and "ora/simple" in models
    standard = models["ora/standard"].model_extra["ora"]
    assert standard["gear"] == 2 and standard["mode"] == "standard"
    assert standard["backends"][0]["backend"] == "local" and "analyst" in standard["backends"][0]["roles"]
    assert models["ora/simple"].model_extra["ora"]["gear"] == 1


def test_a_halted_turn_without_a_backend_error_maps_to_500_turn_halted():
    """The mapping itself, on a result as the engine builds it for a step out of retries."""
    from ora_serve.app import failure_of
    from ora_serve.turns import TurnRun

    from ora_core.api import TurnResult

    run = TurnRun("t-1", None)
    run.result = TurnResult(status="halted", turn_id="t-1", diagnostic={
        "step": "gear2-analyst", "final_failure": "confidence below 0.65 after 2 retries"})
    status, body = failure_of(run)
    assert status == 500 and body["error"]["type"] == "turn_halted"
    assert body["error"]["message"] == "the turn halted: confidence below 0.65 after 2 retries"
    assert body["error"]["ora"]["status"] == "halted" and body["error"]["ora"]["trace_id"] == "t-1"


def test_earlier_messages_become_the_turns_conversation_stream_read_back_from_the_trace(serve):
    served = serve(conversation=True)
    messages = [{"role": "system", "content": "Answer in one line."},
                {"role": "user", "content": "Our bakery runs its orders on a spreadsheet."},
                {"role": "assistant", "content": "A spreadsheet works until orders come from two shops."},
                {"role": "user", "content": QUESTION}]
    done = client(served).chat.completions.create(model="ora/standard", messages=messages)
    (step,) = served.trace_root.glob(f"*/{done.id}/*-context-assembly.json")
    context = json.loads(step.read_text(encoding="utf-8"))
    conversation = context["output"]["retrievals"]["conversation"]
    assert conversation["retriever"] == "client-history"
    (chunk,) = conversation["chunks"]
    assert chunk["provenance"]["source"] == "messages[1..2]"
    assert "bakery runs its orders" in chunk["text"] and "two shops" in chunk["text"]
    # the system message: named, not used
    assert "client-history-roles-unused" in done.model_extra["ora"]["contingencies"]

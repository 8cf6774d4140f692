"""Bad input, a test each, asserting the message: malformed JSON, no messages, no user message, an
unknown model, a prompt over --max-prompt-chars, a wrong API key, a stream_options of the wrong type,
a body over the size limit, an events request for a trace id that does not exist; and the bearer key
never reaching the traces or the log."""

from __future__ import annotations

import httpx
import openai
import pytest
from serve_harness import QUESTION, chat_body, isolated_env

KEY = "sk-serve-test-0123456789abcdef"


@pytest.fixture
def served(serve):
    return serve("--max-prompt-chars", "200", "--max-body-bytes", "4096")


def post(served, body=None, *, content=None, headers=None):
    return httpx.post(served.base_url + "/v1/chat/completions", json=body, content=content, headers=headers,
                      timeout=60)


def error_of(response, status):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    return error


def test_malformed_json_is_a_400_saying_so(served):
    error = error_of(post(served, content=b'{"model": "ora/standard", "messages": [', headers={
        "content-type": "application/json"}), 400)
    assert error["message"].startswith("the request body is not valid JSON")


def test_a_body_that_is_not_an_object_is_a_400_naming_its_type(served):
    assert "must be a JSON object, not list" in error_of(post(served, content=b"[1, 2]"), 400)["message"]


def test_empty_messages_is_a_400_naming_the_field(served):
    error = error_of(post(served, {"model": "ora/standard", "messages": []}), 400)
    assert error["param"] == "messages" and "at least one message" in error["message"]


def test_messages_without_a_user_message_is_a_400(served):
    body = {"model": "ora/standard", "messages": [{"role": "system", "content": "Be brief."}]}
    error = error_of(post(served, body), 400)
    assert error["message"] == "messages: there is no user message with text (the last user message is the prompt)"


def test_a_message_content_of_the_wrong_type_names_its_path(served):
    body = {"model": "ora/standard", "messages": [{"role": "user", "content": 42}]}
    assert error_of(post(served, body), 400)["message"].startswith("messages.0.content:")


def test_an_unknown_model_is_a_404_listing_the_models(served):
    error = error_of(post(served, chat_body(model="gpt-4o")), 404)
    assert error["code"] == "model_not_found" and "'gpt-4o' does not exist" in error["message"]
    assert "ora/auto" in error["message"] and "ora/standard" in error["message"]


def test_a_prompt_over_max_prompt_chars_is_a_400_naming_the_limit(served):
    error = error_of(post(served, chat_body("x" * 201)), 400)
    assert error["code"] == "prompt_too_long"
    assert "the prompt is 201 characters, over this server's limit of 200 (--max-prompt-chars)" in error["message"]


def test_a_stream_options_of_the_wrong_type_is_a_400_naming_it(served):
    error = error_of(post(served, chat_body(stream=True, stream_options="yes")), 400)
    assert error["param"] == "stream_options" and error["message"].startswith("stream_options:")
    error = error_of(post(served, chat_body(stream=True, stream_options={"include_usage": "yes"})), 400)
    assert error["message"].startswith("stream_options.include_usage:")


def test_unknown_request_fields_are_ignored_as_openai_servers_do(served):
    response = post(served, chat_body(temperature=0.3, seed=7, frobnicate={"x": 1}))
    assert response.status_code == 200 and response.headers["x-ora-status"] == "ok"


def test_a_body_over_the_size_limit_is_a_413(served):
    error = error_of(post(served, chat_body("y" * 5000)), 413)
    assert error["code"] == "body_too_large" and "4096" in error["message"]


def test_an_events_request_for_a_trace_id_that_does_not_exist_is_a_404(served):
    response = httpx.get(served.base_url + "/v1/ora/turns/20990101T000000.000000Z-ffffffffffff/events", timeout=30)
    error = error_of(response, 404)
    assert error["code"] == "turn_not_found" and "20990101T000000.000000Z-ffffffffffff" in error["message"]
    assert httpx.get(served.base_url + "/v1/ora/turns/..%2F..%2Fetc/events", timeout=30).status_code == 404
    error = error_of(httpx.get(served.base_url + "/v1/ora/turns/..secret/events", timeout=30), 404)
    assert error["code"] == "turn_not_found"


def test_a_wrong_api_key_is_a_401_the_openai_client_raises_and_the_key_never_reaches_traces_or_log(serve, tmp_path):
    served = serve(env=isolated_env(tmp_path, ORA_SERVE_API_KEY=KEY))
    wrong = openai.OpenAI(base_url=served.base_url + "/v1", api_key="sk-wrong-key-000000", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="incorrect API key"):
        wrong.chat.completions.create(model="ora/standard", messages=[{"role": "user", "content": QUESTION}])
    error = error_of(httpx.get(served.base_url + "/v1/models", timeout=30), 401)
    assert error["code"] == "invalid_api_key" and "Authorization: Bearer" in error["message"]
    right = openai.OpenAI(base_url=served.base_url + "/v1", api_key=KEY, max_retries=0)
    # the key inside a prompt: a secret of the configuration, replaced in the trace and the answer
    done = right.chat.completions.create(model="ora/standard",
                                         messages=[{"role": "user", "content": f"{QUESTION} My key is {KEY}."}])
    assert done.model_extra["ora"]["status"] == "ok"
    turn = served.turn_json(done.id)
    assert KEY not in turn["prompt"]
    served.terminate()
    for path in served.trace_root.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path
    assert KEY not in served.log()


def run_serve(tmp_path, *args, config_text=None):
    import subprocess
    import sys
    from pathlib import Path

    config = tmp_path / "bad.toml"
    if config_text is not None:
        config.write_text(config_text, encoding="utf-8")
    ora = str(Path(sys.executable).with_name("ora"))
    return subprocess.run([ora, "serve", "--config", str(config), "--port", "0", *args], capture_output=True,
                          text=True, timeout=120, env=isolated_env(tmp_path), cwd=tmp_path)


def test_a_serve_table_with_an_unknown_key_fails_before_binding_naming_the_table_and_key(tmp_path):
    proc = run_serve(tmp_path, config_text='[plugins.serve]\nmax_turnz = 3\n')
    assert proc.returncode == 1
    assert "plugins.serve" in proc.stderr and "max_turnz" in proc.stderr
    assert "Uvicorn running" not in proc.stdout + proc.stderr


def test_a_wrong_flag_value_fails_naming_the_setting(tmp_path):
    proc = run_serve(tmp_path, "--workers", "0", config_text="")
    assert proc.returncode == 2 and "workers" in proc.stderr


def test_a_malformed_configuration_file_fails_naming_the_file(tmp_path):
    proc = run_serve(tmp_path, config_text="[trace\nroot = 1\n")
    assert proc.returncode == 1 and "bad.toml" in proc.stderr

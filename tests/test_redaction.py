"""Issue 13, item 1: one redaction layer between every value and every output.

Observed: the trace redacted ``api_key`` only; a credential in ``options.headers`` or a password in
``base_url`` was written into every trace file and printed by ``ora config show``, and a key the server
echoed back reached stderr's ``Diagnostic:``, the ``--json`` result and ``ora models list --check``.

These tests pin the parts: which secrets the configuration yields, every spelling replaced, shapes
scrubbed from error text, the event fan-out, errors at the kernel boundary, the application's
result, ``config show``, and the CLI's stream guard (a plugin's command printing a secret).
``tests/test_redaction_attack.py`` is the end-to-end attack against a real echoing server.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any
from urllib.parse import quote

import pytest

from ora_core.kernel.config import render_config
from ora_core.kernel.errors import BackendAuthError, RetrievalError
from ora_core.kernel.redaction import (
    MASK,
    Redactor,
    config_secrets,
    mask_url,
    redact_exception,
    scrub_shapes,
)
from ora_core.kernel.trace import TurnContext
from ora_core.testing import RecordingSink, make_config

TOKEN = "tok-9f8e7d6c5b4a39281706"
XKEY = "xk-0123456789abcdef"
COOKIE = "c00kie-5e55ion-aa11bb22"
PASSWORD = "s3cr3t/pa55 word"
QUERY_KEY = "QK-7766554433221100"
API_KEY = "sk-proj-a1b2c3d4e5f6a7b8c9d0"
ENV_KEY = "sk-env-0a9b8c7d6e5f4a3b2c1d"
PLUGIN_PASSWORD = "hunter2-hunter2"


def every_kind(env_var: str = "ORA_TEST_REDACTION_KEY") -> dict[str, Any]:
    userinfo = f"bob:{quote(PASSWORD, safe='')}"
    return {
        "backends": {
            "remote": {"type": "openai", "api_key": API_KEY, "base_url": f"http://{userinfo}@127.0.0.1:9/v1",
                       "options": {"headers": {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": XKEY,
                                               "Cookie": f"session={COOKIE}; theme=dark", "Accept": "application/json",
                                               "X-Request-Source": "ora-tests"}}},
            "envkey": {"type": "openai", "api_key_env": env_var,
                       "base_url": f"http://127.0.0.1:9/v1?api_key={QUERY_KEY}&region=eu"},
        },
        "plugins": {"web": {"password": PLUGIN_PASSWORD, "max_tokens": 512, "user_agent": "ora-web/0.1"}},
    }


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ORA_TEST_REDACTION_KEY", ENV_KEY)
    return make_config(every_kind())


def basic_of(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_configuration_yields_every_kind_of_secret_and_nothing_that_is_not_one(resolved: Any) -> None:
    by_value = {s.value: s.kind for s in config_secrets(resolved.config)}
    assert by_value[API_KEY] == "api-key"
    assert by_value[ENV_KEY] == "api-key"  # through api_key_env, resolved from the environment
    assert by_value[f"Bearer {TOKEN}"] == by_value[TOKEN] == "authorization-header"
    assert by_value[XKEY] == "x-api-key-header"
    assert by_value[COOKIE] == "cookie-header"
    assert by_value[PASSWORD] == by_value[quote(PASSWORD, safe="")] == "url-password"
    assert by_value[basic_of("bob", PASSWORD)] == "url-password"  # what a client sends as Basic auth
    assert by_value[QUERY_KEY] == "url-query-api-key"
    assert by_value[PLUGIN_PASSWORD] == "password"
    values = set(by_value)
    for harmless in ("application/json", "ora-tests", "ORA_TEST_REDACTION_KEY", "ora-web/0.1", "dark", "eu", "bob"):
        assert harmless not in values
    assert set(resolved.secrets()) >= {API_KEY, ENV_KEY, TOKEN, XKEY, COOKIE, PASSWORD, QUERY_KEY, PLUGIN_PASSWORD}


def test_every_spelling_of_a_secret_is_replaced_by_a_marker_that_names_only_its_kind(resolved: Any) -> None:
    redactor = Redactor.for_config(resolved)
    text = (f"auth=Bearer {TOKEN} token={TOKEN} x={XKEY} cookie={COOKIE} pw={PASSWORD} url-pw={quote(PASSWORD)} "
            f"enc={quote(PASSWORD, safe='')} basic={basic_of('bob', PASSWORD)} json={json.dumps(PASSWORD)} "
            f"q={QUERY_KEY} k={API_KEY} e={ENV_KEY} p={PLUGIN_PASSWORD}")
    cleaned = redactor.text(text)
    for secret in (TOKEN, XKEY, COOKIE, PASSWORD, quote(PASSWORD), quote(PASSWORD, safe=""), QUERY_KEY, API_KEY,
                   ENV_KEY, PLUGIN_PASSWORD, basic_of("bob", PASSWORD)):
        assert secret not in cleaned
    assert "[REDACTED:authorization-header]" in cleaned and "[REDACTED:url-password]" in cleaned
    assert "[REDACTED:x-api-key-header]" in cleaned and "[REDACTED:cookie-header]" in cleaned
    assert "[REDACTED:url-query-api-key]" in cleaned and "[REDACTED]" in cleaned  # an API key: the old marker
    assert "sk-proj" not in cleaned and "tok-9f" not in cleaned  # no prefix survives
    untouched = "nothing secret here"
    assert redactor.text(untouched) is untouched


def test_nested_data_is_copied_only_where_a_secret_is_and_the_serialised_check_agrees_with_the_walk(
        resolved: Any) -> None:
    redactor = Redactor.for_config(resolved)
    clean = {"a": ["x", {"b": ("y", 1, None, 2.5)}], "c": {"d": "z"}}
    assert redactor.data(clean) is clean
    dirty = {"a": ["x", {"b": ("y", f"Bearer {TOKEN}")}], "c": clean["c"], XKEY: 1}
    out = redactor.data(dirty)
    assert out["a"][1]["b"] == ("y", "[REDACTED:authorization-header]")
    assert out["c"] is clean["c"]  # an untouched branch is shared, not copied
    assert "[REDACTED:x-api-key-header]" in out and XKEY in dirty  # keys too; the input is never mutated
    odd = {1: f"id {API_KEY}", "s": {PASSWORD}}  # a non-str key: the walk answers, not the serialiser
    assert redactor.data(odd)[1] == "id [REDACTED]"


@pytest.mark.parametrize(("said", "gone", "kept"), [
    ("Invalid credentials: Bearer sk-live-abcdefghijklmnopqrstuvwx", "sk-live-abcdefghijklmnopqrstuvwx", "Bearer"),
    ("Incorrect API key provided: sk-proj-ABCDEFGHIJKLMNOPQRSTU123", "ABCDEFGHIJKLMNOPQRSTU123", "API key"),
    ("Authorization: Bearer 4f2c9e8a7b6d5c4e3f2a1b0c", "4f2c9e8a7b6d5c4e3f2a1b0c", "Authorization"),
    ("got Basic YWxpY2U6d29uZGVybGFuZA== from you", "YWxpY2U6d29uZGVybGFuZA==", "Basic"),
    ('{"api_key": "k-1234567890", "model": "m"}', "k-1234567890", '"model": "m"'),
    ("GET /v1/models?api_key=QQQ123456&limit=5 failed", "QQQ123456", "limit=5"),
    ("cannot connect to http://alice:wonder42@h.example/v1", "wonder42", "alice"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlX3ZhbHVl expired", "eyJhbGciOiJIUzI1NiJ9", "expired"),
    ("x-api-key: abcd-efgh-ijkl-mnop was refused", "abcd-efgh-ijkl-mnop", "was refused"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345 leaked", "ghp_0123456789abcdefghij", "leaked"),
])
def test_credential_shapes_are_scrubbed_from_error_text(said: str, gone: str, kept: str) -> None:
    cleaned = scrub_shapes(said)
    assert gone not in cleaned and kept in cleaned and "[REDACTED:" in cleaned
    assert scrub_shapes(cleaned) == cleaned  # idempotent: the output layers may meet twice


@pytest.mark.parametrize("text", [
    "max_tokens=512 and sort_key=name", "the bearer of bad news", "Token limits apply to this model",
    "Basic arithmetic", "a monkey=banana", "see https://example.org/a:b/c", "key points: none",
])
def test_text_that_only_looks_near_a_credential_is_left_alone(text: str) -> None:
    assert scrub_shapes(text) == text


def test_urls_are_masked_in_their_password_and_credential_parameters_only() -> None:
    assert mask_url("http://bob:pw@h:8/v1?api_key=K&region=eu") == f"http://bob:{MASK}@h:8/v1?api_key={MASK}&region=eu"
    assert mask_url("https://h/v1") == "https://h/v1"


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_config_show_masks_headers_userinfo_query_keys_and_plugin_passwords(resolved: Any, fmt: str) -> None:
    shown = render_config(resolved, fmt)  # type: ignore[arg-type]
    for secret in (API_KEY, TOKEN, XKEY, COOKIE, PASSWORD, quote(PASSWORD, safe=""), QUERY_KEY, PLUGIN_PASSWORD):
        assert secret not in shown, secret
    assert "application/json" in shown and "ora-tests" in shown and "ORA_TEST_REDACTION_KEY" in shown
    assert "region=eu" in shown and "bob:" in shown  # what is not secret is still shown


def test_no_trace_sink_sees_a_secret_in_events_or_in_the_turn_info(resolved: Any) -> None:
    sink = RecordingSink()
    opened: list[Any] = []
    sink.open_turn = lambda info, ctx: opened.append(info)  # type: ignore[method-assign]
    turn = TurnContext(prompt=f"my key is {API_KEY}", config=resolved.config, config_hash=resolved.hash,
                       sinks=[sink], redactor=Redactor.for_config(resolved)).open()
    turn.emit("note", step="s", said=[{"body": f"Invalid credentials: Bearer {TOKEN}", "n": 1}], cookie=COOKIE)
    turn.contingency("remote-auth-failed", "s", f"401 from http://bob:{quote(PASSWORD, safe='')}@host")
    dumped = json.dumps([e.model_dump(mode="json") for e in sink.events]) + opened[0].model_dump_json()
    for secret in (API_KEY, TOKEN, COOKIE, quote(PASSWORD, safe="")):
        assert secret not in dumped
    assert turn.prompt == f"my key is {API_KEY}"  # the pipeline still has what the user typed
    assert turn.redact(f"k={API_KEY}") == "k=[REDACTED]"


def test_error_text_in_events_is_scrubbed_of_credential_shapes_even_without_configured_secrets() -> None:
    sink = RecordingSink()
    turn = TurnContext(prompt="q", config=make_config({}).config, config_hash="h", sinks=[sink]).open()
    turn.contingency("context-web-rag-failure-empty-context", "context-assembly",
                     "web: answered 401: Invalid credentials: Bearer abcd1234efgh5678ijkl")
    turn.emit("rag_failure", step="context-assembly", stream="web", message="GET /s?api_key=QQ12345678 refused")
    seen = json.dumps([e.data for e in sink.events])
    assert "abcd1234efgh5678ijkl" not in seen and "QQ12345678" not in seen
    assert "Bearer [REDACTED:bearer-token]" in seen and "api_key=[REDACTED:credential]" in seen


def test_a_backend_error_scrubs_what_the_server_echoed_and_the_kernel_replaces_the_configured_rest(
        resolved: Any) -> None:
    error = BackendAuthError("refused: Invalid credentials: Bearer sk-echoed-abcdefghijklmnop1234",
                             detail=f'{{"error": "x-api-key: {XKEY} is wrong", "seen": "{COOKIE}"}}')
    assert "sk-echoed-abcdefghijklmnop1234" not in str(error) and XKEY not in error.detail
    assert COOKIE in error.detail  # a bare value no shape names: only the configuration knows it
    error.redact(Redactor.for_config(resolved))
    assert COOKIE not in json.dumps(error.describe())
    wrapped = redact_exception(RetrievalError(f"search at http://h/s?token={QUERY_KEY} failed"), Redactor())
    assert QUERY_KEY not in str(wrapped)


def test_a_failing_call_records_and_raises_no_secret(resolved: Any) -> None:
    """The kernel boundary: what a backend raises is redacted before the ledger, the contingency and
    the caller see it."""
    import asyncio

    from ora_core import hookimpl
    from ora_core.engine.backends import BackendPool, call_role
    from ora_core.engine.prompts import build_messages
    from ora_core.kernel.errors import BackendError
    from ora_core.testing import make_host

    class Leaky:
        async def complete(self, messages: Any, params: Any) -> Any:
            raise BackendAuthError(f"refused {COOKIE}", provider="leaky", detail=f"server said {PASSWORD}")

    class Plugin:
        @hookimpl
        def ora_register_backends(self, register: Any) -> None:
            factory = type("F", (), {"name": "leaky", "create": lambda self, settings: Leaky()})()
            register(factory)

    config = make_config({**every_kind(), "backends": {**every_kind()["backends"],
                                                       "local": {"type": "leaky", "model": "m"}}})
    sink = RecordingSink()
    turn = TurnContext(prompt="q", config=config.config, config_hash=config.hash, sinks=[sink],
                       redactor=Redactor.for_config(resolved))
    pool = BackendPool(config.config, make_host(Plugin()))
    with pytest.raises(BackendError) as caught:
        asyncio.run(call_role(turn, pool, "analyst", build_messages("sys", "user"), prompt_key="k"))
    assert COOKIE not in str(caught.value) and PASSWORD not in caught.value.detail
    assert COOKIE not in json.dumps(turn.calls[0].error) and PASSWORD not in json.dumps(turn.calls[0].error)
    assert "[REDACTED:cookie-header]" in turn.calls[0].error["message"]


def test_the_applications_result_carries_no_secret_even_when_the_model_repeats_it(monkeypatch: Any) -> None:
    import ora_scripted

    from ora_core.engine.app import Ora
    from ora_core.testing import make_host, scripted_config

    monkeypatch.setenv("ORA_TEST_REDACTION_KEY", ENV_KEY)
    config = scripted_config(rules=[{"match": ".", "reply": f"Your key is {ENV_KEY}.", "on": "any"}],
                             trace={"enabled": False},
                             backends={"local": {"api_key_env": "ORA_TEST_REDACTION_KEY"}})
    ora = Ora(host=make_host(ora_scripted), config=config, stderr=io.StringIO())
    result = ora.run("hello", mode="simple")
    assert result.answer and ENV_KEY not in result.model_dump_json()
    assert "Your key is [REDACTED]." in result.answer


def test_the_output_guard_finds_a_secret_written_in_pieces_and_in_bytes() -> None:
    from ora_core.cli.state import RedactingStream

    target = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    redactor = Redactor([API_KEY])
    stream = RedactingStream(target, redactor.text)
    for piece in (API_KEY[:5], API_KEY[5:12], API_KEY[12:] + " end\n", "tail without newline ", API_KEY):
        stream.write(piece)
    stream.flush()
    stream.buffer.write(f"bytes {API_KEY}\n".encode())
    written = target.buffer.getvalue().decode()
    assert API_KEY not in written
    assert written.count("[REDACTED]") == 3 and "tail without newline" in written


def test_a_plugins_command_cannot_print_a_secret(tmp_path: Any, monkeypatch: Any) -> None:
    """The guard is around every command: a plugin's ``print`` of the configuration it loaded is
    redacted on stdout and stderr."""
    import sys

    from typer.testing import CliRunner

    from ora_core import hookimpl
    from ora_core.cli.app import build_app
    from ora_core.cli.state import RedactingStream, state
    from ora_core.testing import cli_context, make_host

    monkeypatch.setenv("ORA_TEST_REDACTION_KEY", ENV_KEY)
    cfg = tmp_path / "ora.toml"
    cfg.write_text(f'[backends.remote]\ntype = "openai"\napi_key_env = "ORA_TEST_REDACTION_KEY"\n'
                   f'[backends.remote.options.headers]\nAuthorization = "Bearer {TOKEN}"\n')

    class Leaky:
        @hookimpl
        def ora_register_commands(self, cli: Any, ora: Any) -> None:
            @cli.command("leak")
            def leak() -> None:
                config = ora.config().config
                print("key:", config.backends["remote"].resolved_api_key())
                print("auth:", config.backends["remote"].options["headers"]["Authorization"], file=sys.stderr)
                print(f"echo from server: Bearer sk-unconfigured-{'x' * 24}", file=sys.stderr)

    host = make_host(Leaky())
    app = build_app()
    monkeypatch.setattr(state, "host", host)
    host.register_commands(app, cli_context(host))
    result = CliRunner().invoke(app, ["-c", str(cfg), "leak"])
    assert result.exit_code == 0, result.output
    everything = result.stdout + result.stderr
    assert ENV_KEY not in everything and TOKEN not in everything and "sk-unconfigured" not in everything
    assert "key: [REDACTED]" in result.stdout and "auth: [REDACTED:authorization-header]" in result.stderr
    assert not isinstance(sys.stdout, RedactingStream)  # the guard is gone after the command

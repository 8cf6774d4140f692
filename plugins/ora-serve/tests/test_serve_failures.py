"""The failure rows that need a plugin of the test's own: a configuration error raised by the turn (a
backend factory refusing its settings), through the app in process (``build_app`` over an ``Ora`` built
on in-process plugins) with the official ``openai`` async client on an ASGI transport."""

from __future__ import annotations

import asyncio

import httpx
import openai
import ora_scripted
import ora_trace_fs
import pytest
from ora_serve.app import build_app
from ora_serve.settings import ServeSettings

import ora_modes
from ora_core.api import ConfigError, Ora, hookimpl
from ora_core.testing import make_host, scripted_config

PROMPT = "Compare PostgreSQL and MySQL for a small web app."


class RefusingBackend:
    @hookimpl
    def ora_register_backends(self, register):
        class Factory:
            name = "refusing"

            def create(self, settings):
                raise ConfigError("backends.local: the endpoint file /etc/nowhere.toml does not exist",
                                  field="backends.local")

        register(Factory())


def test_a_configuration_error_raised_by_the_turn_is_a_500_and_a_stream_error_without_done(tmp_path):
    resolved = scripted_config(tmp_path / "traces", pipeline={"phase_a": "skip"},
                               backends={"local": {"type": "refusing", "model": "m", "family": "f"}},
                               retrieval={"streams": {"concept": False, "conversation": False,
                                                      "relationship": False}})
    ora = Ora(host=make_host(ora_scripted, ora_modes, ora_trace_fs, RefusingBackend()), config=resolved)
    app = build_app(ora, ServeSettings())

    async def main():
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ora")
        client = openai.AsyncOpenAI(base_url="http://ora/v1", api_key="x", http_client=http, max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="ora/standard", messages=[{"role": "user", "content": PROMPT}])
        body = caught.value.body
        assert body["type"] == "configuration_error" and "/etc/nowhere.toml does not exist" in body["message"]
        raw = await http.post("/v1/chat/completions", json={"model": "ora/standard", "stream": True,
                                                            "messages": [{"role": "user", "content": PROMPT}]})
        events = [line for line in raw.text.split("\n") if line]
        assert "data: [DONE]" not in events
        assert '"type":"configuration_error"' in events[-1]
        stream = await client.chat.completions.create(model="ora/standard", stream=True,
                                                      messages=[{"role": "user", "content": PROMPT}])
        with pytest.raises(openai.APIError, match="configuration error"):
            async for _ in stream:
                pass
        await http.aclose()
        return body["trace_id"]

    trace_id = asyncio.run(main())
    turn = next((tmp_path / "traces").glob(f"*/{trace_id}/turn.json"))  # the turn's trace closed, as halted
    assert '"status": "halted"' in turn.read_text()

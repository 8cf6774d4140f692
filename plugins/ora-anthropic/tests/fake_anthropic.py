"""A local server on 127.0.0.1 that speaks the Anthropic Messages API wire format.

It validates requests the way the real API does (``x-api-key``, ``anthropic-version``,
``max_tokens``, alternating ``user``/``assistant`` turns starting with the user, ``system`` as a
top-level field, never a message role) and answers 400/401 with Anthropic error objects when
they are wrong. Behaviours per prefix (``server.script(prefix, [...])``, last one repeats):

    ok | ok:<text>       a message (or, when ``stream`` is true, the full event stream)
    429 | 429:<seconds>  rate_limit_error, with retry-after when given
    529 | 500            overloaded_error | api_error
    malformed | empty    a body that is not JSON | a message with no text block
    hang:<seconds>       sleep, then answer
    drop                 close the connection without a response
    (a request in absolute form, as sent to a forward proxy, is answered too: ``proxied``)
    stream-error         (streaming) a first delta, then an ``error`` event (overloaded)
    stream-nostop        (streaming) deltas, then the connection closes without message_stop
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-ant-test-key"
API_VERSION = "2023-06-01"
DEFAULT_TEXT = "Paris is the capital of France."
MODELS = ["claude-test-1", "claude-test-small"]


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._scripts: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"state": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def script(self, prefix: str, behaviours: list[str]) -> str:
        with self._lock:
            self._scripts[prefix] = list(behaviours)
        return f"http://127.0.0.1:{self.port}/{prefix}"

    def next_behaviour(self, prefix: str) -> str:
        with self._lock:
            script = self._scripts.get(prefix) or ["ok"]
            return script.pop(0) if len(script) > 1 else script[0]

    def seen(self, prefix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["prefix"] == prefix and r["path"].endswith("/v1/messages")]


def request_problem(body: Any) -> str | None:
    """What the real API would refuse with invalid_request_error, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    if "system" in body and not isinstance(body["system"], (str, list)):
        return "system: Input should be a valid string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    expected = "user"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if m["role"] != expected:
            return "messages: roles must alternate between \"user\" and \"assistant\", starting with \"user\""
        if not isinstance(m.get("content"), (str, list)) or not m["content"]:
            return f"messages.{i}.content: must be non-empty"
        expected = "assistant" if expected == "user" else "user"
    temperature = body.get("temperature", 1.0)
    if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1:
        return "temperature: Input should be less than or equal to 1"
    return None


def message_body(text: str, model: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 42, "output_tokens": max(1, len(text.split()))}}


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeAnthropic

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def _auth_problem(self) -> bool:
        if self.headers.get("x-api-key") != API_KEY:
            self._json(401, error_body("authentication_error", "invalid x-api-key"))
            return True
        if self.headers.get("anthropic-version") != API_VERSION:
            self._json(400, error_body("invalid_request_error", "anthropic-version header is required"))
            return True
        return False

    def do_GET(self) -> None:
        self.state.requests.append({"prefix": self.path.strip("/").split("/")[0], "path": self.path, "body": None,
                                    "headers": dict(self.headers)})
        if self._auth_problem():
            return
        if self.path.endswith("/v1/models"):
            self._json(200, {"data": [{"type": "model", "id": m} for m in MODELS], "has_more": False})
        else:
            self._json(404, error_body("not_found_error", "no such route"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        proxied = self.path.startswith(("http://", "https://"))
        if proxied:  # absolute form, as a client sends it to a forward proxy: keep the path part
            self.path = "/" + self.path.split("://", 1)[1].partition("/")[2]
        prefix = self.path.strip("/").split("/")[0]
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.state.requests.append({"prefix": prefix, "path": self.path, "body": body, "headers": dict(self.headers),
                                    "at": time.monotonic(), "proxied": proxied})
        if not self.path.endswith("/v1/messages"):
            self._json(404, error_body("not_found_error", "no such route"))
            return
        if self._auth_problem():
            return
        problem = request_problem(body)
        if problem:
            self._json(400, error_body("invalid_request_error", problem))
            return
        kind, _, arg = self.state.next_behaviour(prefix).partition(":")
        if kind == "hang":
            time.sleep(float(arg or 30))
            kind, arg = "ok", ""
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if kind == "429":
            self._json(429, error_body("rate_limit_error", "slow down"), {"retry-after": arg} if arg else {})
            return
        if kind in ("529", "500"):
            self._json(int(kind), error_body("overloaded_error" if kind == "529" else "api_error", "injected"))
            return
        if kind == "malformed":
            self._json(200, b'{"type": "message", "content": [')
            return
        text = "" if kind == "empty" else (arg or DEFAULT_TEXT)
        if body.get("stream"):
            self._stream(text, body["model"], kind)
        else:
            self._json(200, message_body(text, body["model"]))

    def _event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _stream(self, text: str, model: str, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        start = message_body("", model)
        start["usage"]["output_tokens"] = 0
        self._event("message_start", {"type": "message_start", "message": start})
        self._event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
        self._event("ping", {"type": "ping"})
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            self._event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}})
            if kind == "stream-error":
                self._event("error", error_body("overloaded_error", "Overloaded"))
                return
        if kind == "stream-nostop":
            return
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                      "usage": {"output_tokens": len(words)}})
        self._event("message_stop", {"type": "message_stop"})

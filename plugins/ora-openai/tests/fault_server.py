"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions wire format and
misbehaves on demand.

Each test gets its own prefix: ``base_url = server.url(name)``; ``server.script(name, [...])``
sets the behaviours its requests meet, one per request, the last one repeating:

    ok | ok:<text>        200 with a completion (streamed as SSE when the body asks for it)
    429 | 429:<seconds>   rate limited, with Retry-After when given
    500 | 503 | 401 | 400 an HTTP error with an OpenAI-style error body
    malformed             200 whose body is not JSON
    empty                 200 whose message content is ""
    hang:<seconds>        sleep, then answer ok (a client with a shorter timeout gives up)
    drop                  close the connection without a response
    truncated             200 promising a longer body than it sends, then the connection closes
    garbage               bytes that are not an HTTP response, then the connection closes
    stream-drop           (streaming) two chunks, then the connection closes mid-stream
    stream-nodone         (streaming) every chunk, a clean close, but no ``data: [DONE]``
    stream-slow:<s>[:<text>] (streaming) every chunk, each after a pause of <s> seconds
    stream-error          (streaming) two chunks, ``data: {"error": ...}``, then ``[DONE]`` (vLLM)
    stream-error-line     (streaming) two chunks, a bare ``error: {...}`` line, then ``data: [DONE]``
                          (llama.cpp's server, 2025 builds)
    stream-abort          (streaming) two chunks, then ``finish_reason: "abort"`` and ``[DONE]`` (vLLM's
                          engine abort)
    stream-ctx            (streaming) no chunk, an ``error`` object saying the prompt exceeds the context
                          window, then ``[DONE]``
    stream-empty          (streaming) 200 and a clean end of the body, no event at all (what
                          llama-cpp-python's server sends when the request fails before its first token)
    ctx:<shape>           the body a server sends for a prompt over its context window (``CONTEXT_BODIES``:
                          llama-cpp-python, openai, vllm, vllm-new, llama.cpp)

A streamed completion ends with a ``finish_reason: "stop"`` chunk and, when the request asks
``stream_options.include_usage``, a usage chunk with empty ``choices`` (as OpenAI sends it).

Every request is recorded (prefix, path, JSON body, headers, client port, time). A request in
absolute form (``POST http://host/prefix/...``, as a client sends it to a forward proxy) is
answered like any other and recorded with ``proxied=True``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = "Paris is the capital of France."

#: (status, body) each server answers for a prompt over its context window.
CONTEXT_BODIES: dict[str, tuple[int, dict[str, Any]]] = {
    # what llama-cpp-python 0.3.36's server answered here for a 3127-token prompt with --n_ctx 2048
    "llama-cpp-python": (400, {"error": {
        "message": "This model's maximum context length is 2048 tokens. However, you requested 3151 tokens "
                   "(3127 in the messages, 24 in the completion). Please reduce the length of the messages or "
                   "completion.", "type": "invalid_request_error", "param": "messages",
        "code": "context_length_exceeded"}}),
    "openai": (400, {"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9013 "
                   "tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
        "param": "messages", "code": "context_length_exceeded"}}),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
                   "requested 5000 tokens (4488 in the messages, 512 in the completion). Please reduce the length "
                   "of the messages or completion.", "type": "BadRequestError", "param": None, "code": 400}),
    "vllm-new": (400, {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: 512. This model's "
                                 "maximum context length is 4096 tokens and your request has 3900 input tokens "
                                 "(512 > 4096 - 3900).", "type": "BadRequestError", "param": None, "code": 400}}),
    "llama.cpp": (400, {"error": {"code": 400, "message": "request (4476 tokens) exceeds the available context size "
                                  "(4096 tokens), try increasing it", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": 4476, "n_ctx": 4096}}),
}


@dataclass
class Seen:
    prefix: str
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    client_port: int
    at: float = field(default_factory=time.monotonic)
    proxied: bool = False


class FaultServer:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self._scripts: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self.models = ["test-model", "SmolLM2-135M-Instruct"]
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, prefix: str) -> str:
        return f"http://127.0.0.1:{self.port}/{prefix}"

    def script(self, prefix: str, behaviours: list[str]) -> str:
        with self._lock:
            self._scripts[prefix] = list(behaviours)
        return self.url(prefix)

    def next_behaviour(self, prefix: str) -> str:
        with self._lock:
            script = self._scripts.get(prefix) or ["ok"]
            return script.pop(0) if len(script) > 1 else script[0]

    def seen(self, prefix: str, path_end: str = "/chat/completions") -> list[Seen]:
        return [r for r in self.requests if r.prefix == prefix and r.path.endswith(path_end)]


def completion_body(text: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": len(text.split()), "total_tokens": 11 + len(text.split())},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable
    server_state: FaultServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _record(self) -> tuple[str, dict[str, Any]]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        proxied = self.path.startswith(("http://", "https://"))
        if proxied:  # absolute form: the path is what follows the authority
            self.path = "/" + self.path.split("://", 1)[1].partition("/")[2]
        prefix = self.path.strip("/").split("/", 1)[0]
        self.server_state.requests.append(Seen(prefix, self.command, self.path, body, dict(self.headers),
                                               self.client_address[1], proxied=proxied))
        return prefix, body

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (hang)
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._record()
        if self.path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": m, "object": "model"}
                                                             for m in self.server_state.models]})
        else:
            self._send_json(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        prefix, body = self._record()
        behaviour = self.server_state.next_behaviour(prefix)
        kind, _, arg = behaviour.partition(":")
        model = str(body.get("model") or "test-model")
        if kind == "hang":
            time.sleep(float(arg or 30))
            kind, arg = "ok", ""
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if kind == "ctx":
            status, payload = CONTEXT_BODIES[arg]
            self._send_json(status, payload)
            return
        if kind.isdigit():
            status = int(kind)
            headers = {"Retry-After": arg} if (status == 429 and arg) else {}
            self._send_json(status, {"error": {"message": f"injected HTTP {status}", "type": "test"}}, headers)
            return
        if kind == "malformed":
            self._send_json(200, b'{"choices": [ {"message": oops')
            return
        if kind in ("truncated", "garbage"):
            self.close_connection = True
            with contextlib.suppress(OSError):
                if kind == "truncated":  # 40 of the 500 bytes announced
                    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
                    self.wfile.write(head + json.dumps(completion_body("x", model)).encode()[:40])
                else:
                    self.wfile.write(b"THIS IS NOT HTTP\r\n\r\n")
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        pause = 0.0
        if kind == "stream-slow":
            seconds, _, arg = arg.partition(":")  # stream-slow:<seconds>[:<text>]
            pause = float(seconds or 0.2)
        text = "" if kind == "empty" else (arg or DEFAULT_TEXT)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(text, model, kind, pause, usage=usage)
            return
        self._send_json(200, completion_body(text, model))

    def _event(self, payload: str, field: str = "data") -> None:
        self.wfile.write(f"{field}: {payload}\n\n".encode())
        self.wfile.flush()

    def _stream(self, text: str, model: str, kind: str, pause: float = 0.0, *, usage: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if kind == "stream-empty":
            return
        if kind == "stream-ctx":
            self._event(json.dumps({"error": CONTEXT_BODIES["llama.cpp"][1]["error"]}))
            self._event("[DONE]")
            return
        words = text.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        for i, piece in enumerate(pieces):
            if kind == "stream-drop" and i == 2:
                with contextlib.suppress(OSError):
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if i == 2 and kind in ("stream-error", "stream-error-line"):
                error = {"error": {"message": "injected mid-stream failure", "type": "server_error", "code": 500}}
                self._event(json.dumps(error) if kind == "stream-error" else json.dumps(error["error"]),
                            field="data" if kind == "stream-error" else "error")
                self._event("[DONE]")
                return
            if i == 2 and kind == "stream-abort":
                self._event(json.dumps({"id": "c", "object": "chat.completion.chunk", "model": model,
                                        "choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}))
                self._event("[DONE]")
                return
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            if pause and i:
                time.sleep(pause)
            self._event(json.dumps(chunk))
        self._event(json.dumps({"id": "c", "object": "chat.completion.chunk", "model": model,
                                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        if usage:
            self._event(json.dumps({"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [],
                                    "usage": {"prompt_tokens": 11, "completion_tokens": len(pieces),
                                              "total_tokens": 11 + len(pieces)}}))
        if kind != "stream-nodone":
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

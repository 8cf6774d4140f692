"""The ``options`` table of an ``openai`` backend, validated with field-named errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from ora_core.api import ConfigError, PluginOptions


class OpenAIOptions(PluginOptions):
    """``[backends.<name>] options`` of a ``openai`` backend, declared as the factory's ``options_model``:
    the kernel refuses an unknown key or a wrong type before a turn runs.

    Streaming inside a turn (``stream = true``): every model call of the backend reads its reply as
    a server-sent-event stream and returns it assembled (text, ``finish_reason``, token counts,
    latency), instead of waiting for one JSON answer. What it buys: a reply that breaks, stalls or
    errs half-way fails as a typed ``BackendError`` whose ``partial_output`` is the text received so
    far (the trace keeps it as the call's output), and a Phase A reply that does not start with its
    header is stopped early (``finish_reason = "stop_unless"``). A stream counts as ended only on
    ``data: [DONE]``: a close without it (a killed server, a proxy cutting the connection),
    an ``error`` object in the stream, or ``finish_reason`` ``abort``/``error`` is a failure, never a
    short answer. Retries (``max_retries``) happen only while no text has arrived; the whole stream
    must end within ``timeout_s``, like one non-streamed attempt.

    ``stream_usage = true`` asks for the token counts in a final chunk (``stream_options:
    {include_usage: true}``; OpenAI, vLLM, llama.cpp's server and llama-cpp-python's answer it); set
    it with ``stream = true``, or the counts are 0 and each turn names that in a
    ``<step>-backend-warning`` contingency.

    A prompt over the model's context window is ``BackendContextExceeded`` (kind
    ``context_window``), streamed or not: its message names the window and the prompt's size when
    the server says them, and it is never retried (see ``ora_openai.http``).
    """

    model_config = ConfigDict(extra="forbid")

    connect_timeout_s: float = Field(default=10.0, gt=0)
    backoff_initial_s: float = Field(default=0.5, ge=0)  # exponential backoff with jitter, when
    backoff_max_s: float = Field(default=8.0, ge=0)  # the server gives no Retry-After
    retry_after_max_s: float = Field(default=60.0, ge=0)  # a longer Retry-After fails over instead
    retry_on_timeout: bool = False  # a timed-out generation is usually an overloaded server
    breaker_failures: int = Field(default=5, ge=1)  # consecutive failures that open the circuit
    breaker_reset_s: float = Field(default=30.0, gt=0)  # how long it stays open before one probe
    # "aiohttp": httpx requests over aiohttp's C-accelerated HTTP/1.1 client (the fast default);
    # "httpcore": httpx's own transport, its pool sharded (see ora_core/http_transport.py)
    transport: Literal["aiohttp", "httpcore"] = "aiohttp"
    max_connections: int = Field(default=100, ge=1)
    # idle connections kept for reuse; 0: a new connection per request (aiohttp keeps any idle
    # connection up to max_connections when this is above 0; httpcore caps them at this number)
    max_keepalive: int = Field(default=50, ge=0)
    keepalive_expiry_s: float = Field(default=5.0, gt=0)  # an idle pooled connection is closed after this
    pool_shard_size: int = Field(default=8, ge=1)  # connections per pool shard (httpcore only)
    cache: bool = False  # opt in: identical requests are answered from disk
    cache_dir: str | None = None  # default: <user cache dir>/ora/openai-responses
    cache_ttl_s: float | None = Field(default=None, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)
    # read every reply of a turn as a server-sent-event stream (see the class docstring)
    stream: bool = False
    stream_usage: bool = False  # ask for usage in the final stream chunk (OpenAI, vLLM, llama.cpp)
    # How a caller's JSON schema (``CompletionParams.response_schema``) goes to the server:
    # "json_object": ``{"type": "json_object", "schema": ...}``: llama-cpp-python's server
    #   (``python -m llama_cpp.server``, 0.3.x: it refuses any other type) constrains the reply with the
    #   schema's grammar; vLLM accepts it as JSON mode (one JSON object, the schema unenforced: the
    #   caller validates the reply);
    # "json_schema": ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``: OpenAI,
    #   vLLM and llama.cpp's own ``llama-server`` enforce the schema;
    # "off": no response_format is sent and callers read replies as text. A server that rejects the
    #   field (HTTP 400/422) fails as BackendBadResponse naming this option.
    response_format: Literal["json_object", "json_schema", "off"] = "json_object"
    json_schema_strict: bool = True  # the json_schema form's "strict"


def parse_options(raw: dict[str, Any], backend_type: str) -> OpenAIOptions:
    try:
        return OpenAIOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            + (f" (got {err['input']!r})" if err["type"] != "extra_forbidden" else "")
            for err in exc.errors())
        raise ConfigError(f"invalid options for a {backend_type!r} backend: {problems}", field="options") from None

"""``[plugins.otel]``: where the spans go and what they may carry, declared to the kernel
(``ora_register_options``) so an unknown key or a wrong type is refused before a turn runs.

The export is off unless the table turns it on: ``endpoint = "http://collector:4318"`` (or
``enabled = true``, which sends to ``http://localhost:4318``). ``enabled = false`` keeps it off
with the endpoint still written down.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from ora_core.api import PluginOptions

TABLE = "otel"
DEFAULT_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"


class OtelOptions(PluginOptions):
    """``[plugins.otel]``."""

    #: On or off; unset: on exactly when ``endpoint`` is set.
    enabled: bool | None = None
    #: The collector's OTLP/HTTP base URL (``http://host:4318``); ``/v1/traces`` is added unless the
    #: URL already ends with it.
    endpoint: str | None = None
    #: Extra HTTP headers of every export (a hosted collector's ``Authorization``): credentials here are
    #: secrets of the configuration, redacted wherever Ora prints or traces.
    headers: dict[str, str] = Field(default_factory=dict)
    #: Prompts, step inputs and outputs as ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
    #: Off by default: message content leaves the machine only when asked for.
    capture_content: bool = False
    #: The longest piece of content kept in one attribute; longer ones are cut and say by how much.
    max_content_chars: int = Field(default=16384, ge=256)
    #: ``service.name`` of the exported resource.
    service_name: str = Field(default="ora", min_length=1)
    #: How long one export may take, retries included; past it the batch is a named failure.
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    #: How often finished spans are sent (the batch span processor's schedule delay).
    export_interval_s: float = Field(default=1.0, gt=0, le=60)
    #: Spans waiting for the collector, at most; past it new spans are dropped and named (memory stays
    #: bounded while a collector is down).
    max_queue_spans: int = Field(default=2048, ge=16)
    #: Spans per export request.
    max_batch_spans: int = Field(default=512, ge=1)
    #: How long the process's exit waits for spans still queued.
    exit_timeout_s: float = Field(default=10.0, ge=0, le=300)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {value!r} (the collector's OTLP/HTTP address, "
                             "e.g. http://127.0.0.1:4318)")
        return value

    @property
    def active(self) -> bool:
        """The sink exports: ``enabled = true``, or an ``endpoint`` without ``enabled = false``."""
        return self.enabled if self.enabled is not None else self.endpoint is not None

    @property
    def traces_url(self) -> str:
        return traces_url(self.endpoint or DEFAULT_ENDPOINT)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (``/v1/traces`` added once)."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def describe(options: OtelOptions) -> str:
    """One line: is the export on, where does it go, what does it carry."""
    if not options.active:
        why = "enabled = false" if options.enabled is False else "no [plugins.otel] endpoint"
        return f"off ({why}): turns are not exported; set [plugins.otel] endpoint = \"http://host:4318\""
    content = "with message content" if options.capture_content else "without message content"
    return f"on: spans to {options.traces_url}, {content}, timeout {options.timeout_s:g} s"

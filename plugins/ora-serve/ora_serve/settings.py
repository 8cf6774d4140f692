"""What one ``ora serve`` runs with: ``[plugins.serve]`` of the configuration (``ServeOptions``,
declared to the kernel, so an unknown key or a wrong type is refused before the server starts), the
command's flags over it, handed to every worker process as ``ServeSettings`` in one environment
variable (``ORA_SERVE_SETTINGS``, JSON): uvicorn's workers import the app factory, they take no
arguments.

The bearer key is never in the settings: it is read from the variable ``api_key_env`` names
(``ORA_SERVE_API_KEY`` by default; ``--api-key`` sets it for the workers), and the server adds
``[plugins.serve] api_key_env`` to the configuration it opens, so the kernel's redaction layer
knows the key as a secret of the configuration: replaced in every trace, result and message.
"""

from __future__ import annotations

import json
import os

from pydantic import BaseModel, ConfigDict, Field

from ora_core.api import PluginOptions

TABLE = "serve"
SETTINGS_ENV = "ORA_SERVE_SETTINGS"
DEFAULT_KEY_ENV = "ORA_SERVE_API_KEY"


def default_max_turns() -> int:
    """Concurrent turns per worker when nothing says otherwise: four per core (a turn mostly waits
    on its model servers; on the bundled local model it is CPU-bound, set ``--max-turns`` lower)."""
    return 4 * (os.cpu_count() or 1)


class ServeOptions(PluginOptions):
    """``[plugins.serve]``: the server's limits (each flag of ``ora serve`` overrides its key)."""

    #: The environment variable holding the bearer key (unset or empty: no authentication).
    api_key_env: str = Field(default=DEFAULT_KEY_ENV, min_length=1)
    #: Turns one worker runs at once; past it a request is answered 429 with ``Retry-After``.
    max_turns: int | None = Field(default=None, ge=1)
    #: The longest prompt (the last user message) taken, in characters; longer: 400 naming it.
    max_prompt_chars: int = Field(default=100_000, ge=1)
    #: The largest request body taken, in bytes; larger: 413.
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    #: On SIGTERM, how long the turns in flight may take to finish before they are cancelled
    #: (reason ``shutdown``, their traces closed).
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    #: Access lines carry the prompt (redacted) when on; off by default.
    log_prompts: bool = False
    #: An events request following a turn another worker runs ends with an ``error`` event when the
    #: turn's event journal has not grown for this long (that worker has likely died).
    events_idle_timeout_s: float = Field(default=60.0, gt=0)


class ServeSettings(BaseModel):
    """Everything a worker needs, as the command resolved it."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    #: The configuration file (``--config``); None: Ora's own lookup (``$ORA_CONFIG``, ``./ora.toml``...).
    config: str | None = None
    api_key_env: str = DEFAULT_KEY_ENV
    max_turns: int = Field(default_factory=default_max_turns, ge=1)
    max_prompt_chars: int = 100_000
    max_body_bytes: int = 1_048_576
    shutdown_grace_s: float = 10.0
    log_prompts: bool = False
    events_idle_timeout_s: float = 60.0

    def to_env(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeSettings:
        """The settings the command left in ``ORA_SERVE_SETTINGS`` (defaults when it is unset); a
        malformed value is a ``ValueError`` naming the variable."""
        raw = (os.environ if environ is None else environ).get(SETTINGS_ENV)
        if not raw:
            return cls()
        try:
            return cls.model_validate(json.loads(raw))
        except ValueError as exc:
            raise ValueError(f"{SETTINGS_ENV} is not valid server settings: {exc}") from None

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

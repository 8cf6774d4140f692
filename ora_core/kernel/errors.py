"""One exception hierarchy whose names say what failed.

A backend failure is never returned as text (seed 000, failure #9): every backend raises a
``BackendError`` subclass carrying the provider, the model and the raw detail.

Errors that carry what a server or a plugin said (``BackendError``, ``RetrievalError``,
``VerifierError``) scrub credential shapes out of their message and detail when they are built
(``redaction.scrub_shapes``: a key the server echoes back never becomes an exception's text), and
``redact(redactor)`` replaces the configuration's own secrets in them where the kernel records them.
"""

from __future__ import annotations

from typing import Any

from ora_core.kernel.redaction import scrub_shapes


class OraError(Exception):
    """Base of every error Ora raises on purpose."""


class ConfigError(OraError):
    """The configuration file or an environment override is malformed.

    ``source`` names the file (or environment variable) and ``field`` the dotted field path.
    """

    def __init__(self, message: str, *, source: str = "", field: str = "") -> None:
        self.source = source
        self.field = field
        where = source + (f": {field}" if field else "") if source else field
        super().__init__(f"{where}: {message}" if where else message)


class UsageError(OraError):
    """The caller asked for something that cannot run (an empty prompt, an unknown option value):
    refused before any model call; ``ora`` exits 2."""


class PluginError(OraError):
    """A plugin failed to load or register (fatal only under ``ORA_STRICT_PLUGINS=1``)."""


class RegistrationError(PluginError):
    """A component could not be registered: bad shape, duplicate name, unmet assumptions."""


class ModeError(OraError):
    """A mode file is missing, malformed or has an empty required section."""


class BackendError(OraError):
    """A model backend failed. Subclasses say how; never converted into model text."""

    kind = "backend_error"

    def __init__(
        self, message: str, *, provider: str = "", model: str = "", detail: str = "",
        partial_output: str = "",
    ) -> None:
        self.provider = provider
        self.model = model
        self.detail = scrub_shapes(detail) if isinstance(detail, str) else detail
        #: The model output the backend had received when it failed (a stream that broke, stalled or
        #: carried an error after some text): kept verbatim as the evidence of what the model said,
        #: never returned as an answer. "" when nothing had arrived (or the call was not streamed).
        self.partial_output = partial_output if isinstance(partial_output, str) else ""
        super().__init__(scrub_shapes(message) if isinstance(message, str) else message)

    def redact(self, redactor: Any) -> BackendError:
        """Replace ``redactor``'s secrets (and credential shapes) in the message and the detail, in
        place; returns the error itself (the kernel does this before it records or raises one)."""
        if self.args and isinstance(self.args[0], str):
            self.args = (redactor.error_text(self.args[0]), *self.args[1:])
        if isinstance(self.detail, str):
            self.detail = redactor.error_text(self.detail)
        if self.partial_output:  # model text: the configured secrets only (no shape scrubbing of prose)
            self.partial_output = redactor.text(self.partial_output)
        return self

    def describe(self) -> dict[str, str]:
        """A JSON-ready description for traces and contingency logs."""
        return {
            "kind": self.kind,
            "error_class": type(self).__name__,
            "message": str(self),
            "provider": self.provider,
            "model": self.model,
            "detail": self.detail[:2000],
            # how much output had arrived before the failure (the text itself is in the call record)
            "partial_output_chars": str(len(self.partial_output)),
        }


class BackendTimeout(BackendError):
    kind = "timeout"


class BackendRateLimited(BackendError):
    kind = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: str) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kw)


class BackendAuthError(BackendError):
    kind = "auth"


class BackendSessionExpired(BackendError):
    kind = "session_expired"


class BackendUnavailable(BackendError):
    kind = "unavailable"


class BackendBadResponse(BackendError):
    kind = "bad_response"


class BackendContextExceeded(BackendError):
    """The prompt (with the reply's token budget) does not fit the model's context window: the
    server refused it before generating. Retrying the same request cannot succeed, so no backend
    retries it; the message names the window and the prompt size when the server said them
    (``context_window``, ``prompt_tokens``: ``None`` when it did not)."""

    kind = "context_window"

    def __init__(self, message: str, *, context_window: int | None = None, prompt_tokens: int | None = None,
                 **kw: Any) -> None:
        self.context_window = context_window
        self.prompt_tokens = prompt_tokens
        super().__init__(message, **kw)


class _ScrubbedError(OraError):
    """An error whose message may quote a server: credential shapes are scrubbed out of it."""

    def __init__(self, message: Any = "", *args: Any) -> None:
        super().__init__(scrub_shapes(message) if isinstance(message, str) else message, *args)


class RetrievalError(_ScrubbedError):
    """A retriever failed; context assembly records it in ``rag-failures.jsonl``."""


class RetrievalTimeout(RetrievalError):
    """A retriever did not return within ``[retrieval] timeout_s``."""


class VerifierError(_ScrubbedError):
    """A verifier raised; the cascade records the verdict as BROKEN, never PASS."""


class VerifierTimeout(VerifierError):
    """A verifier did not return within ``[verification] timeout_s``: BROKEN, never PASS."""

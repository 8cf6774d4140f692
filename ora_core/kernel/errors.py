"""One exception hierarchy whose names say what failed.

A backend failure is never returned as text (seed 000, failure #9): every backend raises a
``BackendError`` subclass carrying the provider, the model and the raw detail.
"""

from __future__ import annotations


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
        self, message: str, *, provider: str = "", model: str = "", detail: str = ""
    ) -> None:
        self.provider = provider
        self.model = model
        self.detail = detail
        super().__init__(message)

    def describe(self) -> dict[str, str]:
        """A JSON-ready description for traces and contingency logs."""
        return {
            "kind": self.kind,
            "error_class": type(self).__name__,
            "message": str(self),
            "provider": self.provider,
            "model": self.model,
            "detail": self.detail[:2000],
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


class RetrievalError(OraError):
    """A retriever failed; context assembly records it in ``rag-failures.jsonl``."""


class VerifierError(OraError):
    """A verifier raised; the cascade records the verdict as BROKEN, never PASS."""

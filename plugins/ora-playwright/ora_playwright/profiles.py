"""Selector profiles: where a chat web UI keeps its prompt box, its replies and its warnings.

A profile is plain CSS selectors (evaluated with ``document.querySelectorAll``) and regular
expressions. The built-in ones (``chatgpt``, ``claude``, ``gemini``) follow those sites' markup
as last seen; sites change, so every field can be overridden in ``options.selectors``, and a
whole profile can be written as a TOML file (``profile = "generic"``, ``profile_file = ...``)
with the same keys as ``SelectorProfile``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ora_core.api import ConfigError

ErrorKind = Literal["session_expired", "rate_limited", "auth", "unavailable"]


class SelectorProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    url: str  # every call opens this page: a fresh conversation, no state between calls
    input: str  # the prompt box (textarea or contenteditable)
    send: str | None = None  # the send button; None: press Enter in the prompt box
    reply: str  # every assistant message; the last one is the reply
    busy: str | None = None  # visible while the site is generating (e.g. a stop button)
    login_wall: list[str] = Field(default_factory=list)  # visible when logged out
    session_expired: list[str] = Field(default_factory=list)
    rate_limited: list[str] = Field(default_factory=list)
    error_banner: list[str] = Field(default_factory=list)
    # Error text a site prints *inside* the reply bubble: matched against the reply's start.
    reply_error_text: dict[ErrorKind, list[str]] = Field(default_factory=dict)
    stable_ms: int = Field(default=1500, ge=50)  # reply unchanged this long (and not busy): done
    ready_timeout_s: float = Field(default=30.0, gt=0)  # for the prompt box (or a wall) to appear
    poll_ms: int = Field(default=100, ge=10)

    @field_validator("reply_error_text")
    @classmethod
    def _patterns_compile(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for kind, patterns in value.items():
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{kind}: bad regular expression {pattern!r}: {exc}") from None
        return value


_COMMON_REPLY_ERRORS: dict[ErrorKind, list[str]] = {
    "session_expired": [r"(?i)^\W*(your )?session (has )?expired", r"(?i)^\W*please (log|sign) in again"],
    "rate_limited": [r"(?i)^\W*(you'?ve reached|you have reached) (the|our|your) .{0,40}limit",
                     r"(?i)^\W*too many requests"],
    "unavailable": [r"(?i)^\W*(something went wrong|an error occurred|network error|error in (message|body) stream)"],
}

BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "chatgpt": {
        "name": "chatgpt", "url": "https://chatgpt.com/",
        "input": "#prompt-textarea", "send": "button[data-testid='send-button']",
        "reply": "[data-message-author-role='assistant']", "busy": "button[data-testid='stop-button']",
        "login_wall": ["button[data-testid='login-button']", "[data-testid='login-screen']"],
        "session_expired": ["[data-testid='session-expired-modal']"],
        "rate_limited": ["[data-testid='rate-limit-banner']"],
        "error_banner": ["[role='alert'] .text-token-text-error"],
        "reply_error_text": _COMMON_REPLY_ERRORS,
    },
    "claude": {
        "name": "claude", "url": "https://claude.ai/new",
        "input": "div[contenteditable='true']", "send": "button[aria-label='Send message']",
        "reply": "div.font-claude-message, [data-testid='assistant-message']", "busy": "[data-is-streaming='true']",
        "login_wall": ["input#email", "[data-testid='login-form']"],
        "rate_limited": ["[data-testid='rate-limit-banner']"],
        "error_banner": ["[data-testid='error-banner']"],
        "reply_error_text": _COMMON_REPLY_ERRORS,
    },
    "gemini": {
        "name": "gemini", "url": "https://gemini.google.com/app",
        "input": "rich-textarea .ql-editor", "send": "button.send-button",
        "reply": "message-content", "busy": "button.stop, .loading-indicator",
        "login_wall": ["a[href*='accounts.google.com/ServiceLogin']", "a[href*='accounts.google.com/signin']"],
        "rate_limited": ["[data-test-id='quota-exceeded']"],
        "error_banner": ["snack-bar-container .error"],
        "reply_error_text": _COMMON_REPLY_ERRORS,
    },
}


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def load_profile(name: str, profile_file: str | None = None,
                 overrides: dict[str, Any] | None = None) -> SelectorProfile:
    """A built-in profile, or a TOML file for ``generic``, with ``overrides`` applied on top."""
    if profile_file:
        path = Path(profile_file).expanduser()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the selector profile: {exc.strerror or exc}", source=str(path),
                              field="options.profile_file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"malformed TOML: {exc}", source=str(path)) from None
        data.setdefault("name", path.stem if name == "generic" else name)
        source = str(path)
    elif name in BUILTIN_PROFILES:
        data = dict(BUILTIN_PROFILES[name])
        source = f"built-in profile {name!r}"
    elif name == "generic":
        raise ConfigError("the generic profile needs options.profile_file (a TOML selector profile)",
                          field="options.profile_file")
    else:
        known = ", ".join([*BUILTIN_PROFILES, "generic"])
        raise ConfigError(f"unknown selector profile {name!r} (known: {known})", field="options.profile")
    data.update(overrides or {})
    try:
        return SelectorProfile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid selector profile: {_problems(exc)}", source=source,
                          field="options.selectors" if overrides else "") from None

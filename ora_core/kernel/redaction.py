"""One redaction layer between every value and every output.

A ``Redactor`` knows the secrets of the configuration in force (``config_secrets``): API keys
(``api_key``, or the variable ``api_key_env`` names), every value of a ``headers`` table whose name
looks like a credential (``Authorization``, ``X-Api-Key``, ``Api-Key``, ``Cookie``, any name with
key/token/secret/password/auth/session/cookie/signature in it), every other configuration value whose
key names a credential (``password``, ``token``, ``client_secret``, ``*_env`` references to one), and
in every URL the userinfo and the credential-like query parameters. Each secret is known in the
spellings it takes on the way out: as written, percent-encoded, JSON-escaped, the token behind its
``Bearer``/``Basic`` scheme, the ``user:password`` of a Basic header and its base64, each cookie value.

Two strengths:

- ``text`` / ``data``: the configured secrets, replaced wherever they occur (trace events, the
  turn's result, standard output). One compiled pattern for all of them, longest first; a string
  that holds none of them is returned as it was (the same object), and so is a container. ``data``
  first asks whether the value holds a secret at all: with orjson installed (ora-trace-fs depends on
  it) the value is serialised once in C and searched for each secret's shortest spellings (measured:
  ~4 µs for a typical event beside ~12 µs walking it in Python); only a value that does is walked
  and copied. A configuration without secrets pays nothing.
- ``error_text`` / ``error_data``: the same, plus the shapes credentials take in text nobody
  configured (``scrub_shapes``): ``sk-…`` keys, ``Bearer``/``Basic``/``Token`` credentials, JWTs,
  well-known vendor tokens, ``api_key=``/``token=``/``password=`` parameters, ``"Authorization":
  "…"``-style pairs and passwords in URLs. For what servers say and exceptions carry: error
  messages, details, diagnostics, standard error. Not for answers: a model explaining what an
  ``sk-`` key looks like keeps its text.

A replacement names what was removed and nothing of it: ``[REDACTED:authorization-header]``,
``[REDACTED:url-password]``, ``[REDACTED:sk-key]``; an API key is the historical ``[REDACTED]``.
A secret shorter than ``MIN_SECRET_CHARS`` cannot be replaced in free text without destroying it
(``"abc"`` is in too many words): the configuration should not hold one, and ``ora config show``
masks it by its place all the same.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from typing import Any, NamedTuple

# This module is imported by ``errors`` (so by every ``ora`` command, ``--help`` included): what it
# needs beyond ``re`` (base64, json, urllib, orjson, its compiled patterns) is loaded on first use.

MIN_SECRET_CHARS = 4
#: A cookie's values are often short flags (``lang=en``): only long ones are treated as secrets.
MIN_COOKIE_VALUE_CHARS = 8
API_KEY = "api-key"
MASK = "**********"

#: A ``headers`` entry whose name holds one of these is a credential (``X-Api-Key``, ``Cookie``,
#: ``Proxy-Authorization``, ``X-Auth-Token``, ``X-Session-Id``...).
_HEADER_WORDS = ("key", "token", "secret", "passw", "pwd", "auth", "cookie", "session", "signature", "credential")
#: A configuration key (outside ``headers``) that names a credential: whole segments, so that
#: ``max_tokens`` and ``keepalive_expiry_s`` are not one.
_KEY_SEGMENTS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "passphrase",
                           "credential", "credentials", "auth", "authorization", "cookie", "cookies",
                           "signature", "sessionid", "bearer"})
_QUERY_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "sig", "signature", "auth",
                          "credential", "credentials", "session", "sessionid", "code"})
_SCHEMES = frozenset({"bearer", "token", "basic", "digest", "apikey", "key"})


class Secret(NamedTuple):
    """One secret value and what it is (``api-key``, ``authorization-header``, ``url-password``)."""

    value: str
    kind: str = ""


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced with."""
    return "[REDACTED]" if not kind or kind == API_KEY else f"[REDACTED:{kind}]"


def _kind(*parts: str) -> str:
    return "-".join(p for p in (re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-") for part in parts) if p)


def credential_key(name: str) -> bool:
    """``name`` (a configuration key) names a credential: ``password``, ``api_key``, ``client_secret``,
    ``x-auth-token``; not ``max_tokens``, ``api_key_env`` (a variable's name) or ``key_file``."""
    segments = [s for s in re.split(r"[-_.\s]+", name.lower()) if s]
    return bool(segments) and segments[-1] in _KEY_SEGMENTS


def credential_header(name: str) -> bool:
    """``name`` (an HTTP header) carries a credential."""
    lowered = name.lower()
    return any(word in lowered for word in _HEADER_WORDS)


def credential_param(name: str) -> bool:
    """``name`` (a URL query parameter) carries a credential: ``api_key``, ``access_token``, ``sig``."""
    return re.split(r"[-_]", name.strip().lower())[-1] in _QUERY_WORDS


def spellings(value: str) -> Iterator[str]:
    """``value`` as it can appear in output: as written, percent-encoded (in a URL), JSON-escaped."""
    import json
    from urllib.parse import quote

    yield value
    yield quote(value, safe="")
    yield quote(value)  # in a path: the slashes kept
    yield json.dumps(value)[1:-1]
    yield json.dumps(value, ensure_ascii=False)[1:-1]


def header_secrets(name: str, value: str, kind: str | None = None) -> list[Secret]:
    """A credential header's value and the parts a server may echo alone: the token behind its
    scheme, a Basic header's ``user:password`` and password, each long cookie value."""
    kind = kind or _kind(name, "header")
    found = [Secret(value, kind)]
    words = value.split()
    if len(words) == 2 and words[0].lower() in _SCHEMES:
        token = words[1]
        found.append(Secret(token, kind))
        if words[0].lower() == "basic":
            found += _basic_parts(token, kind)
    if "cookie" in name.lower():
        for part in value.split(";"):
            _, eq, cookie = part.strip().partition("=")
            if eq and len(cookie) >= MIN_COOKIE_VALUE_CHARS:
                found.append(Secret(cookie, kind))
    return found


def _basic_parts(token: str, kind: str) -> list[Secret]:
    import base64
    import binascii

    try:
        decoded = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    user, colon, password = decoded.partition(":")
    return [Secret(decoded, kind), Secret(password, kind)] if colon else []


def url_secrets(url: str) -> list[Secret]:
    """The secrets a URL carries: its userinfo password (also as ``user:password`` and that pair's
    base64, what a client sends as Basic auth) and its credential-like query parameters."""
    if "://" not in url:
        return []
    import base64
    from urllib.parse import parse_qsl, quote, unquote, urlsplit

    try:
        parts = urlsplit(url.strip())
        password = parts.password
    except ValueError:
        return []
    found: list[Secret] = []
    if password:
        user = parts.username or ""
        for pw in {password, unquote(password)}:
            found.append(Secret(pw, "url-password"))
        pair = f"{unquote(user)}:{unquote(password)}"
        found.append(Secret(pair, "url-password"))
        found.append(Secret(base64.b64encode(pair.encode()).decode(), "url-password"))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if credential_param(name):
            found.append(Secret(value, _kind("url-query", name)))
            found.append(Secret(quote(value, safe=""), _kind("url-query", name)))
    return found


def mask_url(url: str) -> str:
    """``url`` with its password and credential-like query values replaced by ``MASK`` (user
    name, host, path and other parameters kept): what ``config show`` and tables print."""
    if "://" not in url:
        return url
    from urllib.parse import unquote, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{MASK}@{host}"
    query = parts.query
    if query:
        pieces = []
        for piece in query.split("&"):
            name, eq, _value = piece.partition("=")
            pieces.append(f"{name}={MASK}" if eq and credential_param(unquote(name)) else piece)
        query = "&".join(pieces)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_secrets(node: Any, path: tuple[str, ...] = ()) -> Any:
    """A copy of ``node`` (a configuration dumped as JSON-ready data) with every secret masked by its
    place: credential headers, credential keys (not ``*_env``, which name variables), URL passwords and
    credential query parameters. What ``ora config show`` and ``ora models list`` print."""
    if isinstance(node, Mapping):
        in_headers = bool(path) and path[-1].lower() == "headers"
        out: dict[str, Any] = {}
        for key, value in node.items():
            key = str(key)
            secret = credential_header(key) if in_headers else (
                credential_key(key) and not key.lower().endswith("_env"))
            if secret and isinstance(value, str):
                out[key] = MASK
            elif isinstance(value, str):
                out[key] = mask_url(value)
            else:
                out[key] = mask_secrets(value, (*path, key))
        return out
    if isinstance(node, list):
        return [mask_url(v) if isinstance(v, str) else mask_secrets(v, path) for v in node]
    return node


def _secret_value(value: Any) -> str | None:
    getter = getattr(value, "get_secret_value", None)
    if callable(getter):
        value = getter()
    return value if isinstance(value, str) else None


def _walk_secrets(node: Any, path: tuple[str, ...], env: Mapping[str, str], found: list[Secret]) -> None:
    if isinstance(node, Mapping):
        in_headers = bool(path) and path[-1].lower() == "headers"
        for key, value in node.items():
            key = str(key)
            text = _secret_value(value)
            if text is not None:
                if in_headers:
                    if credential_header(key):
                        found += header_secrets(key, text)
                elif key.lower().endswith("_env") and credential_key(key[:-4]):
                    referenced = env.get(text)
                    if referenced:
                        kind = API_KEY if key.lower() == "api_key_env" else _kind(key[:-4])
                        found += header_secrets(key, referenced, kind)
                elif credential_key(key):
                    kind = API_KEY if key.lower() == "api_key" else _kind(key)
                    found += header_secrets(key, text, kind)
                found += url_secrets(text)
            else:
                _walk_secrets(value, (*path, key), env, found)
    elif isinstance(node, (list, tuple)):
        for item in node:
            text = _secret_value(item)
            if text is not None:
                found += url_secrets(text)
            else:
                _walk_secrets(item, path, env, found)


def config_secrets(config: Any, env: Mapping[str, str] | None = None) -> list[Secret]:
    """Every secret an ``OraConfig`` (or a plain nested mapping) holds or references.

    API keys resolve as the backends resolve them (``api_key``, else the ``api_key_env`` variable);
    a value that is a ``SecretStr`` counts wherever it is."""
    env = os.environ if env is None else env
    dump = getattr(config, "model_dump", None)
    data = dump(mode="python") if callable(dump) else config
    found: list[Secret] = []
    _walk_secrets(data, (), env, found)
    return found


def _expand(secrets: Iterable[Secret | str]) -> dict[str, str]:
    """Each spelling of each secret -> its kind (the first kind named for a value wins)."""
    forms: dict[str, str] = {}
    for secret in secrets:
        value, kind = (secret.value, secret.kind) if isinstance(secret, Secret) else (secret, "")
        if not isinstance(value, str) or len(value) < MIN_SECRET_CHARS:
            continue
        for form in spellings(value):
            if len(form) >= MIN_SECRET_CHARS:
                forms.setdefault(form, kind)
    return forms


# --- shapes: credentials nobody configured, in error text -------------------------------------

_Rules = tuple[tuple[tuple[str, ...], "re.Pattern[str]"], ...]


# Each shape with the lower-case literals one of which any match contains: the text is searched with
# ``in`` (C speed) and a shape's regex runs only where one is there (a regex over every line of
# standard error costs ~40 ns a character; the literal checks cost ~1 µs for a typical line).
_NOT_DONE = r"(?!\[REDACTED)"
_SHAPE_SOURCES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("://",), rf"(?P<url>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"<>]*:)(?P<urlpw>{_NOT_DONE}[^\s/@'\"<>\\]+)(?=@)"),
    (("key", "auth", "cookie", "passw", "secret", "token"),
          r"(?P<pair>[\"']?\b(?i:x-api-key|api-key|apikey|api_key|x-auth-token|auth-token|auth_token|authorization|"
          r"proxy-authorization|cookie|set-cookie|password|passwd|client_secret|client-secret|access_token|"
          r"refresh_token|id_token|secret_key|private_key)[\"']?\s*[:=]\s*[\"']?)"
          rf"(?P<pairv>{_NOT_DONE}(?i:(?:bearer|basic|token|digest)\s+)?{_NOT_DONE}[^\s\"',;&<>\\]{{4,}})"),
    (("bearer", "token"),
          r"(?P<scheme>\b(?i:bearer|token)\s+)(?P<token>(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})"),
    (("basic",), r"(?P<basic>\b(?i:basic)\s+)(?P<b64>[A-Za-z0-9+/]{8,}={0,2})"),
    (("sk-",), r"(?P<sk>\bsk-[A-Za-z0-9_-]{16,})"),
    (("eyj",), r"(?P<jwt>\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "akia", "aiza", "glpat-"),
          r"(?P<vendor>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}"
          r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20,}))"),
    (("key=", "token=", "secret=", "passw", "pwd=", "sig=", "signature=", "sessionid=", "session_id=",
           "session-id="),
          r"(?P<param>\b(?i:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|"
          r"token|key|secret|client[_-]?secret|password|passwd|pwd|sig|signature|session[_-]?id|sessionid)=)"
          rf"(?P<paramv>{_NOT_DONE}[^&\s'\"<>#,;\\]{{4,}})"),
)


@cache
def _shape_rules() -> _Rules:
    return tuple((triggers, re.compile(source)) for triggers, source in _SHAPE_SOURCES)


def _shape(match: re.Match[str]) -> str:
    group = match.lastgroup
    if group == "urlpw":
        return match.group("url") + marker("url-password")
    if group == "pairv":
        return match.group("pair") + marker("credential")
    if group == "token":
        return match.group("scheme") + marker("bearer-token")
    if group == "b64":
        token = match.group("b64")
        if _basic_parts(token, "basic-credentials"):
            return match.group("basic") + marker("basic-credentials")
        return match.group(0)
    if group == "sk":
        return marker("sk-key")
    if group == "jwt":
        return marker("jwt")
    if group == "vendor":
        return marker("vendor-token")
    if group == "paramv":
        return match.group("param") + marker("query-credential")
    return match.group(0)


def scrub_shapes(text: str) -> str:
    """``text`` with every credential-shaped run replaced (see the module's docstring); the same object
    when there is none."""
    if not text or type(text) is not str:
        return text
    low = text.lower()
    for triggers, pattern in _shape_rules():
        for trigger in triggers:
            if trigger in low:
                text, count = pattern.subn(_shape, text)
                if count:
                    low = text.lower()
                break
    return text


class Redactor:
    """Replaces known secrets (and, in error text, credential shapes) in strings and nested data.

    Build one with ``Redactor.for_config(resolved)`` (the configuration's secrets) or
    ``Redactor(secrets)`` (``Secret`` values or plain strings). Thread-safe: it holds compiled
    patterns only."""

    __slots__ = ("_kinds", "_pattern", "_probes", "env_refs", "secrets", "values")

    def __init__(self, secrets: Iterable[Secret | str] = (), *, env_refs: Iterable[tuple[str, str | None]] = ()
                 ) -> None:
        secrets = list(secrets)
        #: The secret values as configured (at least ``MIN_SECRET_CHARS`` long), each once.
        self.secrets: tuple[str, ...] = tuple(dict.fromkeys(
            v for v in ((s.value if isinstance(s, Secret) else s) for s in secrets)
            if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS))
        self._kinds = _expand(secrets)
        #: Every spelling replaced, longest first.
        self.values: tuple[str, ...] = tuple(sorted(self._kinds, key=len, reverse=True))
        self._pattern = re.compile("|".join(re.escape(v) for v in self.values)) if self.values else None
        # What ``data``'s serialised check looks for: each spelling's UTF-8 bytes, minus those that
        # contain another (found whenever the shorter one is).
        encoded = sorted({v.encode("utf-8", "surrogatepass") for v in self.values}, key=len)
        self._probes = tuple(v for i, v in enumerate(encoded) if not any(o in v for o in encoded[:i]))
        #: The environment variables the secrets came from, with their values then (``stale``).
        self.env_refs = tuple(env_refs)

    @classmethod
    def for_config(cls, resolved: Any, env: Mapping[str, str] | None = None) -> Redactor:
        """The redactor of a ``ResolvedConfig`` (or an ``OraConfig``)."""
        env = os.environ if env is None else env
        config = getattr(resolved, "config", resolved)
        refs = sorted({(str(v), env.get(str(v))) for k, v in _env_references(config)})
        return cls(config_secrets(config, env), env_refs=refs)

    def stale(self, env: Mapping[str, str] | None = None) -> bool:
        """An environment variable a secret came from changed since this redactor was built."""
        env = os.environ if env is None else env
        return any(env.get(name) != value for name, value in self.env_refs)

    @property
    def active(self) -> bool:
        """It knows at least one secret (else ``text`` and ``data`` return what they are given)."""
        return self._pattern is not None

    def _replace(self, match: re.Match[str]) -> str:
        return marker(self._kinds.get(match.group(0), ""))

    def text(self, text: str) -> str:
        """``text`` with every configured secret replaced (the same object when it holds none)."""
        pattern = self._pattern
        if pattern is None or type(text) is not str or pattern.search(text) is None:
            return text
        return pattern.sub(self._replace, text)

    def error_text(self, text: str) -> str:
        """``text`` (an error message, a server's body, a diagnostic) with every configured secret and
        every credential shape replaced."""
        return scrub_shapes(self.text(text))

    def data(self, value: Any) -> Any:
        """``value`` (nested dicts, lists, tuples, strings) with every configured secret replaced in
        every string, keys included; containers holding none are returned as they were."""
        if self._pattern is None:
            return value
        dumps = _fast_dumps()
        if dumps is not None and type(value) is not str:
            try:
                blob = dumps(value, default=str)
            except (TypeError, ValueError):  # keys orjson refuses, lone surrogates...: walk it
                blob = None
            if blob is not None:
                for probe in self._probes:
                    if probe in blob:
                        break
                else:
                    return value
        return _deep(value, self.text)

    def error_data(self, value: Any) -> Any:
        """``data`` with ``error_text`` on every string."""
        return _deep(value, self.error_text)

    def model(self, model: Any, *, errors: tuple[str, ...] = ()) -> Any:
        """A pydantic model with every string field redacted (``errors``: fields that are error text,
        which get ``error_data``); the same object when nothing changed, else a validated copy."""
        if self._pattern is None and not errors:
            return model
        dumped = model.model_dump(mode="python")
        cleaned = {key: (self.error_data(value) if key in errors else self.data(value))
                   for key, value in dumped.items()}
        if all(cleaned[key] is dumped[key] for key in dumped):
            return model
        return type(model).model_validate(cleaned)


@cache
def _fast_dumps() -> Callable[..., bytes] | None:
    """orjson's ``dumps`` (the fast "does this event hold a secret at all?" of ``Redactor.data``), or
    None without orjson: the pure-Python walk answers the same question."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - ora-trace-fs depends on orjson; the walk is exact without it
        return None
    return orjson.dumps


def _env_references(node: Any) -> Iterator[tuple[str, Any]]:
    dump = getattr(node, "model_dump", None)
    if callable(dump):
        node = dump(mode="python")
    if isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(value, str) and str(key).lower().endswith("_env") and credential_key(str(key)[:-4]):
                yield str(key), value
            else:
                yield from _env_references(value)
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from _env_references(item)


def _deep(value: Any, clean: Callable[[str], str]) -> Any:
    kind = type(value)
    if kind is str:
        return clean(value)
    if kind is dict:
        out: dict[Any, Any] | None = None
        for key, item in value.items():
            new_key = clean(key) if type(key) is str else key
            new_item = _deep(item, clean)
            if out is None and (new_item is not item or new_key is not key):
                out = {}
                for done_key, done_item in value.items():  # the entries before this one, unchanged
                    if done_key is key:
                        break
                    out[done_key] = done_item
            if out is not None:
                out[new_key] = new_item
        return value if out is None else out
    if kind is list or kind is tuple:
        items = [_deep(item, clean) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if kind is list else tuple(items)
    return value


def redact_exception(exc: BaseException, redactor: Redactor) -> BaseException:
    """``exc`` with ``redactor``'s secrets and credential shapes replaced in its text arguments (and a
    ``BackendError``'s detail), in place: an exception leaving the kernel for an application."""
    own = getattr(exc, "redact", None)
    if callable(own):
        own(redactor)
        return exc
    exc.args = tuple(redactor.error_text(a) if isinstance(a, str) else a for a in exc.args)
    return exc


def redact_text(text: str, secrets: Iterable[Secret | str] = ()) -> str:
    """``text`` (a server's error body, an exception message) with credential shapes and the given
    ``secrets`` replaced: what a plugin calls before a body becomes an error message."""
    redactor = Redactor(secrets) if secrets else _EMPTY
    return redactor.error_text(text)


_EMPTY = Redactor()

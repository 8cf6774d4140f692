"""Known shapes of verifier output that is not a verdict at all (seed 000, failure #9).

Each marker is a named, compiled pattern in one category. ``strong`` markers are phrasings
that only an error produces (an exception substituted into the output, a browser session that
expired, an HTTP 429); they beat verdict tokens. ``weak`` markers (``timed out``, ``internal
server error`` ...) are ordinary words in an analysis too, so they only name the cause of an
output that carries no verdict line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ora_core.api import lazy_compile

BrokenCategory = Literal["exception_substitution", "browser_session", "backend_error", "rate_limit"]


@dataclass(frozen=True)
class Marker:
    name: str
    category: BrokenCategory
    pattern: re.Pattern[str]
    strong: bool = True


def _m(name: str, category: BrokenCategory, pattern: str, *, strong: bool = True,
       flags: int = re.IGNORECASE) -> Marker:
    return Marker(name, category, lazy_compile(pattern, flags), strong)


MARKERS: tuple[Marker, ...] = (
    # An exception turned into verifier "output" (the legacy auto-pass shape among them).
    _m("auto-pass-substitution", "exception_substitution",
       r"\[\s*verification error\b|\bauto[-_ ]?pass(?:ed)?\b\s*[:(\]]|\bauto[-_ ]pass(?:ed)? on (?:error|exception)"),
    _m("verification-error", "exception_substitution", r"^\W*verification (?:error|exception)\b"),
    _m("python-traceback", "exception_substitution", r"traceback \(most recent call last\)"),
    _m("exception-repr", "exception_substitution",
       r"^\W*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Timeout|Expired)\s*(?::|\()", flags=re.MULTILINE),
    _m("error-prefix", "exception_substitution", r"^\W*(?:error|exception|fatal)\s*[:\-]",
       strong=False, flags=re.IGNORECASE | re.MULTILINE),
    _m("exception-word", "exception_substitution",
       r"\b(?:unhandled|uncaught) exception\b|\bexception (?:was )?(?:raised|occurred|thrown)\b"),
    # Browser-mediated backends whose session broke.
    _m("playwright-session-error", "browser_session", r"\bplaywright\b[^\n]{0,40}\b(?:session )?error\b"),
    _m("browser-closed", "browser_session",
       r"\btarget (?:page, context or browser|page|context|browser) has been closed\b"
       r"|\bbrowser (?:context |session )?(?:has )?(?:closed|crashed|disconnected)\b"),
    _m("session-expired", "browser_session",
       r"\bsession (?:has |is )?(?:expired|timed out|invalid(?:ated)?)\b|\byour session (?:has )?ended\b"),
    _m("login-required", "browser_session",
       r"\b(?:log ?in|sign ?in|authentication|re-?authentication) (?:is )?required\b"
       r"|\bplease (?:log|sign) (?:in|back in)\b|\bnot (?:logged|signed) in\b"),
    _m("bot-check", "browser_session",
       r"\bverify (?:that )?you are (?:a )?human\b|\bcaptcha\b|\bcloudflare\b[^\n]{0,40}\b(?:check|ray id)\b"),
    _m("net-error", "browser_session", r"\bnet::ERR_[A-Z_]+", flags=0),
    # Rate limits and quotas.
    _m("rate-limit", "rate_limit",
       r"\brate[- ]?limit(?:ed|s)?\b[^\n]{0,30}\b(?:exceeded|reached|hit)\b|\brate[- ]?limited\b"
       r"|\b(?:exceeded|reached|hit) (?:the |your )?rate[- ]?limit"),
    _m("too-many-requests", "rate_limit", r"\btoo many requests\b|\b(?:http |status |error )429\b|\b429 too many\b"),
    _m("quota-exceeded", "rate_limit",
       r"\b(?:quota|usage (?:cap|limit)|message (?:cap|limit))\b[^\n]{0,30}\b(?:exceeded|reached|hit)\b"
       r"|\byou(?:'ve| have) (?:reached|hit|exceeded) (?:the |your )?(?:current )?"
       r"(?:usage|message|rate|daily|plan|request)"),
    # Backend failures that are ordinary words in prose: weak, they only name a cause.
    _m("http-5xx", "backend_error",
       r"\b(?:http |status |error )?5\d\d (?:internal server error|bad gateway|service unavailable|"
       r"gateway time-?out)\b", strong=True),
    _m("server-error-words", "backend_error",
       r"\binternal server error\b|\bservice (?:temporarily )?unavailable\b|\bbad gateway\b",
       strong=False),
    _m("connection-error", "backend_error",
       r"\bconnection (?:refused|reset|aborted|error|timed out)\b", strong=False),
    _m("timeout-words", "backend_error", r"\b(?:request |read |call )?timed? ?out\b", strong=False),
    _m("model-overloaded", "backend_error",
       r"\b(?:model|server|engine) (?:is )?(?:currently )?overloaded\b|\boverloaded_error\b", strong=True),
    _m("context-overflow", "backend_error",
       r"\bmaximum context length\b|\bcontext[_ ]length[_ ]exceeded\b", strong=True),
    _m("api-key", "backend_error", r"\binvalid (?:api|x-api) key\b|\bincorrect api key\b", strong=True),
)


@dataclass(frozen=True)
class MarkerHit:
    name: str
    category: BrokenCategory
    strong: bool
    matched: str
    start: int
    end: int


def find_markers(text: str) -> list[MarkerHit]:
    """Every marker that matches ``text``, in order of position."""
    hits = [
        MarkerHit(m.name, m.category, m.strong, match.group(0).strip(), match.start(), match.end())
        for m in MARKERS
        for match in m.pattern.finditer(text)
    ]
    return sorted(hits, key=lambda h: (h.start, not h.strong))

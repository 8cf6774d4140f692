"""The injectors. Each is stateless: what it does depends only on the ``FaultPoint``."""

from __future__ import annotations

import re
from typing import Any

from ora_core.api import BackendRateLimited, BackendTimeout, ContextPackage, FaultPoint, RetrievalError

#: A quotation no evidence package holds: the judge must catch it.
FABRICATED_QUOTE = ('> "The Orsini Institute report of 14 March 2019 put the harness market at '
                    '4.7 trillion dollars, with 83 percent held by three vendors."')
_CONFIDENCE_LINE = re.compile(r"^[\s>*_#-]*confidence[\s*_]*[:=].*$", re.IGNORECASE | re.MULTILINE)


def _primary_analyst(point: FaultPoint) -> bool:
    return point.purpose == "analyst" and point.primary


class _Injector:
    name = ""
    description = ""

    def inject(self, point: FaultPoint, value: Any) -> Any:
        return value


class LowConfidence(_Injector):
    name = "lowconf"
    description = "the primary analyst's first attempt reports confidence 0.60: routing retries, the retry recovers"

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "model_output" and _primary_analyst(point) and point.attempt == 1:
            return _CONFIDENCE_LINE.sub("", value).rstrip() + "\nCONFIDENCE: 0.60"
        return value


class Hallucination(_Injector):
    name = "hallucination"
    description = ("the primary analyst's first attempt quotes a fabricated source: the judge catches it, "
                   "the retry recovers")
    every_attempt = False

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "model_output" and _primary_analyst(point) and (self.every_attempt or point.attempt == 1):
            body = _CONFIDENCE_LINE.sub("", value).rstrip()
            tail = "\n".join(m.group(0) for m in _CONFIDENCE_LINE.finditer(value))
            return f"{body}\n\n{FABRICATED_QUOTE}" + (f"\n{tail}" if tail else "")
        return value


class Persistent(Hallucination):
    name = "persistent"
    description = "every attempt of the primary analyst quotes a fabricated source: retries run out, the turn halts"
    every_attempt = True


class Coverage(_Injector):
    name = "coverage"
    description = ("the context package silently loses a stream: the deterministic coverage assertion halts "
                   "at once, with no retry")

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site != "package" or not isinstance(value, ContextPackage):
            return value
        streams = sorted(value.retrievals) or list(value.missing_streams)
        if not streams:
            return value
        lost = streams[0]
        return value.model_copy(update={
            "retrievals": {s: r for s, r in value.retrievals.items() if s != lost},
            "missing_streams": [s for s in value.missing_streams if s != lost],
            "rag_failures": [f for f in value.rag_failures if f.stream != lost],
        })


class VerifierException(_Injector):
    name = "verifier-exception"
    description = "every verifier raises mid-check: BROKEN, recorded by name, never PASS"

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "verify":
            raise RuntimeError(f"injected fault: the verifier crashed while checking {point.step}")
        return value


class VerifierGarbage(_Injector):
    name = "verifier-garbage"
    description = "every verifier answers garbage: BROKEN (a short non-verdict output), never PASS"

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "verifier_output":
            return "ok!! ✓✓ lgtm"
        return value


class BackendTimeoutInjector(_Injector):
    name = "backend-timeout"
    description = ("the primary analyst's backend times out: its stream degrades (gear 4 continues on the "
                   "other stream; gear 2 has nothing left and halts)")

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "model_call" and _primary_analyst(point):
            raise BackendTimeout("injected fault: the backend did not answer within 120 s",
                                 provider="inject", model="-", detail="timeout_s=120 (injected)")
        return value


class RateLimit(_Injector):
    name = "rate-limit"
    description = ("the consolidator (gear 4; otherwise the primary analyst) is rate limited: consolidation "
                   "degrades and the longer stream ships under '[degraded — consolidation failed]'")

    def inject(self, point: FaultPoint, value: Any) -> Any:
        hit = point.purpose == "consolidator" if point.gear == 4 else _primary_analyst(point)
        if point.site == "model_call" and hit:
            raise BackendRateLimited("injected fault: HTTP 429 Too Many Requests", retry_after=30.0,
                                     provider="inject", model="-", detail="429 (injected)")
        return value


class RagDown(_Injector):
    name = "rag-down"
    description = ("every retrieval raises: empty context and a named rag-failures.jsonl record per stream; "
                   "supplements cannot resolve")

    def inject(self, point: FaultPoint, value: Any) -> Any:
        if point.site == "retrieve":
            raise RetrievalError(f"injected fault: the vector store for the {point.stream!r} stream refused "
                                 "the connection")
        return value


INJECTORS: tuple[_Injector, ...] = (
    LowConfidence(), Hallucination(), Persistent(), Coverage(), VerifierException(), VerifierGarbage(),
    BackendTimeoutInjector(), RateLimit(), RagDown(),
)

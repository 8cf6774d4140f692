"""The BROKEN verdict detector: a Detector on the ``verifier_output`` layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ora_core.models import Signal

from .verdict import parse_verdict

#: Where the detector looks, in ``ctx.data``, for the texts the verifier was shown (the subject
#: under verification and the evidence chunks), so that quotations of them are never read as
#: the verifier's own verdict. A list of strings.
QUOTED_KEY = "verifier_quoted"


def quoted_from_ctx(ctx: Any) -> Sequence[str]:
    data = getattr(ctx, "data", None)
    if not isinstance(data, dict):
        return ()
    quoted = data.get(QUOTED_KEY) or ()
    if isinstance(quoted, str):
        return (quoted,)
    return tuple(q for q in quoted if isinstance(q, str))


class BrokenVerdictDetector:
    """Signals a verifier output that is not a verdict: an error, a session wall, garbage.

    One strong ``verifier-broken:<kind>`` signal for a BROKEN output (its data is the whole
    parse); a weak ``verifier-conflicting-verdicts`` signal when a PASS/FAIL output also carries
    an earlier verdict line saying the opposite. A PASS or FAIL output gives no broken signal.
    """

    name = "broken-verdict"
    kind = "broken"
    layer = "verifier_output"
    assumes = frozenset({"verdict_raw"})

    def detect(self, text: str, ctx: Any) -> list[Signal]:
        parsed = parse_verdict(text, quoted=quoted_from_ctx(ctx))
        data = parsed.model_dump(mode="json")
        if parsed.broken:
            first = next((m for m in parsed.markers if m.strong), None) or \
                next(iter(parsed.markers), None)
            return [Signal(detector=self.name, kind=self.kind, name=f"verifier-broken:{parsed.broken_kind}",
                           strength="strong", matched=first.matched if first else text.strip()[:120],
                           data=data)]
        if parsed.conflicting:
            return [Signal(detector=self.name, kind=self.kind, name="verifier-conflicting-verdicts",
                           strength="weak", matched=parsed.verdict_line or "", data=data)]
        return []

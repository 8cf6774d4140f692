"""The BROKEN verdict detector: a Detector on the ``verifier_output`` layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ora_core.api import Signal

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
    """Reads a verifier's raw output: the one verdict parser of Ora.

    - A BROKEN output (an error, a session wall, garbage, no verdict line): one strong
      ``verifier-broken:<kind>`` signal of kind ``broken`` (its data is the whole parse).
    - A PASS or FAIL output: one ``verdict`` signal of kind ``verdict`` (``data.status`` PASS or
      FAIL; ``data.line`` the line that decided; ``data.findings`` the reasons: for a FAIL the lines
      after its verdict line and every failure line of the own text; ``data.downgraded`` when a
      PASS line was overruled by a failure in the verifier's own text), and a weak
      ``verifier-conflicting-verdicts`` signal of kind ``broken`` when the own text disagrees with
      itself (verdict lines of both kinds, or a PASS line beside a failure).
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
        signals = [Signal(detector=self.name, kind="verdict", name="verdict", strength="strong",
                          matched=parsed.verdict_line or "",
                          data={"status": parsed.status.value, "line": parsed.verdict_line,
                                "line_no": parsed.verdict_line_no, "source": parsed.source,
                                "downgraded": parsed.downgraded, "overruled_line": parsed.overruled_line,
                                "failure_signals": len(parsed.failure_signals),
                                "findings": list(parsed.findings)})]
        if parsed.conflicting:
            signals.append(Signal(detector=self.name, kind=self.kind, name="verifier-conflicting-verdicts",
                                  strength="weak", matched=parsed.verdict_line or "", data=data))
        return signals

"""The part of a pipeline output that makes claims about the world.

An analysis carries protocol furniture that is not a claim and must not be graded against the
evidence: the ``CONFIDENCE: 0.85`` line (its number is not a fact to find in the evidence), a
``## SUPPLEMENTAL RAG REQUEST`` block (it *names* what is missing), a ``## COVERAGE GAP``
section (the authorised alternative to confabulation: it lists what the evidence lacks), the
reviser's ``## CRITICISMS ACCEPTED`` / ``## CRITICISMS REJECTED`` record, and the kernel's
``[degraded — ...]`` / ``[warning: ...]`` header lines. Fenced code is left out too (it is quoted
material, not prose). Everything else is kept, in order.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from ora_core.api import lazy_compile

#: Section headings whose whole section is protocol, not claims.
_PROTOCOL_SECTION = lazy_compile(
    r"^\s{0,3}#{1,6}\s*(?:SUPPLEMENTAL RAG (?:REQUEST|RESULT)|COVERAGE GAP|CRITICISMS (?:ACCEPTED|REJECTED)|"
    r"SUPPLEMENT CAP REACHED)\b",
    re.IGNORECASE,
)
_HEADING = lazy_compile(r"^\s{0,3}#{1,6}\s")
_PROTOCOL_LINE = lazy_compile(
    r"^\s*(?:\*\*)?(?:CONFIDENCE|VERDICT)\s*(?:\*\*)?\s*[:=]\s*\S+\s*$"
    r"|^\s*\[(?:degraded|warning|unverified)\b[^\]]*\]\s*$",
    re.IGNORECASE,
)
_FENCE = lazy_compile(r"^\s*(```|~~~)")


class CheckableText(BaseModel):
    """What is left to check, and the names of what was set aside (for the report)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    set_aside: list[str] = []


def checkable_text(subject: str) -> CheckableText:
    """``subject`` without its headings, protocol sections, protocol lines and fenced blocks."""
    kept: list[str] = []
    set_aside: list[str] = []
    in_protocol = False
    in_fence = False
    fence, heading, protocol_line = _FENCE.compiled(), _HEADING.compiled(), _PROTOCOL_LINE.compiled()
    for line in subject.replace("\r\n", "\n").split("\n"):
        if fence.match(line):
            if not in_fence:
                set_aside.append("fenced block")
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if heading.match(line):
            in_protocol = bool(_PROTOCOL_SECTION.match(line))
            # a heading is structure, not a claim ("## 1. UNSUPPORTED CLAIMS" of an evaluation
            # contract, "## Who benefits"): its section's lines are checked, the heading is not
            set_aside.append(line.strip().lstrip("#").strip())
            continue
        if in_protocol:
            continue
        if protocol_line.match(line):
            set_aside.append(line.strip())
            continue
        kept.append(line)
    return CheckableText(text="\n".join(kept).strip(), set_aside=set_aside)

"""Reading a verifier's raw output as PASS, FAIL or BROKEN: the one verdict grammar of Ora.

The contract (give ``VERDICT_CONTRACT`` to every verifier model)::

    ...the verifier's reasoning...

    ## VERDICT
    VERDICT: PASS            <- or FAIL; the whole line, in the final section
    <optional reasons, one a line>

How ``parse_verdict`` reads an output:

1. **Own text only.** Material the verifier *quotes* is masked before anything is read:
   fenced code blocks, ``>`` blockquotes, sections whose heading names quoted material and
   nothing of the verifier's own work (``## SUPPLEMENTAL RAG RESULT``, ``## EVIDENCE``, ``## ANALYSIS
   UNDER REVIEW`` are masked; ``## Evidence check`` is the verifier's own), and verbatim copies of the
   texts the caller passes as ``quoted`` (the subject under verification, the retrieved chunks): a
   run of two or more of their lines, or one line of 40 characters or more. Verdict lines, failure
   phrases, broken markers and ``## SUPPLEMENTAL RAG REQUEST`` blocks inside the analysed text or
   the chunks are therefore never the verifier's.
2. **Known broken markers beat everything**: an exception substituted into the output (the legacy
   ``VERIFIED\\n[Verification error, auto-pass: ...]``), a Playwright/browser session error, an
   expired session or login wall, a rate limit or quota message, an HTTP 5xx -> BROKEN, whatever
   verdict words surround them.
3. **A verdict line is a whole line.** ``VERDICT: PASS`` or ``VERDICT: FAIL`` (any case; also
   ``Final verdict``; ``:``, ``-``, ``–``, ``—`` as the separator; ``PASSED``/``FAILED``/``VERIFIED``/``NOT
   VERIFIED``/``VERIFICATION FAILED`` as the token), or a legacy token alone: ``VERIFIED``,
   ``VERIFICATION PASSED``, ``VERIFICATION FAILED``, ``FAILED VERIFICATION``, ``NOT VERIFIED``, ``PASS``,
   ``FAIL``. Markdown around it (``## ``, ``- ``, ``**``, ``__``, backticks) and trailing ``.``/``!`` are
   allowed; **nothing else is on the line**. ``VERIFIED: the protocol is a handshake`` or ``VERDICT:
   PASS with caveats`` is prose, not a verdict (named in the reasons when nothing else decides).
4. **Failure signals** (``failure_signals.find_failure_signals``): the verifier's own prose saying that
   something failed: ``UNSUPPORTED``, ``FAILED``, *not in the evidence*, *no evidence for*,
   *contradicts the evidence*, *fabricated*, *cannot be verified*, *nicht belegt*, *non étayé* ...,
   a line opening with a FAIL token and a reason (``VERIFICATION FAILED: the date is invented``), a FAIL
   verdict inside a line (``(just kidding) VERDICT: FAIL``); not when negated (*no unsupported
   claims*, *nothing is missing from the evidence*), not an empty category (``Unsupported claims:
   none``), not the analysis's own acknowledged gap.
5. **PASS is unanimous.** The last verdict line is read first. FAIL -> FAIL. PASS -> PASS only when no
   earlier verdict line says FAIL and the own text carries no failure signal; otherwise FAIL
   (``downgraded``, ``conflicting``), decided by the earlier FAIL line or the first failure signal,
   with the failure lines as findings. Never BROKEN for this: FAIL both refuses the PASS and hands the
   named failure to the reviser (Ora's loop re-revises on FAIL; BROKEN would unblock the analysis with
   a warning and ship the unsupported claim), and ``conflicting`` keeps the verifier's self-
   contradiction visible. Verdict lines that disagree are recorded as ``conflicting``.
0. **A JSON verdict** (a verifier whose backend held its reply to ``VERDICT_SCHEMA``): an output that is
   one JSON object (``{`` ... ``}``) is validated (``StructuredVerdict``: ``status`` PASS or FAIL,
   ``findings``); valid, it is rendered into the contract's form (``## VERDICT``, ``VERDICT: <status>``,
   one line per finding) and read by the rules here like any output (a PASS whose findings name a
   failure is a FAIL), ``structured`` set; invalid (a key missing, another status, cut short), it is
   BROKEN (``invalid_structured``), naming what failed validation: never a guessed verdict.
6. **No verdict line.** A ``## SUPPLEMENTAL RAG REQUEST`` block in the own text with no verdict line
   after it sets ``supplement_requested``: BROKEN (``no_verdict``) until the re-asked verifier
   answers. Else a weak marker (a timeout, a connection error) -> BROKEN by its category. Else a FAIL
   *token* among the failure signals -> FAIL, the first one deciding (``source="failure_signal"``): a
   failure word in capitals as verifiers label a verdict or a claim (``UNSUPPORTED: the 2019 date``,
   ``Claim 2: FAILED``), a line opening with a FAIL verdict token and its reason (``VERIFICATION FAILED:
   the date is invented``, ``VERDICT: FAIL - ...``), or a FAIL verdict inside a line. A FAIL may carry
   its reason on its line, a PASS may not: reading a FAIL generously can only refuse a PASS. Else
   BROKEN: ``empty``, ``short_output`` (under 80 characters of own text) or ``no_verdict``; prose
   failure phrases (*the figure is not in the evidence*) without any verdict take a PASS away but do
   not give a verdict, so they leave it BROKEN and are named in the reasons. A verifier that gave no
   verdict has not verified: never PASS. Real verdict lines beat the short-output rule: ``VERIFIED``
   alone is a PASS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ora_core.api import Verdict, VerdictStatus, lazy_compile

from .failure_signals import FailureSignal, find_failure_signals
from .markers import BrokenCategory, find_markers

BrokenKind = Literal[
    "exception_substitution", "browser_session", "backend_error", "rate_limit",
    "empty", "short_output", "no_verdict", "invalid_structured",
]

SHORT_OUTPUT_CHARS = 80
QUOTED_LINE_MIN_CHARS = 40
MAX_FINDINGS = 20

VERDICT_CONTRACT = """\
End your reply with a final section in exactly this form:

## VERDICT
VERDICT: PASS

or `VERDICT: FAIL` followed by one line per failed criterion. The verdict line is the whole line:
`VERDICT: PASS` or `VERDICT: FAIL` and nothing else on it (no reason, no qualifier); reasons go on
the lines after it. A line such as `VERIFIED: <claim>` is not a verdict. Give PASS only when
nothing failed: if any claim is unsupported, contradicted, invented or not in the evidence, the
verdict is FAIL, and a reply that names such a failure anywhere in your own words is read as FAIL
whatever its verdict line says. When you quote the text under review or the evidence, put the
quotation in a fenced block or after `> `; quoted material is never read as yours.
If you need a fact the package lacks, emit a `## SUPPLEMENTAL RAG REQUEST` block instead of a
verdict."""

_FENCE = lazy_compile(r"^\s*(```|~~~)")
_HEADING = lazy_compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_QUOTING_HEADING = lazy_compile(
    r"supplemental rag result|\bevidence\b|\bretrieved\b|\bexcerpts?\b|\bquoted?\b|\bquotations?\b"
    r"|\bunder review\b|\boriginal (?:analysis|text|output|answer)\b|\bsource (?:text|material)\b"
    r"|\bcontext package\b|\bchunks?\b",
    re.IGNORECASE,
)
#: a heading that names the verifier's own work is its own text even when it names the evidence too
_OWN_WORK_HEADING = lazy_compile(
    r"\b(?:check(?:s|ing|list)?|assess\w*|evaluat\w*|findings?|issues?|gaps?|problems?|concerns?|notes?|"
    r"comments?|reasoning|verification|verdict|conclusions?|summary|comparison|my|our|against|versus|vs|"
    r"coverage|consistency|accuracy|audit|support(?:ed)?|unsupported|claims?|criteri(?:on|a)|mismatch\w*)\b",
    re.IGNORECASE,
)
_REQUEST_HEADING = lazy_compile(r"supplemental rag request", re.IGNORECASE)
_VERDICT_LINE = lazy_compile(
    r"^[\s*_#`-]*(?:(?:final\s+)?verdict[\s*_`]*[:：\-–—][\s*_`]*"
    r"(?P<contract>pass(?:ed)?|fail(?:ed)?|verified|not\s+verified|verification\s+failed|verification\s+passed)"
    r"|(?P<legacy>verification\s+failed|failed\s+verification|not\s+verified|verification\s+passed|verified"
    r"|pass|fail))[\s*_`.!]*$",
    re.IGNORECASE,
)
#: a line that opens like a PASS verdict and goes on: prose (named in a BROKEN output's reasons)
_PASS_NEAR_MISS = lazy_compile(
    r"^[\s*_#`-]*(?:(?:final\s+)?verdict[\s*_`]*[:：\-–—][\s*_`]*)?(?:pass(?:ed|es)?|verified|verification\s+passed)"
    r"\b",
    re.IGNORECASE,
)
_FAIL_TOKENS = {"fail", "failed", "not verified", "verification failed", "failed verification"}
MAX_FINDING_CHARS = 400

#: The verdict as one JSON object, for a verifier whose backend can hold its reply to a schema
#: (``ModelRequest.response_schema``): within OpenAI's strict mode (every key required, no other).
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["PASS", "FAIL"]},
        "findings": {"type": "array", "items": {"type": "string", "maxLength": MAX_FINDING_CHARS},
                     "maxItems": MAX_FINDINGS},
    },
    "required": ["status", "findings"],
    "additionalProperties": False,
}


class StructuredVerdict(BaseModel):
    """A JSON verdict (``VERDICT_SCHEMA``), validated."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["PASS", "FAIL"]
    findings: list[str] = Field(max_length=MAX_FINDINGS)


def structured_verdict(raw: str) -> tuple[StructuredVerdict | None, str | None]:
    """``(verdict, None)`` for an output that is one valid JSON verdict; ``(None, why)`` for one that is
    a JSON object (``{`` ... ``}``) but not a valid verdict; ``(None, None)`` for any other output."""
    text = raw.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None, None
    try:
        return StructuredVerdict.model_validate_json(text), None
    except ValidationError as exc:
        return None, "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
                               for e in exc.errors()[:3])


def render_structured(verdict: StructuredVerdict) -> str:
    """A JSON verdict in the contract's form. A finding that would read as a verdict line of its own
    (``PASS``, ``VERDICT: FAIL``) is labelled ``finding:`` so that only ``status`` gives the verdict."""
    lines = ["## VERDICT", f"VERDICT: {verdict.status}"]
    for finding in verdict.findings:
        text = " ".join(finding.split())
        if text:
            lines.append(f"- finding: {text}" if _VERDICT_LINE.match(text) else f"- {text}")
    return "\n".join(lines)


class MarkerFound(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    category: BrokenCategory
    strong: bool
    matched: str
    line: int


class ParsedVerdict(BaseModel):
    """What a verifier's raw output says, and why."""

    model_config = ConfigDict(extra="forbid")

    status: VerdictStatus
    broken_kind: BrokenKind | None = None
    verdict_line: str | None = None  # the line that decided PASS or FAIL
    verdict_line_no: int | None = None  # its 1-based line
    source: Literal["contract", "legacy", "failure_signal"] | None = None
    conflicting: bool = False  # the own text disagrees with itself (verdict lines, or PASS + a failure)
    downgraded: bool = False  # the last verdict line said PASS and was overruled: FAIL
    overruled_line: str | None = None  # that PASS line
    supplement_requested: bool = False
    structured: bool = False  # read from a JSON verdict (rendered into the contract's form first)
    markers: list[MarkerFound] = Field(default_factory=list)
    failure_signals: list[FailureSignal] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)  # for a FAIL: what failed; for a PASS: the reasons
    masked_lines: int = 0
    own_chars: int = 0
    reasons: list[str] = Field(default_factory=list)

    @property
    def broken(self) -> bool:
        return self.status is VerdictStatus.BROKEN

    def to_verdict(self, verifier: str, raw: str) -> Verdict:
        """The kernel's ``Verdict`` shape, with the raw output kept beside the parse."""
        return Verdict(status=self.status, verifier=verifier, reasons=list(self.reasons), raw_output=raw,
                       data={"parse": self.model_dump(mode="json")})


class VerdictLine(NamedTuple):
    index: int  # 0-based line index
    text: str
    status: VerdictStatus
    source: Literal["contract", "legacy"]


def _quoted_line_set(quoted: Iterable[str]) -> set[str]:
    lines: set[str] = set()
    for text in quoted:
        for line in (text or "").splitlines():
            stripped = line.strip()
            if stripped:
                lines.add(stripped)
    return lines


def _quoting_heading(title: str) -> bool:
    return bool(_QUOTING_HEADING.search(title)) and not _REQUEST_HEADING.search(title) \
        and not _OWN_WORK_HEADING.search(title)


def own_lines(raw: str, quoted: Sequence[str] = ()) -> tuple[list[str | None], int]:
    """The raw output's lines with every quoted line replaced by ``None``; and how many."""
    lines = raw.replace("\r\n", "\n").split("\n")
    masked = [False] * len(lines)
    in_fence: str | None = None
    quoting_level: int | None = None
    for i, line in enumerate(lines):
        fence = _FENCE.match(line)
        if in_fence is not None:
            masked[i] = True
            if fence and fence.group(1) == in_fence:
                in_fence = None
            continue
        if fence:
            in_fence = fence.group(1)
            masked[i] = True
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if quoting_level is not None and level <= quoting_level:
                quoting_level = None
            if quoting_level is None and _quoting_heading(heading.group(2)):
                quoting_level = level
        if quoting_level is not None or line.lstrip().startswith(">"):
            masked[i] = True
    quoted_set = _quoted_line_set(quoted)
    if quoted_set:
        candidate = [not masked[i] and lines[i].strip() in quoted_set for i in range(len(lines))]
        i = 0
        while i < len(lines):
            if not candidate[i]:
                i += 1
                continue
            run = [i]
            j = i + 1
            while j < len(lines) and (candidate[j] or not lines[j].strip()):
                if candidate[j]:
                    run.append(j)
                j += 1
            if len(run) >= 2 or len(lines[i].strip()) >= QUOTED_LINE_MIN_CHARS:
                for k in run:
                    masked[k] = True
            i = j
    own: list[str | None] = [None if m else line for line, m in zip(lines, masked, strict=True)]
    return own, sum(masked)


def _status_of(token: str) -> VerdictStatus:
    return VerdictStatus.FAIL if " ".join(token.lower().split()) in _FAIL_TOKENS else VerdictStatus.PASS


def verdict_lines(own: Sequence[str | None]) -> list[VerdictLine]:
    """The own text's verdict lines (whole lines only), in order."""
    found = []
    for i, line in enumerate(own):
        if line is None:
            continue
        match = _VERDICT_LINE.match(line)
        if match:
            token = match.group("contract") or match.group("legacy")
            found.append(VerdictLine(i, line.strip(), _status_of(token),
                                     "contract" if match.group("contract") else "legacy"))
    return found


def _request_blocks(own: Sequence[str | None], verdict_at: set[int]) -> tuple[list[int], set[int]]:
    """The request headings' indexes, and every index inside a request block (up to the next heading
    or verdict line)."""
    heads: list[int] = []
    inside: set[int] = set()
    current = False
    for i, line in enumerate(own):
        if line is None:
            continue
        heading = _HEADING.match(line)
        if heading:
            current = bool(_REQUEST_HEADING.search(heading.group(2)))
            if current:
                heads.append(i)
        elif i in verdict_at:
            current = False
        if current:
            inside.add(i)
    return heads, inside


def _lines_between(own: Sequence[str | None], start: int, stop: int | None = None) -> list[tuple[int, str]]:
    out = []
    for i in range(start + 1, len(own) if stop is None else stop):
        line = own[i]
        if line is not None and line.strip():
            out.append((i, line.strip().lstrip("-*• ").strip()))
    return out


def _findings(pairs: Iterable[tuple[int, str]]) -> list[str]:
    seen: dict[int, str] = {}
    for index, text in pairs:
        seen.setdefault(index, text)
    return [seen[k] for k in sorted(seen)][:MAX_FINDINGS]


def _signal_reason(signals: Sequence[FailureSignal], limit: int = 5) -> str:
    shown = "; ".join(f"line {s.line} ({s.signal}): {s.text[:160]!r}" for s in signals[:limit])
    more = f"; and {len(signals) - limit} more" if len(signals) > limit else ""
    return shown + more


def parse_verdict(raw: str | None, *, quoted: Sequence[str] = ()) -> ParsedVerdict:
    """Classify one raw verifier output; see the module docstring for the grammar."""
    raw = raw or ""
    if not raw.strip():
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="empty",
                             reasons=["verifier output is empty"])
    structured, invalid = structured_verdict(raw)
    if invalid is not None:
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="invalid_structured", structured=True,
                             own_chars=len(raw.strip()),
                             reasons=[f"the verifier's JSON reply is not a valid verdict ({invalid})"])
    if structured is not None:
        read = parse_verdict(render_structured(structured), quoted=quoted)
        return read.model_copy(update={"structured": True, "reasons": [
            f"JSON verdict (status {structured.status}, {len(structured.findings)} finding(s)) read in the "
            "contract's form", *read.reasons]})
    own, masked_count = own_lines(raw, quoted)
    own_text = "\n".join(line if line is not None else "" for line in own)
    own_chars = len(own_text.strip())
    line_starts = [0]
    for line in own:
        line_starts.append(line_starts[-1] + len(line or "") + 1)

    def line_of(offset: int) -> int:
        return next(i for i in range(len(line_starts) - 1) if offset < line_starts[i + 1]) + 1

    markers = [MarkerFound(name=h.name, category=h.category, strong=h.strong, matched=h.matched[:200],
                           line=line_of(h.start)) for h in find_markers(own_text)]
    lines = verdict_lines(own)
    at = {v.index for v in lines}
    request_heads, request_block = _request_blocks(own, at)
    failures = find_failure_signals(own, skip=at | request_block, quoted=quoted)
    common = {"markers": markers, "masked_lines": masked_count, "own_chars": own_chars,
              "failure_signals": failures}
    last = lines[-1] if lines else None
    supplement_requested = any(i > (last.index if last else -1) for i in request_heads)

    strong = [m for m in markers if m.strong]
    if strong:
        found = ", ".join(sorted({f"{m.name} ({m.matched!r})" for m in strong}))
        reasons = [f"known broken marker beats any verdict token: {found}"]
        if last:
            reasons.append(f"verdict line {last.text!r} ignored: the output is an error, not a verdict")
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind=strong[0].category,
                             verdict_line=last.text if last else None,
                             verdict_line_no=last.index + 1 if last else None, source=last.source if last else None,
                             supplement_requested=supplement_requested, reasons=reasons, **common)

    if last and not supplement_requested:
        return _from_verdict_lines(own, lines, failures, common)

    if supplement_requested:
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="no_verdict", supplement_requested=True,
                             reasons=["the verifier asked for a supplement instead of giving a verdict"],
                             **common)
    weak = [m for m in markers if not m.strong]
    if weak:
        found = ", ".join(sorted({f"{m.name} ({m.matched!r})" for m in weak}))
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind=weak[0].category,
                             reasons=[f"no verdict line, and the output reads as an error: {found}"],
                             **common)
    tokens = [s for s in failures if s.verdict_token]
    if tokens:
        first = tokens[0]
        return ParsedVerdict(status=VerdictStatus.FAIL, verdict_line=first.text, verdict_line_no=first.line,
                             source="failure_signal", findings=_findings((s.line - 1, s.text) for s in failures),
                             reasons=["no verdict line, and the verifier's own text carries a FAIL token (never a "
                                      "PASS): " + _signal_reason(tokens)], **common)
    near = [line.strip() for line in own if line is not None and _PASS_NEAR_MISS.match(line)]
    hint = ([f"a verdict token followed by more text is prose, not a verdict line: {near[:3]}"] if near else [])
    if failures:
        hint.append("the verifier's own text names failure(s) but gives no verdict: " + _signal_reason(failures))
    if own_chars < SHORT_OUTPUT_CHARS:
        what = "only quoted material" if own_chars == 0 else f"{own_chars} characters of its own"
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="short_output",
                             reasons=[f"very short output with no verdict line ({what})", *hint], **common)
    return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="no_verdict",
                         reasons=[f"no verdict line in {own_chars} characters of verifier output", *hint], **common)


def _from_verdict_lines(own: Sequence[str | None], lines: Sequence[VerdictLine],
                        failures: Sequence[FailureSignal], common: dict[str, Any]) -> ParsedVerdict:
    """Step 5: the last verdict line, and PASS only when nothing in the own text says FAIL."""
    last = lines[-1]
    conflicting = len({v.status for v in lines}) > 1
    signal_pairs = [(s.line - 1, s.text) for s in failures]
    if last.status is VerdictStatus.FAIL:
        reasons = [f"verdict line {last.index + 1}: {last.text!r} ({last.source})"]
        if conflicting:
            earlier = [v.text for v in lines[:-1] if v.status is VerdictStatus.PASS]
            reasons.append(f"earlier conflicting verdict line(s) overridden by the last: {earlier}")
        return ParsedVerdict(status=VerdictStatus.FAIL, verdict_line=last.text, verdict_line_no=last.index + 1,
                             source=last.source, conflicting=conflicting,
                             findings=_findings([*_lines_between(own, last.index), *signal_pairs]),
                             reasons=reasons, **common)
    earlier_fail = [v for v in lines if v.status is VerdictStatus.FAIL]
    if not earlier_fail and not failures:
        return ParsedVerdict(status=VerdictStatus.PASS, verdict_line=last.text, verdict_line_no=last.index + 1,
                             source=last.source, findings=_findings(_lines_between(own, last.index)),
                             reasons=[f"verdict line {last.index + 1}: {last.text!r} ({last.source}); no failure "
                                      "signal in the verifier's own text"], **common)
    reasons = [f"PASS line {last.index + 1} {last.text!r} overruled: a PASS must be unanimous, and the "
               "verifier's own text says FAIL"]
    if earlier_fail:
        decider = earlier_fail[-1]
        after = _lines_between(own, decider.index, next(v.index for v in lines if v.index > decider.index))
        reasons.append(f"earlier verdict line {decider.index + 1}: {decider.text!r} is not withdrawn by a later PASS")
        line, line_no, source = decider.text, decider.index + 1, decider.source
        pairs = [*after, *signal_pairs]
    else:
        line, line_no, source = failures[0].text, failures[0].line, "failure_signal"
        pairs = signal_pairs
    if failures:
        reasons.append("failure signal(s) in the verifier's own text: " + _signal_reason(failures))
    return ParsedVerdict(status=VerdictStatus.FAIL, verdict_line=line, verdict_line_no=line_no, source=source,
                         conflicting=True, downgraded=True, overruled_line=last.text, findings=_findings(pairs),
                         reasons=reasons, **common)


def verdict_from_output(raw: str | None, verifier: str, *, quoted: Sequence[str] = ()) -> Verdict:
    """``parse_verdict`` straight into the kernel's ``Verdict``."""
    return parse_verdict(raw, quoted=quoted).to_verdict(verifier, raw or "")


__all__ = ["MAX_FINDINGS", "VERDICT_CONTRACT", "VERDICT_SCHEMA", "FailureSignal", "ParsedVerdict",
           "StructuredVerdict", "VerdictLine", "own_lines", "parse_verdict", "render_structured", "structured_verdict",
           "verdict_from_output", "verdict_lines"]

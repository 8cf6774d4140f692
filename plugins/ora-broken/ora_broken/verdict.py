"""Reading a verifier's raw output as PASS, FAIL or BROKEN, under a verdict-line contract.

The contract (give ``VERDICT_CONTRACT`` to every verifier model)::

    ...the verifier's reasoning...

    ## VERDICT
    VERDICT: PASS            <- or FAIL; alone on its line, in the final section
    <optional one-line reasons>

How ``parse_verdict`` reads an output:

1. **Own text only.** Material the verifier *quotes* is masked before anything is read:
   fenced code blocks, ``>`` blockquotes, sections whose heading says they carry quoted
   material (``## SUPPLEMENTAL RAG RESULT``, ``## EVIDENCE``, ``## ANALYSIS UNDER REVIEW`` ...),
   and verbatim copies of the texts the caller passes as ``quoted`` (the subject under
   verification, the retrieved chunks): a run of two or more of their lines, or one line of
   40 characters or more. Verdict words, broken markers and ``## SUPPLEMENTAL RAG REQUEST``
   blocks inside the analysed text or the chunks are therefore never the verifier's.
2. **Known broken markers beat verdict tokens**: an exception substituted into the output
   (the legacy ``VERIFIED\\n[Verification error, auto-pass: ...]``), a Playwright/browser
   session error, an expired session or login wall, a rate limit or quota message, an HTTP
   5xx -> BROKEN, whatever verdict words surround them.
3. **The verdict line.** A ``VERDICT: PASS|FAIL`` line (``**VERDICT:** FAIL``, ``Verdict —
   pass`` ...) alone on its line. When the own text has none, the legacy tokens count: a line
   *starting* with ``VERIFIED`` (PASS) or ``VERIFICATION FAILED`` / ``NOT VERIFIED`` (FAIL), or a
   bare ``PASS``/``FAIL`` line. The last verdict line decides; earlier, different ones are
   recorded as ``conflicting``.
4. **Real verdict tokens beat the short-output rule**: ``VERIFIED. Holds.`` is a PASS. Without a
   verdict line the output is BROKEN: ``empty``, ``short_output`` (under 80 characters of own
   text: a garbled reply), a weak marker's category (a timeout, a connection error), or
   ``no_verdict``. A verifier that gave no verdict has not verified: never PASS.
5. A ``## SUPPLEMENTAL RAG REQUEST`` block in the own text with no verdict line after it sets
   ``supplement_requested`` (the kernel runs the supplement and re-asks); the status is then
   BROKEN (``no_verdict``) until the re-asked verifier answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ora_core.api import Verdict, VerdictStatus, lazy_compile

from .markers import BrokenCategory, find_markers

BrokenKind = Literal[
    "exception_substitution", "browser_session", "backend_error", "rate_limit",
    "empty", "short_output", "no_verdict",
]

SHORT_OUTPUT_CHARS = 80
QUOTED_LINE_MIN_CHARS = 40

VERDICT_CONTRACT = """\
End your reply with a final section in exactly this form:

## VERDICT
VERDICT: PASS

or `VERDICT: FAIL` followed by one line per failed criterion. The verdict line stands alone on
its line and nothing but reasons follows it. When you quote the text under review or the
evidence, put the quotation in a fenced block or after `> `, never a bare verdict line.
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
_REQUEST_HEADING = lazy_compile(r"supplemental rag request", re.IGNORECASE)
_CONTRACT_LINE = lazy_compile(
    r"^[\s*_#-]*verdict[\s*_]*[:：\-–—][\s*_`]*"
    r"(?P<token>pass(?:ed)?|fail(?:ed)?|verified|not verified|verification failed)\b[\s*_`.!]*",
    re.IGNORECASE,
)
_LEGACY_LINE = lazy_compile(
    r"^[\s*_#-]*(?P<token>VERIFICATION FAILED|FAILED VERIFICATION|NOT VERIFIED|VERIFICATION PASSED"
    r"|VERIFIED)\b"
    r"|^[\s*_#-]*(?P<bare>PASS|FAIL)[\s*_.!]*$"
)
_FAIL_TOKENS = {"fail", "failed", "not verified", "verification failed", "failed verification"}


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
    verdict_line: str | None = None
    verdict_line_no: int | None = None  # 1-based line of the decisive verdict line
    source: Literal["contract", "legacy"] | None = None
    conflicting: bool = False
    supplement_requested: bool = False
    markers: list[MarkerFound] = Field(default_factory=list)
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


def _quoted_line_set(quoted: Iterable[str]) -> set[str]:
    lines: set[str] = set()
    for text in quoted:
        for line in (text or "").splitlines():
            stripped = line.strip()
            if stripped:
                lines.add(stripped)
    return lines


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
            if quoting_level is None and _QUOTING_HEADING.search(heading.group(2)) \
                    and not _REQUEST_HEADING.search(heading.group(2)) \
                    and not re.search(r"\bverdict\b", heading.group(2), re.IGNORECASE):
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


def _verdict_lines(own: list[str | None]) -> tuple[list[tuple[int, str, str]], str | None]:
    contract, legacy = [], []
    for i, line in enumerate(own):
        if line is None:
            continue
        match = _CONTRACT_LINE.match(line)
        if match:
            contract.append((i, line.strip(), match.group("token").lower()))
            continue
        match = _LEGACY_LINE.match(line)
        if match:
            legacy.append((i, line.strip(), (match.group("token") or match.group("bare")).lower()))
    if contract:
        return contract, "contract"
    if legacy:
        return legacy, "legacy"
    return [], None


def _status_of(token: str) -> VerdictStatus:
    return VerdictStatus.FAIL if token in _FAIL_TOKENS else VerdictStatus.PASS


def parse_verdict(raw: str | None, *, quoted: Sequence[str] = ()) -> ParsedVerdict:
    """Classify one raw verifier output; see the module docstring for the contract."""
    raw = raw or ""
    if not raw.strip():
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="empty",
                             reasons=["verifier output is empty"])
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
    common = {"markers": markers, "masked_lines": masked_count, "own_chars": own_chars}

    lines, source = _verdict_lines(own)
    request_lines = [i for i, line in enumerate(own)
                     if line is not None and (h := _HEADING.match(line)) and _REQUEST_HEADING.search(h.group(2))]
    last_verdict = lines[-1][0] if lines else -1
    supplement_requested = any(i > last_verdict for i in request_lines)

    strong = [m for m in markers if m.strong]
    if strong:
        first = strong[0]
        found = ", ".join(sorted({f"{m.name} ({m.matched!r})" for m in strong}))
        reasons = [f"known broken marker beats any verdict token: {found}"]
        if lines:
            reasons.append(f"verdict line {lines[-1][1]!r} ignored: the output is an error, not a verdict")
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind=first.category,
                             verdict_line=lines[-1][1] if lines else None,
                             verdict_line_no=lines[-1][0] + 1 if lines else None, source=source,
                             supplement_requested=supplement_requested, reasons=reasons, **common)

    if lines and not supplement_requested:
        index, text, token = lines[-1]
        status = _status_of(token)
        conflicting = len({_status_of(t) for _, _, t in lines}) > 1
        reasons = [f"verdict line {index + 1}: {text!r} ({source})"]
        if conflicting:
            earlier = [t for _, t, tok in lines[:-1] if _status_of(tok) is not status]
            reasons.append(f"earlier conflicting verdict line(s) overridden by the last: {earlier}")
        return ParsedVerdict(status=status, verdict_line=text, verdict_line_no=index + 1, source=source,
                             conflicting=conflicting, reasons=reasons, **common)

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
    if own_chars < SHORT_OUTPUT_CHARS:
        what = "only quoted material" if own_chars == 0 else f"{own_chars} characters of its own"
        return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="short_output",
                             reasons=[f"very short output with no verdict line ({what})"], **common)
    return ParsedVerdict(status=VerdictStatus.BROKEN, broken_kind="no_verdict",
                         reasons=[f"no verdict line in {own_chars} characters of verifier output"], **common)


MAX_FINDINGS = 20


def findings_after(raw: str, parsed: ParsedVerdict, quoted: Sequence[str] = ()) -> list[str]:
    """The verifier's own lines after its decisive verdict line (the reasons for a FAIL)."""
    if parsed.verdict_line_no is None:
        return []
    own, _ = own_lines(raw, quoted)
    out = []
    for line in own[parsed.verdict_line_no:]:
        if line is None or not line.strip():
            continue
        out.append(line.strip().lstrip("-*• ").strip())
        if len(out) >= MAX_FINDINGS:
            break
    return out


def verdict_from_output(raw: str | None, verifier: str, *, quoted: Sequence[str] = ()) -> Verdict:
    """``parse_verdict`` straight into the kernel's ``Verdict``."""
    return parse_verdict(raw, quoted=quoted).to_verdict(verifier, raw or "")

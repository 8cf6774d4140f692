"""Verification dispatch: PASS, FAIL or BROKEN, and BROKEN is never PASS (seed 000, #9).

``verification.verifier`` (cross-verification, gears 2-3 cycles) and
``verification.final_verifier`` (the last gate) name a registered verifier, or ``"model"``:
an LLM verifier through the ``verifier`` / ``final_verifier`` role, under the Supplemental RAG
protocol, whose raw output is read by the ``verifier_output`` detectors (the BROKEN plugin).

- A verifier that raises is BROKEN, with the exception (class, message, stack) recorded as the
  contingency ``<step>-verifier-exception``: the auto-PASS-on-exception path does not exist.
- A registered verifier that is not installed is BROKEN (``<step>-verifier-not-installed``).
- A registered verifier that returns text instead of a ``Verdict`` has its text read like a
  model verifier's raw output; anything else it returns is BROKEN.
- Model verifier output: a strong ``broken`` signal from any ``verifier_output`` detector is
  BROKEN (known broken markers beat verdict tokens); otherwise the verdict is the last own
  ``VERDICT: PASS|FAIL`` line (legacy: a line starting ``VERIFIED`` / ``VERIFICATION FAILED``);
  no verdict line is BROKEN. With no ``verifier_output`` detector installed the output cannot
  be checked for broken markers and is BROKEN too, saying so.

Verifiers receive the subject, an ``EvidencePackage`` (the context package's chunks plus every
supplement result of the turn, as a ``chunks`` list, and the ``ContextPackage`` itself), the
mode's verification criteria and the turn as ``ctx``.
"""

from __future__ import annotations

import asyncio
import re
import traceback
from typing import Any, Literal

from . import faults, supplement
from .errors import BackendError, PluginError
from .models import FaultPoint, Signal, Verdict, VerdictStatus

Which = Literal["verifier", "final_verifier"]
QUOTED_KEY = "verifier_quoted"  # where verifier_output detectors find the texts the verifier was shown

VERDICT_CONTRACT = """\
End your reply with a final section in exactly this form:

## VERDICT
VERDICT: PASS

or `VERDICT: FAIL` followed by one line per failed criterion. The verdict line stands alone on
its line. When you quote the analysis under review or the evidence, put the quotation in a
fenced block or after `> `, never a bare verdict line."""

VERIFIER_TASK = """\
ROLE: VERIFIER. You grade the analysis under review against the VERIFICATION CRITERIA and the
evidence package. You did not write it and have nothing to protect. Check every specific fact
(names, dates, figures, quotations) against the evidence; an unsupported specific is a FAIL.
Do not rewrite the analysis."""

DEFAULT_CRITERIA = ("PASS when every specific fact (name, date, figure, quotation) is supported by "
                    "the evidence package and no claim is stated with more confidence than the "
                    "evidence warrants; FAIL otherwise.")

_VERDICT_LINE = re.compile(r"^[\s*_#>-]*verdict[\s*_]*[:：\-–—][\s*_`]*(?P<token>pass(?:ed)?|fail(?:ed)?|verified|"
                           r"not verified|verification failed)\b", re.IGNORECASE)
_LEGACY_LINE = re.compile(r"^[\s*_#-]*(?P<token>VERIFICATION FAILED|NOT VERIFIED|VERIFIED|PASS|FAIL)\b")
_QUOTING = re.compile(r"under review|evidence|supplemental rag result|quot|excerpt|retrieved", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_FAIL = {"fail", "failed", "not verified", "verification failed"}


def read_verdict_line(raw: str, quoted: list[str]) -> tuple[VerdictStatus | None, str]:
    """The verifier's own last verdict line: ``(PASS|FAIL, line)`` or ``(None, "")``.

    Lines inside fences, ``>`` quotations, quoting sections (``## ANALYSIS UNDER REVIEW``,
    ``## EVIDENCE`` ...) and lines copied verbatim from ``quoted`` are not the verifier's."""
    from .supplement import own_lines

    copied = {line.strip() for text in quoted for line in (text or "").splitlines() if line.strip()}
    found: list[tuple[VerdictStatus, str]] = []
    quoting_level: int | None = None
    for line in own_lines(raw):
        if line is None:
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if quoting_level is not None and level <= quoting_level:
                quoting_level = None
            title = heading.group(2)
            if quoting_level is None and _QUOTING.search(title) and "verdict" not in title.lower():
                quoting_level = level
            continue
        if quoting_level is not None or line.strip() in copied:
            continue
        match = _VERDICT_LINE.match(line) or _LEGACY_LINE.match(line)
        if match:
            token = match.group("token").lower()
            found.append((VerdictStatus.FAIL if token in _FAIL else VerdictStatus.PASS, line.strip()))
    contract = [f for f in found if "verdict" in f[1].lower()]
    chosen = (contract or found)[-1] if found else None
    return (chosen[0], chosen[1]) if chosen else (None, "")


def _broken(verifier: str, reasons: list[str], raw: str = "", **data: Any) -> Verdict:
    return Verdict(status=VerdictStatus.BROKEN, verifier=verifier, reasons=reasons, raw_output=raw, data=data)


def verdict_from_raw(gc: Any, verifier: str, raw: str, signals: list[Signal], quoted: list[str]) -> Verdict:
    """Read a raw verifier output: broken markers first, then the verdict line."""
    broken = [s for s in signals if s.kind == "broken" and s.strength == "strong"]
    if broken:
        reasons = []
        for s in broken:
            reasons += [str(r) for r in s.data.get("reasons", [])] or [f"{s.detector}: {s.name} ({s.matched!r})"]
        return _broken(verifier, reasons, raw, signals=[s.name for s in broken])
    if gc.turn.host is None or not gc.turn.host.detectors(layer="verifier_output"):
        return _broken(verifier, ["no verifier_output detector is installed, so the raw verifier output "
                                  "cannot be checked for broken markers (install ora-broken)"], raw)
    status, line = read_verdict_line(raw, quoted)
    if status is None:
        return _broken(verifier, ["no verdict line in the verifier's own output"], raw)
    weak = [s.name for s in signals if s.kind == "broken"]
    after = raw.split(line, 1)[1] if line in raw else ""
    findings = [ln.strip().lstrip("-*• ").strip() for ln in after.splitlines() if ln.strip()][:20]
    return Verdict(status=status, verifier=verifier, reasons=[f"verdict line: {line!r}", *findings],
                   raw_output=raw, data={"weak_signals": weak} if weak else {})


async def verify(gc: Any, *, step: str, subject: str, which: Which = "verifier", slot: str = "",
                 cycle: int = 0, broken_contingency: str | None = None) -> Verdict:
    """Verify ``subject`` in a traced step; record the verdict; never raise for a verifier fault."""
    turn, config = gc.turn, gc.runtime.config
    name = getattr(config.verification, which)
    criteria = gc.section("VERIFICATION CRITERIA") or DEFAULT_CRITERIA
    evidence = gc.evidence()
    quoted = [subject, *(c.text for c in evidence.chunks)]
    kind = "verification" if name == "model" else "deterministic"
    with turn.step(step, kind=kind, verifier=name, which=which, slot=slot, cycle=cycle, subject=subject,
                   criteria=criteria, evidence_chunks=len(evidence.chunks),
                   evidence_sources=sorted({c.provenance.source for c in evidence.chunks})) as st:
        st.health.kind = kind
        point = FaultPoint(site="verify", step=step, role=which, purpose="verifier", step_kind=kind,
                           stream=slot, gear=gc.gear)
        try:
            faults.inject(turn, point)
            if name == "model":
                verdict = await _model_verdict(gc, step, which, subject, criteria, quoted, point)
            else:
                verdict = await _plugin_verdict(gc, step, name, subject, evidence, criteria, quoted, point)
        except Exception as exc:  # noqa: BLE001 - a verifier fault is BROKEN, recorded by name, never PASS
            stack = "".join(traceback.format_exception(exc))[-3000:]
            verdict = _broken(name, [f"the verifier raised {type(exc).__name__}: {exc}"],
                              exception={"error_class": type(exc).__name__, "message": str(exc), "stack": stack})
            st.contingency(f"{step}-verifier-exception", f"{type(exc).__name__}: {exc}", severity="degraded",
                           error_class=type(exc).__name__)
        st.health.verdict = verdict.status.value
        if verdict.status is VerdictStatus.BROKEN:
            st.contingency(broken_contingency or f"{step}-verifier-BROKEN-not-verified",
                           "; ".join(verdict.reasons)[:500], severity="degraded", verifier=name)
        st.output.update(verdict=verdict.model_dump(mode="json"), status=verdict.status.value)
    gc.verdicts[step] = verdict.status.value
    return verdict


async def _plugin_verdict(gc: Any, step: str, name: str, subject: str, evidence: Any, criteria: str,
                          quoted: list[str], point: FaultPoint) -> Verdict:
    turn = gc.turn
    try:
        verifier = turn.host.get("verifier", name)
    except PluginError as exc:
        turn.contingency(f"{step}-verifier-not-installed", step, str(exc), severity="degraded", verifier=name)
        return _broken(name, [f"verifier {name!r} is not installed: {exc}"])
    result = await asyncio.to_thread(verifier.verify, subject, evidence, criteria, turn)
    result = faults.inject(turn, point.model_copy(update={"site": "verifier_output"}), result)
    if isinstance(result, Verdict):
        return result if result.verifier else result.model_copy(update={"verifier": name})
    if isinstance(result, str):
        signals = _detect_raw(gc, step, result, quoted)
        verdict = verdict_from_raw(gc, name, result, signals, quoted)
        verdict.reasons.insert(0, "the verifier returned text, not a Verdict; read as raw verifier output")
        return verdict
    if isinstance(result, dict):
        try:
            return Verdict.model_validate(result)
        except ValueError as exc:
            return _broken(name, [f"the verifier returned a dict that is not a Verdict: {exc}"], repr(result)[:2000])
    return _broken(name, [f"the verifier returned {type(result).__name__}, not a Verdict"], repr(result)[:2000])


def _detect_raw(gc: Any, step: str, raw: str, quoted: list[str]) -> list[Signal]:
    data = gc.turn.data
    data[QUOTED_KEY] = quoted
    data["evidence"] = gc.evidence()
    try:
        return gc.turn.detect("verifier_output", raw, step=step)
    finally:
        data.pop(QUOTED_KEY, None)


async def _model_verdict(gc: Any, step: str, which: Which, subject: str, criteria: str, quoted: list[str],
                         point: FaultPoint) -> Verdict:
    from .pipeline.gears.prompts import evidence_block
    from .reliability import StepSpec, _call, _StepState

    package = f"## VERIFICATION CRITERIA\n{criteria}\n\n## ANALYSIS UNDER REVIEW\n{subject}"
    spec = StepSpec(name=step, role=which, purpose="verifier", prompt_key=f"verify.{which}",
                    task=VERIFIER_TASK + "\n\n" + VERDICT_CONTRACT, package=package,
                    evidence=evidence_block(gc), stream=point.stream,
                    layer="verifier_output", quoted=quoted)
    state = _StepState()
    try:
        result = await _call(gc, spec, state, package, 1)
    except BackendError as exc:
        supplement.note_step(gc.turn, step, state.records)
        gc.turn.contingency(f"{step}-verifier-backend-{exc.kind}", step, str(exc), severity="degraded",
                            error=exc.describe())
        return _broken("model", [f"the verifier's backend failed: {exc}"], error=exc.describe())
    supplement.note_step(gc.turn, step, state.records)
    raw = faults.inject(gc.turn, point.model_copy(update={"site": "verifier_output"}), result.text)
    signals = result.signals if raw == result.text else _detect_raw(gc, step, raw, quoted)
    verdict = verdict_from_raw(gc, "model", raw, signals, quoted)
    verdict.data["model"] = getattr(result.completion, "model", "")
    return verdict

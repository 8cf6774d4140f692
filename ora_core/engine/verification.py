"""Verification dispatch: PASS, FAIL or BROKEN, and BROKEN is never PASS (seed 000, #9).

``verification.verifier`` (cross-verification, gears 2-4 cycles) and
``verification.final_verifier`` (the last gate) name a registered verifier: ``grounding`` (the
non-LLM check against the evidence), ``model`` (an LLM verifier through the ``verifier`` /
``final_verifier`` role: plugin ora-broken), or any third party's. The engine holds no verdict
parser of its own; it applies the rules of control flow:

- A verifier that raises is BROKEN, with the exception (class, message, stack) recorded as the
  contingency ``<step>-verifier-exception``: the auto-PASS-on-exception path does not exist. A
  verifier that does not return within ``[verification] timeout_s`` raises ``VerifierTimeout`` the
  same way (one that asks a model is bounded by its backends' deadlines instead).
- A verifier that is not installed is BROKEN (``<step>-verifier-not-installed``).
- A verifier returns a ``Verdict``; or raw text (a ``str``, or a ``ModelReply`` whose signals the
  engine already has), which is read by the ``verifier_output`` detectors: a strong ``broken``
  signal is BROKEN (known broken markers beat verdict tokens); else the last ``verdict`` signal
  (``data.status`` PASS or FAIL) decides; no verdict signal is BROKEN. With no
  ``verifier_output`` detector installed the text cannot be read and is BROKEN too, saying so.

Verifiers receive the subject, an ``EvidencePackage`` (the context package's chunks plus every
supplement result of the turn, as a ``chunks`` list, and the ``ContextPackage`` itself), the
mode's verification criteria and a ``CallContext`` as ``ctx``: the turn, plus ``ctx.verification``
(which step and role it serves) and ``await ctx.ask_model(request)`` for a verifier that asks a
model. A verifier whose ``verify`` is a coroutine function is awaited; a plain one runs in a
thread.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from typing import Any, Literal

from ora_core.engine import faults, lineage
from ora_core.engine.bounded import call_in_thread
from ora_core.engine.lineage import ModelIdentity
from ora_core.engine.reliability import ask_model, judged_context
from ora_core.engine.turn_state import GearContext
from ora_core.kernel.components import Verifier
from ora_core.kernel.ctx_data import EVIDENCE, VERIFIER_QUOTED
from ora_core.kernel.errors import PluginError, VerifierTimeout
from ora_core.kernel.models import (
    EvidencePackage,
    FaultPoint,
    ModelReply,
    ModelRequest,
    Signal,
    Verdict,
    VerdictStatus,
    VerificationCall,
)
from ora_core.kernel.signals import SignalKind
from ora_core.kernel.trace import CallContext, TurnContext

Which = Literal["verifier", "final_verifier"]

DEFAULT_CRITERIA = ("PASS when every specific fact (name, date, figure, quotation) is supported by "
                    "the evidence package and no claim is stated with more confidence than the "
                    "evidence warrants; FAIL otherwise.")


def _broken(verifier: str, reasons: list[str], raw: str = "", **data: Any) -> Verdict:
    return Verdict(status=VerdictStatus.BROKEN, verifier=verifier, reasons=reasons, raw_output=raw, data=data)


def verdict_from_signals(verifier: str, raw: str, signals: list[Signal], *, readable: bool) -> Verdict:
    """A verifier's raw text read through the ``verifier_output`` detectors' signals: broken
    markers first, then the last verdict. ``readable``: some ``verifier_output`` detector is
    installed (without one nothing can tell a verdict from an error page)."""
    broken = [s for s in signals if s.kind == SignalKind.BROKEN and s.strength == "strong"]
    if broken:
        reasons = []
        for s in broken:
            reasons += [str(r) for r in s.data.get("reasons", [])] or [f"{s.detector}: {s.name} ({s.matched!r})"]
        return _broken(verifier, reasons, raw, signals=[s.name for s in broken])
    if not readable:
        return _broken(verifier, ["no verifier_output detector is installed, so the raw verifier output "
                                  "cannot be read (install ora-broken)"], raw)
    verdicts = [s for s in signals if s.kind == SignalKind.VERDICT
                and str(s.data.get("status", "")).upper() in (VerdictStatus.PASS.value, VerdictStatus.FAIL.value)]
    if not verdicts:
        return _broken(verifier, ["no verdict line in the verifier's own output"], raw)
    decisive = verdicts[-1]
    status = VerdictStatus(str(decisive.data["status"]).upper())
    reasons = [f"verdict line: {decisive.matched!r}", *[str(r) for r in decisive.data.get("findings", [])]]
    weak = [s.name for s in signals if s.kind == SignalKind.BROKEN]
    data: dict[str, Any] = {"verdict_signal": decisive.detector}
    if weak:
        data["weak_signals"] = weak
    return Verdict(status=status, verifier=verifier, reasons=reasons, raw_output=raw, data=data)


async def verify(gc: GearContext, *, step: str, subject: str, which: Which = "verifier", slot: str = "",
                 cycle: int = 0, broken_contingency: str | None = None, author: ModelIdentity | None = None,
                 prefer: str | None = None) -> Verdict:
    """Verify ``subject`` in a traced step; record the verdict; never raise for a verifier fault.

    ``author``: the model that wrote ``subject`` (``lineage.author_of``). A verifier that asks a
    model is checked against it by the lineage rule (``ora_core.engine.lineage``): the verdict is
    labelled, and a same or unknown lineage is named (``degrade``), re-routed or BROKEN
    (``refuse``), or only labelled (``allow``). ``prefer``: a backend to verify on when its lineage
    differs from the author's (Gear 4's cross-verification: the other stream's backend)."""
    turn, config = gc.turn, gc.runtime.config
    name = getattr(config.verification, which)
    criteria = gc.section("VERIFICATION CRITERIA") or DEFAULT_CRITERIA
    evidence = gc.evidence()
    quoted = [subject, *(c.text for c in evidence.chunks)]
    verifier, missing = _resolve(turn, name)
    kind = "verification" if getattr(verifier, "uses_model", False) else "deterministic"
    policy = lineage.policy_of(config)
    edge = f"{which} ({name}) on {author.role if author and author.role else 'the'} output"
    with turn.step(step, kind=kind, verifier=name, which=which, slot=slot, cycle=cycle, subject=subject,
                   criteria=criteria, evidence_chunks=len(evidence.chunks),
                   evidence_sources=sorted({c.provenance.source for c in evidence.chunks}),
                   author=author.model_dump(mode="json") if author else None) as st:
        st.health.kind = kind
        point = FaultPoint(site="verify", step=step, role=which, purpose="verifier", step_kind=kind,
                           stream=slot, gear=gc.gear)
        call = VerificationCall(step=step, role=which, slot=slot, cycle=cycle, gear=gc.gear)
        made = len(turn.calls)
        edge_gc, routed, refused = gc, "", ""
        if kind == "verification":  # a model verifier: routed by the lineage rule before it runs
            edge_gc, routed, refused = judged_context(gc, which, author, step, prefer)
            if routed:
                st.output["routed_to"] = routed
        try:
            faults.inject(turn, point)
            if verifier is None:
                turn.contingency(f"{step}-verifier-not-installed", step, missing, severity="degraded", verifier=name)
                verdict = _broken(name, [f"verifier {name!r} is not installed: {missing}"])
            elif refused:
                verdict = _broken(name, [refused])
            else:
                verdict = await _plugin_verdict(edge_gc, step, name, verifier, subject, evidence, criteria, quoted,
                                                point, call)
        except Exception as exc:  # noqa: BLE001 - a verifier fault is BROKEN, recorded by name, never PASS
            stack = "".join(traceback.format_exception(exc))[-3000:]
            verdict = _broken(name, [f"the verifier raised {type(exc).__name__}: {exc}"],
                              exception={"error_class": type(exc).__name__, "message": str(exc), "stack": stack})
            st.contingency(f"{step}-verifier-exception", f"{type(exc).__name__}: {exc}", severity="degraded",
                           error_class=type(exc).__name__)
        if refused:  # nothing ran: the planned judge is what was refused
            judged = lineage.refused(edge, author, config, gc.backend_for(which), which, refused)
        else:
            judged = lineage.check(edge, author, lineage.ran_in(turn, step, made), policy, routed_to=routed)
        verdict = _labelled(verdict, judged)
        st.output["lineage"] = judged.model_dump(mode="json")
        if judged.flagged:
            lineage.record(turn, step, judged)
            if policy == "refuse" and verdict.status is not VerdictStatus.BROKEN:
                verdict = _broken(name, [f"same_lineage = 'refuse': {judged.reason}; the verdict "
                                         f"({verdict.status.value}) of a model of the same or an unknown lineage "
                                         "does not count"], verdict.raw_output, lineage=judged.relation,
                                  lineage_check=judged.model_dump(mode="json"), refused_verdict=verdict.status.value)
        st.health.verdict = verdict.status.value
        if verdict.status is VerdictStatus.BROKEN:
            st.contingency(broken_contingency or f"{step}-verifier-BROKEN-not-verified",
                           "; ".join(verdict.reasons)[:500], severity="degraded", verifier=name)
        st.output.update(verdict=verdict.model_dump(mode="json"), status=verdict.status.value)
    gc.verdicts[step] = verdict.status.value
    return verdict


def _labelled(verdict: Verdict, judged: lineage.LineageCheck) -> Verdict:
    """``verdict`` with its edge's lineage in its data (``lineage``: same | unknown | different |
    not-a-model, and the whole check under ``lineage_check``)."""
    data = {**verdict.data, "lineage": judged.relation, "lineage_check": judged.model_dump(mode="json")}
    return verdict.model_copy(update={"data": data})


def _resolve(turn: TurnContext, name: str) -> tuple[Verifier | None, str]:
    """The verifier registered as ``name``, or None and why."""
    if turn.host is None:
        return None, "no plugin host"
    try:
        return turn.host.get("verifier", name), ""
    except PluginError as exc:
        return None, str(exc)


async def _plugin_verdict(gc: GearContext, step: str, name: str, verifier: Verifier, subject: str,
                          evidence: EvidencePackage, criteria: str, quoted: list[str], point: FaultPoint,
                          call: VerificationCall) -> Verdict:
    turn = gc.turn

    async def gateway(request: ModelRequest, ctx: CallContext) -> ModelReply:
        return await ask_model(gc, request, ctx)

    ctx = CallContext(turn, verification=call, gateway=gateway)
    timeout_s = float(getattr(gc.runtime.config.verification, "timeout_s", 60.0))
    try:
        if inspect.iscoroutinefunction(verifier.verify):
            if getattr(verifier, "uses_model", False):  # bounded by its backends' deadlines
                result = await verifier.verify(subject, evidence, criteria, ctx)
            else:
                result = await asyncio.wait_for(verifier.verify(subject, evidence, criteria, ctx), timeout_s)
        else:
            result = await call_in_thread(verifier.verify, subject, evidence, criteria, ctx, timeout_s=timeout_s,
                                          name=f"ora-verify-{name}")
    except TimeoutError:
        raise VerifierTimeout(f"verifier {name!r} did not return within {timeout_s:g} s "
                              "([verification] timeout_s); not verified") from None
    result = faults.inject(turn, point.model_copy(update={"site": "verifier_output"}), result)
    if isinstance(result, Verdict):
        return result if result.verifier else result.model_copy(update={"verifier": name})
    readable = turn.host is not None and bool(turn.host.detectors(layer="verifier_output"))
    if isinstance(result, ModelReply):
        verdict = verdict_from_signals(name, result.text, result.signals, readable=readable)
        verdict.data["model"] = result.model
        return verdict
    if isinstance(result, str):
        signals = _detect_raw(gc, step, result, quoted)
        verdict = verdict_from_signals(name, result, signals, readable=readable)
        verdict.reasons.insert(0, "the verifier returned text, not a Verdict; read as raw verifier output")
        return verdict
    if isinstance(result, dict):
        try:
            return Verdict.model_validate(result)
        except ValueError as exc:
            return _broken(name, [f"the verifier returned a dict that is not a Verdict: {exc}"], repr(result)[:2000])
    return _broken(name, [f"the verifier returned {type(result).__name__}, not a Verdict"], repr(result)[:2000])


def _detect_raw(gc: GearContext, step: str, raw: str, quoted: list[str]) -> list[Signal]:
    data = gc.turn.data
    EVIDENCE.put(data, gc.evidence())
    with VERIFIER_QUOTED.given(data, quoted):
        return gc.turn.detect("verifier_output", raw, step=step)

"""Pre-routing: Stage 1 signals on the cleaned prompt, Stage 2 dispatch.

Stage 1 runs the ``mode_signal`` detectors of layer ``cleaned_prompt`` (their vocabulary is the
modes' front matter) and the defensive bypass re-scan (kind ``bypass`` on the same layer).
Stage 2 dispatches deterministically:

- a forced mode (``--mode``) wins (``classification_confidence: forced``);
- a strong bypass element revealed by Phase A, with no strong mode signal, goes to ``simple``;
- one mode with more strong signals than any other: ``high``;
- anything else leaves a *pending clarification* (seed 000, #2), never swallowed: the turn
  stops with ``needs_clarification`` and the question, or, with best-guess on, continues on the
  top candidate (``best-guess``) or on ``pipeline.fallback_mode`` when nothing matched
  (``fallback``), keeping the question as ``pending_clarification_swallowed``.

Every decision carries a ``signal_strength_summary`` (#13); a high-confidence dispatch resting
on exactly one strong signal raises ``single_signal_high_confidence``.
"""

from __future__ import annotations

from typing import Any

from ora_core.kernel.models import ModeCandidate, RoutingDecision, Signal, SignalStrengthSummary

STEP = "pre-routing"
STRONG_WEIGHT = 3.0
WEAK_WEIGHT = 1.0


def candidates_from(signals: list[Signal], known: Any) -> tuple[list[ModeCandidate], list[Signal]]:
    """Group mode signals by mode (each phrase counted once); signals naming unknown modes apart."""
    by_mode: dict[str, ModeCandidate] = {}
    unknown: list[Signal] = []
    for s in signals:
        if not s.mode or s.mode not in known:
            unknown.append(s)
            continue
        cand = by_mode.setdefault(s.mode, ModeCandidate(mode=s.mode))
        bucket = cand.strong if s.strength == "strong" else cand.weak
        if s.name not in bucket:
            bucket.append(s.name)
    for cand in by_mode.values():
        cand.score = STRONG_WEIGHT * len(cand.strong) + WEAK_WEIGHT * len(cand.weak)
    ranked = sorted(by_mode.values(), key=lambda c: (-len(c.strong), -c.score, c.mode))
    return ranked, unknown


def summarize(signals: list[Signal], mode: str | None, confidence: str) -> SignalStrengthSummary:
    strong_for = sorted({s.name for s in signals if s.mode == mode and s.strength == "strong"})
    weak_for = sorted({s.name for s in signals if s.mode == mode and s.strength == "weak"})
    return SignalStrengthSummary(
        total_matches=len(signals),
        strong_matches=sum(1 for s in signals if s.strength == "strong"),
        weak_matches=sum(1 for s in signals if s.strength == "weak"),
        dispatched_mode=mode,
        strong_signals_for_dispatched=strong_for,
        weak_signals_for_dispatched=weak_for,
        single_signal_high_confidence=confidence == "high" and len(strong_for) == 1,
    )


def clarification_question(candidates: list[ModeCandidate], library: Any) -> str:
    if not candidates:
        analytical = [m for m in library if m.gear >= 2]
        options = ", ".join(f"{m.title or m.name} ({m.name})" for m in analytical[:5])
        return ("I could not tell what kind of answer you want. Which fits best"
                + (f": {options}?" if options else "?")
                + " Or say 'just answer' for a direct reply.")
    options = []
    for c in candidates[:3]:
        mode = library.modes.get(c.mode)
        title = mode.title if mode is not None and mode.title else c.mode
        options.append(f"{title} ({c.mode}; signals: {', '.join(c.strong + c.weak)})")
    return "Your request fits more than one kind of analysis. Which do you want: " + "; or ".join(options) + "?"


def dispatch(signals: list[Signal], rescan: list[Signal], library: Any, *, forced_mode: str | None,
             best_guess: bool, fallback_mode: str) -> RoutingDecision:
    candidates, _unknown = candidates_from(signals, library)
    if forced_mode:
        mode = library.modes.get(forced_mode)
        return RoutingDecision(mode=forced_mode, requested_gear=mode.gear if mode else None,
                               classification_confidence="forced", candidates=candidates,
                               signal_strength_summary=summarize(signals, forced_mode, "forced"),
                               reasoning=f"mode {forced_mode!r} forced by the caller")
    strong_rescan = [s for s in rescan if s.strength == "strong"]
    if strong_rescan and not any(c.strong for c in candidates):
        return RoutingDecision(
            mode="simple", requested_gear=1, classification_confidence="bypass", candidates=candidates,
            signal_strength_summary=summarize(signals, "simple", "bypass"),
            reasoning=f"the cleaned prompt carries bypass trigger {strong_rescan[0].name!r} and no "
                      "strong mode signal (defensive Stage 1 re-scan)")
    top = candidates[0] if candidates else None
    runner_up = candidates[1] if len(candidates) > 1 else None
    if top is not None and top.strong and (runner_up is None or len(top.strong) > len(runner_up.strong)):
        mode = library.modes[top.mode]
        return RoutingDecision(
            mode=top.mode, requested_gear=mode.gear, classification_confidence="high",
            candidates=candidates, signal_strength_summary=summarize(signals, top.mode, "high"),
            reasoning=f"{top.mode!r} has {len(top.strong)} strong signal(s) ({', '.join(top.strong)}) and "
                      + (f"{runner_up.mode!r} only {len(runner_up.strong)}" if runner_up else "no rival"))
    question = clarification_question(candidates, library)
    if not best_guess:
        why = ("no mode signal in the cleaned prompt" if top is None
               else "no single mode leads on strong signals")
        return RoutingDecision(mode=None, classification_confidence="pending", candidates=candidates,
                               pending_clarification=question,
                               signal_strength_summary=summarize(signals, None, "pending"),
                               reasoning=f"{why}: asking the user")
    if top is not None:
        mode = library.modes[top.mode]
        return RoutingDecision(
            mode=top.mode, requested_gear=mode.gear, classification_confidence="best-guess",
            candidates=candidates, pending_clarification_swallowed=question,
            signal_strength_summary=summarize(signals, top.mode, "best-guess"),
            reasoning=f"best guess: {top.mode!r} leads the candidates; the clarification is kept")
    mode = library.modes.get(fallback_mode)
    return RoutingDecision(
        mode=fallback_mode, requested_gear=mode.gear if mode else None,
        classification_confidence="fallback", candidates=candidates,
        pending_clarification_swallowed=question,
        signal_strength_summary=summarize(signals, fallback_mode, "fallback"),
        reasoning=f"no candidate: fallback mode {fallback_mode!r}; the clarification is kept")


def run_routing(turn: Any, library: Any, cleaned_prompt: str, *, forced_mode: str | None,
                best_guess: bool) -> RoutingDecision:
    fallback_mode = turn.config.pipeline.fallback_mode
    with turn.step(STEP, cleaned_prompt=cleaned_prompt, layer="cleaned_prompt",
                   forced_mode=forced_mode, best_guess=best_guess) as step:
        turn.data["modes"] = library
        if turn.host is not None and not turn.host.detectors(layer="cleaned_prompt", kind="mode_signal"):
            step.contingency("stage1-no-mode-signal-detector",
                             "no detector of kind 'mode_signal' on layer 'cleaned_prompt' is installed",
                             severity="warning")
        signals = turn.detect("cleaned_prompt", cleaned_prompt, step=STEP, kind="mode_signal")
        rescan = turn.detect("cleaned_prompt", cleaned_prompt, step=STEP, kind="bypass")
        decision = dispatch(signals, rescan, library, forced_mode=forced_mode, best_guess=best_guess,
                            fallback_mode=fallback_mode)
        _, unknown = candidates_from(signals, library)
        step.output.update(decision.model_dump(mode="json"))
        step.output["stage1_signals"] = [s.model_dump(mode="json") for s in signals]
        step.output["stage1_bypass_rescan"] = {
            "signals": [s.model_dump(mode="json") for s in rescan],
            "acted": decision.classification_confidence == "bypass",
        }
        if unknown:
            step.output["signals_for_unknown_modes"] = [s.model_dump(mode="json") for s in unknown]
        summary = decision.signal_strength_summary
        if summary.single_signal_high_confidence:
            step.contingency("stage2-single-signal-high-confidence",
                             f"dispatched {decision.mode!r} on one strong signal "
                             f"({summary.strong_signals_for_dispatched[0]!r})", severity="info")
        if decision.classification_confidence in {"best-guess", "fallback"}:
            step.contingency(f"stage2-clarification-pending-ran-{decision.classification_confidence}",
                             f"continued on {decision.mode!r}; the question is kept in the trace",
                             severity="warning", question=decision.pending_clarification_swallowed)
    return decision

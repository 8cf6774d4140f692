"""The ``grounding`` verifier: PASS when every claim of the subject rests on the evidence.

A non-LLM verifier (a different lineage from the models it checks): MiniLM similarity, lexical
overlap and specifics checks, per claim (see ``scoring``). It never PASSes on nothing: an
empty evidence package is a FAIL with the reason ``no evidence``, and a subject with no
checkable claim is a FAIL too (a sentence that only tells back what the question asked is no
claim: ``text.restates_question``). Faults (unreadable package, model that will not load) raise
``VerifierError``; the kernel turns that into BROKEN, never PASS.

``verify(subject, package, criteria, ctx, threshold=None)``:

- ``subject`` — the text under review (protocol sections are set aside, see ``subject``); a
  bare yes/no asserts the question's proposition, so when the package carries the question
  (``EvidencePackage.prompt``, a mapping's ``"question"``) that proposition is what is checked
  (its subject matter must be grounded; a non-LLM check cannot tell "yes" from "no", except
  that a bare "no" may deny the proposition because of a name or figure the evidence lacks, so
  for a denial such specifics are reported but do not fail it);
- ``package`` — the evidence: a ``str``; a list of chunk texts or ``Chunk`` objects; an object
  with ``.chunks`` (the kernel's ``EvidencePackage``, a ``Retrieval``); a mapping with
  ``"text"`` / ``"chunks"`` (see ``evidence.normalise_package``);
- ``criteria`` — the mode's criteria; a non-LLM verifier cannot read them, so the report says
  which checks it ran instead;
- ``ctx`` — the turn (or any object with ``.config``): the threshold is
  ``ctx.config.verification.threshold`` unless ``threshold`` is passed (to ``verify`` or to the
  constructor); the embedder is ``ctx.embedder()`` unless one was passed to the constructor.

Chunks from the ``conversation`` stream (conversation memory: earlier turns, model answers
included) are set aside, and the report says so: an answer grounded in the model's own earlier
answer is circular. ``[plugins.grounding] exclude_streams`` changes the list.
"""

from __future__ import annotations

from typing import Any

from ora_core.api import ConfigError, Verdict, VerdictStatus, VerifierError

from .evidence import normalise_package, package_question
from .options import DEFAULT_EXCLUDED_STREAMS as DEFAULT_EXCLUDED_STREAMS  # re-exported: it lived here
from .options import TABLE as OPTIONS_TABLE
from .options import GroundingOptions
from .scoring import (
    ClaimScore,
    Embedder,
    ScoringWeights,
    lexical_support,
    output_score,
    personal_sentences,
    score_claims,
)
from .specifics import EvidenceIndex
from .subject import checkable_text
from .text import content_words, is_affirmation, is_denial, restates_question, split_claims, split_sentences

NAME = "grounding"
#: Used only when neither the caller nor ``ctx.config.verification.threshold`` gives one (the same
#: value as ``[verification] threshold`` in the default configuration): the score estimates
#: P(supported), and ``benchmarks/grounding_fit.py`` chose the threshold of best mean balanced
#: accuracy over the files under cross-validation (issue 25's refit on seven files: 0.27-0.32 on the
#: training folds, 0.27 on the whole tuning split; with the copy-reorder term 0.26-0.33 and 0.31;
#: 0.28 kept, inside both ranges, so the default configuration's threshold stays as it was).
DEFAULT_THRESHOLD = 0.28
CHECKS = ("MiniLM similarity of each claim to its best evidence sentence or part of one",
          "lexical overlap (share and count of content words absent from the evidence)",
          "numbers, dates, names and quotations absent from the evidence",
          "talk about the speaker or the listener (no evidence supports it)",
          "a claim made of evidence words in an order no evidence sentence has (copy-reorder)")


def excluded(ctx: Any) -> frozenset[str]:
    """``[plugins.grounding] exclude_streams`` (default ``["conversation"]``), from the declared
    ``GroundingOptions``; a bad table is a ``VerifierError`` naming it (the kernel refuses one before a
    turn runs, so this is for a configuration built past it)."""
    try:
        return frozenset(GroundingOptions.of(ctx, OPTIONS_TABLE).exclude_streams)
    except ConfigError as exc:
        raise VerifierError(f"grounding: {exc}") from exc


def resolve_threshold(explicit: float | None, ctx: Any) -> tuple[float, str]:
    """``(threshold, where it came from)``: the argument, else ``ctx.config``, else the default."""
    if explicit is not None:
        value, origin = explicit, "argument"
    else:
        verification = getattr(getattr(ctx, "config", None), "verification", None)
        configured = getattr(verification, "threshold", None)
        if configured is None:
            return DEFAULT_THRESHOLD, "default"
        value, origin = configured, "config.verification.threshold"
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
        raise VerifierError(f"grounding threshold ({origin}) must be a number in [0, 1], got {value!r}")
    return float(value), origin


class GroundingVerifier:
    """The verifier registered as ``grounding``."""

    name = NAME

    def __init__(self, *, threshold: float | None = None, weights: ScoringWeights | None = None,
                 embedder: Embedder | None = None) -> None:
        self.threshold = threshold
        self.weights = weights or ScoringWeights()
        self._embedder = embedder

    def embedder(self, ctx: Any = None) -> Embedder:
        """The embedder given to the constructor, else the one the host registers under the
        configured name (``ctx.embedder()``, behind a per-text cache); see ``embedding``."""
        if self._embedder is not None:
            return self._embedder
        from .embedding import get_embedder

        return get_embedder(ctx)

    def verify(self, subject: str, package: Any, criteria: str = "", ctx: Any = None, *,
               threshold: float | None = None) -> Verdict:
        if not isinstance(subject, str):
            raise VerifierError(f"grounding: the subject must be text, got {type(subject).__name__}")
        limit, origin = resolve_threshold(threshold if threshold is not None else self.threshold, ctx)
        items = normalise_package(package)
        withheld = [(item.source or item.id, passage) for item in items for passage in item.withheld]
        items = [item for item in items if item.text.strip()]
        excluded_streams = excluded(ctx)
        set_aside_evidence = [item for item in items if item.stream in excluded_streams]
        items = [item for item in items if item.stream not in excluded_streams]
        checkable = checkable_text(subject)
        claims = split_claims(checkable.text)
        data: dict[str, Any] = {"threshold": limit, "threshold_from": origin, "evidence_items": len(items),
                                "claims_checked": len(claims), "set_aside": checkable.set_aside,
                                "checks": list(CHECKS)}
        if withheld:  # planted text supports nothing: named in the report and the reasons
            data["instruction_like_withheld"] = [{"source": source, "passage": passage[:300]}
                                                 for source, passage in withheld]
        if set_aside_evidence:
            data["evidence_set_aside"] = {
                "streams": sorted({item.stream for item in set_aside_evidence}), "chunks": len(set_aside_evidence),
                "why": "earlier model output (conversation memory) is not evidence for a claim"}
        if not items:
            why = "no evidence: the evidence package is empty, so no claim can be grounded"
            if set_aside_evidence:
                why = (f"no evidence: the package held only {len(set_aside_evidence)} chunk(s) from stream(s) "
                       f"{', '.join(data['evidence_set_aside']['streams'])}, earlier model output that is not evidence")
            return self._verdict(VerdictStatus.FAIL, 0.0, [why], claims, [], data, criteria)
        question = package_question(package)
        restated = [c for c in claims if question and restates_question(c, question)]
        if restated:  # telling back what was asked is no claim at all, grounded or not
            claims = [c for c in claims if c not in restated]
            data["restated_question"] = restated
        if not claims and question and is_affirmation(checkable.text):
            # "Yes." asserts the question's proposition: check that instead (see the module doc)
            claims = split_claims(question.rstrip().rstrip("?").rstrip() + ".")
            data.update(claims_from_question=True, question=question[:500], denied=is_denial(checkable.text))
        if not claims:
            why = "nothing to verify: the subject makes no checkable claim"
            if restated:
                why += f" (it only restates the question: {restated[0][:120]!r})"
            return self._verdict(VerdictStatus.FAIL, 0.0, [why], [], [], data, criteria)
        index = EvidenceIndex.build(item.text for item in items)
        # the whole answer's share of content words the evidence has (claims, fillers and questions
        # alike): what a hallucination adds anywhere in the answer lowers every claim's logit
        answer_lexical = lexical_support(content_words(checkable.text), index)
        data["answer_lexical"] = round(answer_lexical, 4)
        scores = score_claims(claims, items, self.embedder(ctx), self.weights, threshold=limit, index=index,
                              from_question=bool(data.get("claims_from_question")), denied=bool(data.get("denied")),
                              answer_lexical=answer_lexical)
        # chit-chat and opinion ("I love it", "have you tried it?") lower the score: no evidence
        # supports talk about the speaker or the listener (questions and fillers count here too)
        talk = [s for s in split_sentences(checkable.text) if s not in restated]
        personal = personal_sentences(talk + (claims if data.get("claims_from_question") else []), index)
        score = output_score(scores, self.weights, personal=bool(personal))
        unsupported = [s for s in scores if not s.supported]
        status = VerdictStatus.PASS if score >= limit and not unsupported else VerdictStatus.FAIL
        reasons = [f"{len(scores) - len(unsupported)} of {len(scores)} claims supported; score {score:.2f} "
                   f"(threshold {limit:.2f}): the weakest claim's"
                   + (", lowered because the answer talks about the speaker or the listener" if personal else "")]
        if personal:
            data["personal"] = personal
            reasons.append("talk about the speaker or the listener, which no evidence supports: "
                           + "; ".join(repr(p[:120]) for p in personal[:3]))
        for s in unsupported:
            reasons.append(_claim_reason(s))
        data["claims"] = [s.model_dump(mode="json") for s in scores]
        data["unsupported"] = [{"claim": s.claim, "score": s.score, "missing_specifics": s.missing_specifics}
                               for s in unsupported]
        data["evidence_sources"] = sorted({item.source for item in items if item.source})
        return self._verdict(status, score, reasons, [s.claim for s in unsupported], scores, data, criteria)

    def _verdict(self, status: VerdictStatus, score: float, reasons: list[str], unsupported: list[str],
                 scores: list[ClaimScore], data: dict[str, Any], criteria: str) -> Verdict:
        withheld = data.get("instruction_like_withheld") or []
        if withheld:
            shown = "; ".join(f"{w['source']}: {w['passage'][:80]!r}" for w in withheld[:3])
            reasons = [*reasons, f"{len(withheld)} instruction-like passage(s) of the evidence withheld from support "
                                 f"(planted text grounds nothing): {shown}"]
        return Verdict(status=status, verifier=NAME, reasons=reasons, score=round(score, 4),
                       unsupported_claims=unsupported, data=data,
                       raw_output=render_report(status, score, reasons, scores, data, criteria))


def _claim_reason(s: ClaimScore) -> str:
    why = []
    by_kind: dict[str, list[str]] = {}
    for check in s.specifics:
        if not check.supported and s.missing_specifics:  # none count for a denied proposition
            by_kind.setdefault(check.kind, []).append(check.text)
    for kind, texts in by_kind.items():
        why.append(f"{kind}{'s' if len(texts) > 1 else ''} not in the evidence: " + ", ".join(map(repr, texts)))
    if not why:
        absent = f"; not in the evidence: {', '.join(s.missing_words[:8])}" if s.missing_words else ""
        why.append(f"no evidence sentence says this (best similarity {s.semantic:.2f}, "
                   f"{s.lexical:.0%} of its content words in the evidence{absent})")
    if s.copy_reorder > 0:
        why.append(f"its words are all in the evidence but {s.copy_reorder:.0%} of its word pairs are in no "
                   "evidence sentence in that order (who or what it is about may have changed)")
    return f"unsupported ({s.score:.2f}): {s.claim[:160]!r} — " + "; ".join(why)


def render_report(status: VerdictStatus, score: float, reasons: list[str], scores: list[ClaimScore],
                  data: dict[str, Any], criteria: str) -> str:
    """A readable report, ending with a verdict section in the kernel's verdict-line contract."""
    lines = ["## GROUNDING REPORT",
             f"verifier: {NAME} (non-LLM: {'; '.join(CHECKS)})",
             f"evidence items: {data.get('evidence_items', 0)}; claims checked: {len(scores)}; "
             f"threshold {data.get('threshold')} ({data.get('threshold_from')})"]
    if criteria:
        lines.append("criteria: not interpreted by a non-LLM verifier; the checks above stand in for them")
    if data.get("evidence_set_aside"):
        aside = data["evidence_set_aside"]
        lines.append(f"evidence set aside: {aside['chunks']} chunk(s) from stream(s) {', '.join(aside['streams'])} "
                     f"({aside['why']})")
    if data.get("set_aside"):
        lines.append("set aside (protocol, not claims): " + "; ".join(data["set_aside"][:10]))
    if data.get("restated_question"):
        lines.append("set aside (restates the question, not a claim): " + "; ".join(data["restated_question"][:5]))
    if scores:
        lines.append("")
        lines.append("## CLAIMS")
        for s in scores:
            mark = "supported" if s.supported else "UNSUPPORTED"
            lines.append(f"- [{mark} {s.score:.2f} | sim {s.semantic:.2f} | lex {s.lexical:.2f}] {s.claim}")
            if s.missing_specifics:
                lines.append(f"    missing from the evidence: {', '.join(s.missing_specifics)}")
            if s.missing_words:
                lines.append(f"    words not in the evidence: {', '.join(s.missing_words[:12])}")
            if s.best_evidence:
                source = f" ({s.best_source})" if s.best_source else ""
                lines.append(f"    best evidence{source}: {s.best_evidence[:200]}")
    lines += ["", "## VERDICT", f"VERDICT: {status.value}", *[f"- {r}" for r in reasons]]
    lines.insert(3, f"score: {score:.3f}")
    return "\n".join(lines)


def verify_texts(subject: str, evidence: list[str] | str, *, threshold: float | None = None,
                 embedder: Embedder | None = None) -> Verdict:
    """Convenience for scripts: verify ``subject`` against plain evidence texts."""
    return GroundingVerifier(threshold=threshold, embedder=embedder).verify(subject, evidence)

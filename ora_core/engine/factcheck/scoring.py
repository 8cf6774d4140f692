"""The numbers of a verdict (pure functions): verdict bands, the self-consistency spread factor,
the reconciler's revert rule, and the article-level aggregate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ora_core.kernel.models import ChallengePoint, ClaimVerdict, PointResponse, VerdictBand

#: (lowest truth percentage, band), highest first; below the last: FALSE.
BANDS: tuple[tuple[float, VerdictBand], ...] = (
    (86, "TRUE"), (72, "MOSTLY-TRUE"), (58, "LEANING-TRUE"), (43, "MIXED"), (29, "LEANING-FALSE"),
    (15, "MOSTLY-FALSE"))


def verdict_band(truth: float, confidence: float, unverified_below: float = 40.0) -> VerdictBand:
    """The band of ``truth``; a MIXED truth with ``confidence`` under ``unverified_below`` is UNVERIFIED."""
    for floor, band in BANDS:
        if truth >= floor:
            if band == "MIXED" and confidence < unverified_below:
                return "UNVERIFIED"
            return band
    return "FALSE"


def spread_factor(spread: float, steps: Sequence[tuple[float, float]], beyond: float) -> float:
    """The factor of the first step whose limit the spread does not exceed (``spread <= limit``)."""
    for limit, factor in steps:
        if spread <= limit:
            return factor
    return beyond


def clamp_pct(value: float) -> float:
    return min(100.0, max(0.0, value))


@dataclass
class Reverted:
    truth: float
    reverted_pp: float
    responses: list[PointResponse]
    rule: str


def revert_invalid_moves(advocate_truth: float, proposed_truth: float, responses: list[PointResponse],
                         points: dict[str, ChallengePoint]) -> Reverted:
    """The reconciler's move (proposed - advocate) keeps only what rests on valid challenges.

    Each accepted point's share of the move is the effect the reconciler stated for it; accepted
    points without a stated effect share what the stated effects leave of the move equally. The
    shares of accepted points that cite no valid evidence ID are taken back. Points the reconciler
    answered that the challenger never made are ignored (and named by the caller)."""
    move = proposed_truth - advocate_truth
    accepted = [r for r in responses if r.accepted and r.point in points]
    invalid = [r for r in accepted if not points[r.point].valid]
    if not invalid:
        return Reverted(proposed_truth, 0.0, responses,
                        "no accepted point lacks valid evidence: the reconciler's verdict stands")
    stated = {r.point: float(r.effect_pp) for r in accepted if r.effect_pp is not None}
    unstated = [r for r in accepted if r.effect_pp is None]
    rest = move - sum(stated.values())
    each = rest / len(unstated) if unstated else 0.0
    invalid_ids = {r.point for r in invalid}
    out: list[PointResponse] = []
    total = 0.0
    for response in responses:
        if response.accepted and response.point in invalid_ids:
            share = stated.get(response.point, each)
            total += share
            response = response.model_copy(update={"reverted_pp": round(share, 2)})
        out.append(response)
    how = ("the effects the reconciler stated" if not unstated else
           f"the effects stated, the rest of the move ({rest:+.1f} pp) shared equally by the {len(unstated)} "
           "accepted point(s) that stated none")
    return Reverted(clamp_pct(proposed_truth - total), round(total, 2), out,
                    f"reverted {total:+.1f} pp of a {move:+.1f} pp move: accepted point(s) "
                    f"{', '.join(sorted(invalid_ids))} cite no valid evidence ID; shares by {how}")


@dataclass
class Article:
    truth: float | None
    confidence: float | None
    status: str  # verdict | non_informative | broken
    reason: str


def article_value(claims: Sequence[ClaimVerdict]) -> Article:
    """The weighted mean of the claims' truth (weights: ``ClaimVerdict.weight``, which includes
    confidence). A broken claim leaves the article without a value (never a silent 50); no claim
    with weight (all insufficient, or confidence 0) gives 50 at confidence 0, non-informative."""
    broken = [c.index for c in claims if c.status == "broken"]
    if broken or not claims:
        why = (f"claim(s) {', '.join(map(str, broken))} have no truth percentage" if broken
               else "no claim was checked")
        return Article(None, None, "broken", why)
    weighted = [(c, c.truth_pct) for c in claims if c.counts_in_aggregates and c.weight > 0 and c.truth_pct is not None]
    total = sum(c.weight for c, _ in weighted)
    if not weighted or total <= 0:
        return Article(50.0, 0.0, "non_informative",
                       "no claim carries weight (insufficient evidence or zero confidence): truth 50, confidence 0")
    truth = sum(c.weight * pct for c, pct in weighted) / total
    confidence = sum(c.confidence or 0.0 for c, _ in weighted) / len(weighted)
    return Article(round(truth, 1), round(confidence, 1), "verdict",
                   f"weighted mean of {len(weighted)} of {len(claims)} claim(s) (weight = confidence / 100)")

"""A claim's evidence and the deterministic controls of seed 002 D5 (pure functions, no I/O).

- ``extract_claims``: the claims of a prompt (a list of two or more items, or the whole text).
- ``build_items``: chunks -> evidence items with IDs (``E1``, ``E2``, ...), through the evidence
  filter (the evidence streams only, at least ``min_item_chars`` characters, no duplicate text);
  each dropped chunk keeps its reason, so whether a contrarian item survived is on record. A
  direction pre-labelled in the chunk's provenance (``provenance.extra["direction"]``:
  ``supports``, ``contradicts`` or ``neutral``, e.g. a vault note's ``direction:`` front matter,
  which ora-chroma carries, or its ``stance:`` mapped by ``[plugins.chroma] directions``) is the
  item's; any other value is kept aside as unreadable, and the item counts as unlabelled.
- ``source_class_of``: a provenance ``source_type`` -> institutional | general
  (``fact_check.source_classes``; anything unmapped -> ``unmapped_source_class``).
- ``count_evidence``, ``sufficiency`` (the gate), ``imbalance`` (the ``evidence_pool_imbalance``
  warning) and ``partition`` (which role sees which IDs).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ora_core.kernel.models import Chunk, EvidenceCounts, EvidenceItem, EvidencePartition

UNKNOWN_SOURCE_TYPE = "unknown"
DIRECTIONS = ("supports", "contradicts", "neutral")
CONTRARIAN = "contrarian"
STRATEGY_KEY = "searchStrategy"  # provenance.extra key of the contrarian tag (seed 002's name)
DIRECTION_KEY = "direction"  # provenance.extra key of a pre-labelled direction

_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(?P<text>\S.*?)\s*$")
_CLAIM_PREFIX = re.compile(
    r"^\s*(?:please\s+)?(?:fact[- ]?check(?:ing)?|verify|check|claim)\b(?:\s+(?:this|the|that|following))*"
    r"(?:\s+claims?)?\s*[:\-–—]\s*", re.IGNORECASE)
_WORDS = re.compile(r"\w+")


def extract_claims(text: str) -> list[str]:
    """The claims in ``text``: each item of a list of two or more (``-``, ``*``, ``1.``), else the
    whole text; a leading ``fact-check:``/``claim:`` and surrounding quotes are dropped."""
    items = [m.group("text") for line in text.splitlines() if (m := _LIST_ITEM.match(line))]
    raw = items if len(items) >= 2 else [" ".join(text.split())]
    claims = []
    for claim in raw:
        claim = _CLAIM_PREFIX.sub("", claim, count=1).strip().strip("\"“”'«»").strip()
        if claim:
            claims.append(claim)
    return list(dict.fromkeys(claims))


def source_class_of(source_type: str, config: Any) -> tuple[str, bool]:
    """``(class, mapped)``: the class ``fact_check.source_classes`` gives ``source_type``, else the
    unmapped class (``mapped`` False)."""
    found = config.source_classes.get(source_type)
    return (found, True) if found is not None else (config.unmapped_source_class, False)


def _norm_text(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


@dataclass
class Filtered:
    """What ``build_items`` kept and dropped."""

    items: list[EvidenceItem] = field(default_factory=list)
    chunks: dict[str, Chunk] = field(default_factory=dict)  # evidence id -> chunk
    dropped: list[dict[str, str]] = field(default_factory=list)  # chunk_id, source, reason
    unmapped_source_types: list[str] = field(default_factory=list)
    #: evidence id -> a ``provenance.extra["direction"]`` that is none of supports|contradicts|neutral
    #: (the item counts as unlabelled; the research step names it)
    unreadable_directions: dict[str, str] = field(default_factory=dict)

    def dropped_by_reason(self) -> dict[str, int]:
        return dict(Counter(d["reason"] for d in self.dropped))


def build_items(chunks: Iterable[Chunk], config: Any, *, first_id: int = 1,
                existing: Iterable[EvidenceItem] = (), strategy: str = "research") -> Filtered:
    """Evidence items from ``chunks`` through the evidence filter; IDs count on from ``first_id``.
    ``existing``: the pool so far (a chunk already in it is a duplicate)."""
    out = Filtered()
    seen_text = {_norm_text(i.text) for i in existing}
    seen_ids = {i.chunk_id for i in existing if i.chunk_id}
    next_id = first_id
    for chunk in chunks:
        p = chunk.provenance
        stream = p.stream or ""
        reason = ""
        norm = _norm_text(chunk.text)
        if stream and stream not in config.evidence_streams:
            reason = f"stream-not-evidence:{stream}"
        elif len(chunk.text.strip()) < config.min_item_chars:
            reason = f"too-short:<{config.min_item_chars}-chars"
        elif chunk.id in seen_ids or norm in seen_text:
            reason = "duplicate"
        if reason:
            out.dropped.append({"chunk_id": chunk.id, "source": p.source, "reason": reason})
            continue
        seen_text.add(norm)
        seen_ids.add(chunk.id)
        source_type = (p.source_type or "").strip() or UNKNOWN_SOURCE_TYPE
        source_class, mapped = source_class_of(source_type, config)
        if not mapped and source_type not in out.unmapped_source_types:
            out.unmapped_source_types.append(source_type)
        labelled = str(p.extra.get(DIRECTION_KEY) or "").strip().lower()
        if labelled and labelled not in DIRECTIONS:
            out.unreadable_directions[f"E{next_id}"] = labelled[:80]
        tagged = p.extra.get(STRATEGY_KEY) == CONTRARIAN or strategy == CONTRARIAN
        item = EvidenceItem(
            id=f"E{next_id}", text=chunk.text.strip(), source=p.source, source_type=source_type,
            source_class=source_class, direction=labelled if labelled in DIRECTIONS else "neutral",
            direction_source="provenance" if labelled in DIRECTIONS else "unlabelled",
            search_strategy=CONTRARIAN if tagged else "research", stream=stream, chunk_id=chunk.id,
            score=p.score)
        out.items.append(item)
        out.chunks[item.id] = chunk
        next_id += 1
    return out


def count_evidence(items: list[EvidenceItem]) -> EvidenceCounts:
    by_type = Counter(i.source_type for i in items)
    directions = Counter(i.direction for i in items)
    supports, contradicts = directions["supports"], directions["contradicts"]
    directional = supports + contradicts
    return EvidenceCounts(
        total=len(items), by_source_type=dict(sorted(by_type.items())),
        by_source_class=dict(sorted(Counter(i.source_class for i in items).items())),
        distinct_source_types=len([t for t in by_type if t != UNKNOWN_SOURCE_TYPE]),
        supports=supports, contradicts=contradicts, neutral=directions["neutral"],
        unlabelled=sum(1 for i in items if i.direction_source == "unlabelled"), directional=directional,
        support_ratio=round(supports / directional, 4) if directional else None,
        contrarian=sum(1 for i in items if i.search_strategy == CONTRARIAN))


def sufficiency(counts: EvidenceCounts, min_items: int, min_source_types: int) -> list[str]:
    """Why the pool is insufficient (empty: it passes the gate)."""
    reasons = []
    if counts.total < min_items:
        reasons.append(f"{counts.total} evidence item(s), fewer than {min_items}")
    if counts.distinct_source_types < min_source_types:
        types = ", ".join(t for t in counts.by_source_type if t != UNKNOWN_SOURCE_TYPE) or "none known"
        reasons.append(f"{counts.distinct_source_types} distinct source type(s) ({types}), "
                       f"fewer than {min_source_types}")
    return reasons


@dataclass
class Imbalance:
    """The ``evidence_pool_imbalance`` warning: which way the pool leans, by how much, on how many."""

    majority: str
    minority: str
    share: float
    majority_count: int
    directional: int

    @property
    def message(self) -> str:
        return (f"evidence pool leans {self.majority}: {round(100 * self.share)} %, "
                f"{self.majority_count} of {self.directional}")


def imbalance(supports: int, contradicts: int, threshold: float, min_directional: int) -> Imbalance | None:
    """With b = supports / (supports + contradicts): the warning when at least ``min_directional``
    items are directional and max(b, 1 - b) > ``threshold`` (so 1.0 never fires)."""
    directional = supports + contradicts
    if directional < min_directional or directional == 0:
        return None
    b = supports / directional
    share = max(b, 1 - b)
    if not share > threshold:
        return None
    if b >= 0.5:
        return Imbalance("supports", "contradicts", share, supports, directional)
    return Imbalance("contradicts", "supports", share, contradicts, directional)


def partition(items: list[EvidenceItem], min_side: int, *, enabled: bool = True) -> EvidencePartition:
    """Institutional items to the advocate, general ones to the challenger, all to the reconciler
    and validation; the full pool to every role when either side has fewer than ``min_side``, or
    when partitioning is off (``enabled`` False: ``fact_check.partition = false``), the reason saying
    which."""
    every = [i.id for i in items]
    institutional = [i.id for i in items if i.source_class == "institutional"]
    general = [i.id for i in items if i.source_class == "general"]
    sides = f"{len(institutional)} institutional and {len(general)} general item(s)"
    if not enabled:
        return EvidencePartition(mode="full-pool", reason=f"{sides}: source-type partitioning is off "
                                 "(fact_check.partition = false), so every role sees the full pool", advocate=every,
                                 challenger=every, reconciler=every, validation=list(every))
    if len(institutional) < min_side or len(general) < min_side:
        return EvidencePartition(mode="full-pool", reason=f"{sides}: a side has fewer than {min_side}, so every "
                                 "role sees the full pool", advocate=every, challenger=every, reconciler=every,
                                 validation=every)
    return EvidencePartition(mode="partitioned", reason=f"{sides}: institutional to the advocate, general to the "
                             "challenger, all to the reconciler and validation", advocate=institutional,
                             challenger=general, reconciler=every, validation=list(every))


def with_contrarian(part: EvidencePartition, ids: list[str]) -> EvidencePartition:
    """Contrarian items go to the challenger (seed 002 D5), and to every role that sees the full pool."""
    if not ids:
        return part
    update: dict[str, list[str]] = {
        "challenger": [*part.challenger, *ids], "reconciler": [*part.reconciler, *ids],
        "validation": [*part.validation, *ids]}
    if part.mode == "full-pool":
        update["advocate"] = [*part.advocate, *ids]
    return part.model_copy(update=update)

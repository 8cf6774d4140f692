"""Each empty diagnosis produced by its real cause (seed 000, failure #4: empty is never
ambiguous), plus the relationship graph's walk and its provenance path."""

from __future__ import annotations

from pathlib import Path

import pytest
from ora_chroma.ingest import Ingestor
from ora_chroma.retrievers import ConceptRetriever, ConversationRetriever, RelationshipRetriever, store_for

from ora_core.api import EmptyReason, RetrievalFilters

NOTES = {
    "gear-4.md": """
        ---
        type: concept
        related: [verdicts]
        ---
        # Gear 4

        The adversarial cascade: parallel depth and breadth analysts on models of different
        families, cross-evaluation, revision, and verification capped at two cycles.
        """,
    "verdicts.md": """
        ---
        type: reference
        ---
        # Verdicts

        A verifier returns PASS, FAIL or BROKEN. BROKEN unblocks the cycle but is recorded as
        not verified.
        """,
    "budget.md": """
        ---
        type: concept
        ---
        # Budget signals

        Signal 2 is critical truncation; see [[Gear 4]] for where the cascade spends tokens.
        """,
    "island.md": """
        ---
        type: concept
        ---
        # Island

        Sourdough starters need flour, water and patience; feed them daily.
        """,
}


@pytest.fixture
def vault(tmp_path: Path, notes) -> Path:
    return notes(tmp_path / "vault", NOTES)


def _ingested(config, vault: Path, embedder) -> None:
    Ingestor(store_for(config), embedder).add([vault])


def test_index_empty_when_nothing_was_ingested(minilm, chroma_config, ctx_for):
    config = chroma_config()
    for retriever in (ConceptRetriever(), RelationshipRetriever(), ConversationRetriever()):
        got = retriever.retrieve("gear 4 cascade", RetrievalFilters(), 5, ctx_for(config))
        assert got.chunks == []
        assert got.empty_diagnosis is not None, retriever.name
        assert got.empty_diagnosis.empty_reason is EmptyReason.index_empty, retriever.name
        assert got.empty_diagnosis.collection_total_count == 0


def test_no_match_when_every_hit_is_below_the_similarity_floor(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    _ingested(config, vault, minilm)
    got = ConceptRetriever().retrieve("stellar nucleosynthesis in supernova remnants", RetrievalFilters(), 5,
                                      ctx_for(config))
    diag = got.empty_diagnosis
    assert got.chunks == [] and diag is not None
    assert diag.empty_reason is EmptyReason.no_match
    assert diag.collection_total_count == 4
    assert diag.raw_chunks_returned == 4  # the probe saw every chunk, none close enough
    assert diag.filters_applied["similarity_floor"] == 0.25
    assert "best similarity" in diag.detail
    # the same query with the floor lowered below every score does return chunks
    assert ConceptRetriever().retrieve("stellar nucleosynthesis in supernova remnants",
                                       RetrievalFilters(min_score=-1.0), 5, ctx_for(config)).chunks


def test_filtered_out_when_the_modes_type_filter_removes_every_match(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    _ingested(config, vault, minilm)
    filters = RetrievalFilters(types=["engram"])
    got = ConceptRetriever().retrieve("verifier verdicts PASS FAIL BROKEN", filters, 5, ctx_for(config))
    diag = got.empty_diagnosis
    assert got.chunks == [] and diag is not None
    assert diag.empty_reason is EmptyReason.filtered_out
    assert diag.filtered_chunks_returned == 0 and diag.raw_chunks_returned > 0
    assert diag.filters_applied["types"] == ["engram"]


def test_filtered_out_when_the_filter_excludes_the_collection(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    _ingested(config, vault, minilm)
    got = ConceptRetriever().retrieve("verdicts", RetrievalFilters(collections=["web"]), 5, ctx_for(config))
    assert got.empty_diagnosis.empty_reason is EmptyReason.filtered_out
    assert "'vault'" in got.empty_diagnosis.detail


def test_ranker_truncation_when_the_budget_drops_every_match(minilm, vault, chroma_config, ctx_for):
    config = chroma_config(max_chars=40)  # smaller than any chunk
    _ingested(config, vault, minilm)
    got = ConceptRetriever().retrieve("verifier verdicts PASS FAIL BROKEN", RetrievalFilters(), 5,
                                      ctx_for(config))
    diag = got.empty_diagnosis
    assert got.chunks == [] and diag is not None
    assert diag.empty_reason is EmptyReason.ranker_truncation
    assert diag.filters_applied["max_chars"] == 40
    assert "dropped all" in diag.detail


def test_relationship_walk_returns_linked_notes_with_their_path(minilm, vault, chroma_config, ctx_for):
    config = chroma_config(seed_notes=1)
    _ingested(config, vault, minilm)
    got = RelationshipRetriever().retrieve("adversarial cascade with depth and breadth analysts",
                                           RetrievalFilters(), 5, ctx_for(config))
    by_note = {c.provenance.extra["note"]: c.provenance for c in got.chunks}
    # gear-4 is the seed; verdicts (its related:) and budget (links to it) are its neighbours
    assert set(by_note) == {"verdicts.md", "budget.md"}
    assert by_note["verdicts.md"].extra["path"] == ["gear-4.md", "verdicts.md"]
    assert by_note["verdicts.md"].extra["link_kinds"] == ["related"]
    assert by_note["budget.md"].extra["path"] == ["gear-4.md", "budget.md"]
    assert by_note["budget.md"].extra["link_kinds"] == ["wiki"]
    assert all(p.stream == "relationship" and p.collection == "vault" for p in by_note.values())


def test_relationship_filters_apply_to_the_neighbours(minilm, vault, chroma_config, ctx_for):
    config = chroma_config(seed_notes=1)
    _ingested(config, vault, minilm)
    query = "adversarial cascade with depth and breadth analysts"
    got = RelationshipRetriever().retrieve(query, RetrievalFilters(types=["reference"]), 5, ctx_for(config))
    assert [c.provenance.extra["note"] for c in got.chunks] == ["verdicts.md"]
    none = RelationshipRetriever().retrieve(query, RetrievalFilters(types=["engram"]), 5, ctx_for(config))
    assert none.empty_diagnosis.empty_reason is EmptyReason.filtered_out


def test_relationship_no_match_when_the_top_hit_links_nowhere(minilm, vault, chroma_config, ctx_for):
    config = chroma_config(seed_notes=1)
    _ingested(config, vault, minilm)
    got = RelationshipRetriever().retrieve("feeding a sourdough starter flour and water", RetrievalFilters(),
                                           5, ctx_for(config))
    assert got.chunks == []
    assert got.empty_diagnosis.empty_reason is EmptyReason.no_match
    assert "island.md" in got.empty_diagnosis.detail and "link to no other" in got.empty_diagnosis.detail


def test_two_hops_reach_further(minilm, vault, chroma_config, ctx_for):
    config = chroma_config(seed_notes=1, hops=2)
    _ingested(config, vault, minilm)
    got = RelationshipRetriever().retrieve("critical truncation budget signal", RetrievalFilters(), 5,
                                           ctx_for(config))
    paths = {c.provenance.extra["note"]: c.provenance.extra["path"] for c in got.chunks}
    assert paths["gear-4.md"] == ["budget.md", "gear-4.md"]
    assert paths["verdicts.md"] == ["budget.md", "gear-4.md", "verdicts.md"]

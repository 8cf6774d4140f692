"""A note's other front-matter keys travel with its chunks: stored in Chroma, given back in
``provenance.extra``, bounded (scalars only, plain names, never a name Ora sets, text cut), what is left
out said in the ingest report; a changed value re-indexes the note. A ``stance`` becomes a ``direction``
through ``[plugins.chroma] directions`` (tests/factcheck follows both into a fact-check turn).
Real Chroma (embedded, in tmp dirs) and the real MiniLM model."""

from __future__ import annotations

from pathlib import Path

import pytest
from ora_chroma.ingest import Ingestor
from ora_chroma.notes import MAX_EXTRA_CHARS, MAX_EXTRA_KEYS, parse_note
from ora_chroma.retrievers import ConceptRetriever, RelationshipRetriever, store_for
from ora_chroma.settings import ChromaSettings

from ora_core.api import ConfigError, RetrievalFilters
from ora_core.testing import make_config

REACTOR = """
    ---
    title: Reactor safety review
    type: evidence
    source_type: peer_reviewed_study
    direction: contradicts
    stance: right
    pair: nuclear-energy-fr
    year: 2021
    weight_hint: 0.5
    reviewed: 2024-03-01
    authors: [A, B]
    note: a reserved name
    searchStrategy: contrarian
    ---
    Incident rates at reactors fell steadily over four decades of operation, a review of national records found.
    """
WIND = """
    ---
    title: Wind capacity report
    type: evidence
    source_type: news_primary
    stance: left
    related: [reactor]
    ---
    Reporters found that new wind capacity was added faster than planned in most regions last year.
    """


@pytest.fixture
def vault(tmp_path: Path, notes) -> Path:
    return notes(tmp_path / "vault", {"reactor.md": REACTOR, "wind.md": WIND})


def test_scalar_front_matter_reaches_provenance_extra_and_what_is_left_out_is_named(minilm, vault, chroma_config,
                                                                                   ctx_for):
    config = chroma_config()
    report = Ingestor(store_for(config), minilm).add([vault])
    left_out = "\n".join(report.front_matter_not_carried)
    assert "authors: not a scalar value (list)" in left_out
    assert "note: a name Ora sets itself" in left_out and "searchStrategy: a name Ora sets itself" in left_out
    got = ConceptRetriever().retrieve("reactor incident rates", RetrievalFilters(), 2, ctx_for(config))
    reactor = next(c for c in got.chunks if c.provenance.source.endswith("reactor.md"))
    extra = reactor.provenance.extra
    assert (extra["direction"], extra["stance"], extra["pair"]) == ("contradicts", "right", "nuclear-energy-fr")
    assert (extra["year"], extra["weight_hint"], extra["reviewed"]) == (2021, 0.5, "2024-03-01")
    assert "authors" not in extra
    assert extra["note"] == "reactor.md"  # Ora's own value, not the front matter's
    assert "searchStrategy" not in extra  # only the contrarian pass tags an item contrarian
    # the relationship stream carries them too
    linked = RelationshipRetriever().retrieve("wind capacity", RetrievalFilters(), 3, ctx_for(config))
    assert any(c.provenance.extra.get("stance") == "right" for c in linked.chunks), linked.empty_diagnosis


def test_stances_map_to_directions_per_configuration_and_a_notes_own_direction_wins(minilm, vault, chroma_config,
                                                                                   ctx_for):
    base = chroma_config()
    Ingestor(store_for(base), minilm).add([vault])
    for side, other in (("left", "right"), ("right", "left")):
        config = chroma_config(direction_from="stance",
                               directions={side: "supports", other: "contradicts", "neutral": "neutral"})
        assert store_for(config) is store_for(base)  # the mapping is read per retrieval; the store is shared
        chunks = ConceptRetriever().retrieve("energy", RetrievalFilters(min_score=-1.0), 5, ctx_for(config)).chunks
        extra = {Path(c.provenance.source).name: c.provenance.extra for c in chunks}
        assert extra["wind.md"]["direction"] == ("supports" if side == "left" else "contradicts")
        assert extra["wind.md"]["direction_from"] == "stance: left"
        assert extra["reactor.md"]["direction"] == "contradicts" and "direction_from" not in extra["reactor.md"]
    with pytest.raises(ValueError, match="go together"):
        ChromaSettings(direction_from="stance")
    with pytest.raises(ConfigError, match="directions"):
        ChromaSettings.of(make_config({"plugins": {"chroma": {"direction_from": "stance",
                                                               "directions": {"left": "agrees"}}}}).config, "chroma")


def test_a_changed_front_matter_value_reindexes_the_note_with_the_new_value(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    store = store_for(config)
    Ingestor(store, minilm).add([vault])
    path = vault / "reactor.md"
    path.write_text(path.read_text().replace("direction: contradicts", "direction: supports"))
    report = Ingestor(store, minilm).add([vault])
    assert (report.files_changed, report.files_unchanged) == (1, 1)
    assert report.chunks_added == report.chunks_removed == 1
    stored = store.vault.get(where={"source": str(path)}, include=["metadatas"])["metadatas"]
    assert [m["fm.direction"] for m in stored] == ["supports"]
    again = Ingestor(store, minilm).add([vault])
    assert (again.chunks_added, again.files_unchanged) == (0, 2)


def test_the_bounds_cut_text_keep_the_first_keys_by_name_and_refuse_odd_names(tmp_path: Path):
    keys = "\n".join(f"k{n:02d}: {n}" for n in range(MAX_EXTRA_KEYS + 3))
    path = tmp_path / "many.md"
    path.write_text(f"---\nlong: {'x' * (MAX_EXTRA_CHARS + 50)}\n\"has space\": 1\nempty:\n{keys}\n---\nBody.\n")
    note = parse_note(path, tmp_path)
    assert len(note.extras) == MAX_EXTRA_KEYS
    assert "k00" in note.extras and "long" not in note.extras  # sorted by name: k00.. first, then long
    why = "\n".join(note.extras_left_out)
    assert "has space: not a plain name" in why and "empty: not a scalar value (NoneType)" in why
    assert f"long: beyond the first {MAX_EXTRA_KEYS} keys" in why
    short = tmp_path / "short.md"
    short.write_text(f"---\nlong: {'x' * (MAX_EXTRA_CHARS + 50)}\n---\nBody.\n")
    assert len(parse_note(short, tmp_path).extras["long"]) == MAX_EXTRA_CHARS


def test_a_note_without_extras_keeps_its_chunk_ids_and_one_with_extras_gets_marked_ones(tmp_path: Path):
    plain = tmp_path / "plain.md"
    plain.write_text("---\ntype: concept\n---\nBody text of the note.\n")
    labelled = tmp_path / "labelled.md"
    labelled.write_text("---\ntype: concept\ndirection: supports\n---\nBody text of the note.\n")
    import hashlib

    def digest(*parts: str) -> str:
        h = hashlib.sha256()
        for part in parts:
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()

    note = parse_note(plain, tmp_path)
    assert note.chunks[0].id == digest(str(plain), note.meta_hash, note.chunks[0].text, "0")[:32]
    marked = parse_note(labelled, tmp_path)
    assert marked.chunks[0].id != digest(str(labelled), marked.meta_hash, marked.chunks[0].text, "0")[:32]

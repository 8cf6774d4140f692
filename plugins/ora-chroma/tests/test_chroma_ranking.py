"""A chunk's provenance from its stored metadata: nothing read from the store is dropped silently."""

from __future__ import annotations

from ora_chroma.ranking import Candidate, to_chunk


def _chunk(meta):
    return to_chunk(Candidate(id="c1", text="t", meta=meta, score=0.8), collection="vault", stream="concept",
                    weight=1.0)


def test_an_ingest_time_is_read_back_as_a_datetime():
    chunk = _chunk({"ingested_at": "2026-11-23T12:00:00+00:00"})
    assert chunk.provenance.ingested_at.year == 2026
    assert "ingested_at_unreadable" not in chunk.provenance.extra


def test_an_unreadable_ingest_time_is_kept_by_name_not_dropped():
    chunk = _chunk({"ingested_at": "last tuesday"})
    assert chunk.provenance.ingested_at is None
    assert chunk.provenance.extra["ingested_at_unreadable"] == "last tuesday"

"""Ingest -> search -> provenance, idempotence, changed and deleted files, bad input.
Real Chroma (embedded, in tmp dirs) and the real MiniLM model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ora_chroma.ingest import Ingestor, VaultError, scan
from ora_chroma.retrievers import ConceptRetriever, RelationshipRetriever, store_for

from ora_core.api import RetrievalFilters

VAULT = {
    "supplemental-rag.md": """
        ---
        type: concept
        source_type: spec
        approved: true
        tags: [protocol]
        related: [coverage-gap]
        ---
        # Supplemental RAG Protocol

        A model that lacks a fact emits a SUPPLEMENTAL RAG REQUEST block; the orchestrator runs
        the query and re-submits the whole package as a fresh stateless call.

        ## The cap

        At most two supplement requests per step. After the cap the model must emit a
        COVERAGE GAP instead of guessing.
        """,
    "coverage-gap.md": """
        ---
        type: concept
        ---
        # Coverage Gap

        An explicit admission of what cannot be verified. It is the second-worst outcome; a
        confident confabulation is the worst. See [[Forensic Trace]].
        """,
    "forensic-trace.md": """
        ---
        type: concept
        ---
        # Forensic Trace

        Every turn writes a directory with one JSON and one Markdown file per step, JSONL
        failure logs and a step-health summary.
        """,
    "kitchen.txt": "Bake the bread at two hundred degrees for forty minutes.\n",
}


@pytest.fixture
def vault(tmp_path: Path, notes) -> Path:
    return notes(tmp_path / "vault", VAULT)


def test_ingest_then_search_returns_chunks_with_full_provenance(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    report = Ingestor(store_for(config), minilm).add([vault])
    assert (report.files_seen, report.files_new, report.skipped) == (4, 4, [])
    assert report.chunks_total == report.chunks_added >= 5

    result = ConceptRetriever().retrieve("supplemental request cap", RetrievalFilters(), 3, ctx_for(config))
    assert result.chunks, result.empty_diagnosis
    top = result.chunks[0]
    p = top.provenance
    assert p.source == str(vault / "supplemental-rag.md")
    assert p.collection == "vault" and p.stream == "concept"
    assert p.heading == "The cap"
    assert (p.type, p.source_type, p.approved) == ("concept", "spec", True)
    assert p.weight == config.retrieval.approved_weight
    assert 0.25 <= p.score <= 1.0
    assert p.ingested_at is not None
    assert p.extra["note"] == "supplemental-rag.md" and p.extra["title"] == "Supplemental RAG Protocol"
    assert p.extra["tags"] == ["protocol"]
    assert "two supplement requests" in top.text
    assert result.latency_s > 0


def test_approved_sources_are_weighted_up(minilm, tmp_path, notes, chroma_config, ctx_for):
    root = notes(tmp_path / "v", {
        "plain.md": "---\ntype: concept\n---\n# Verifier\nwhat verdicts does the verifier return\n",
        "vetted.md": "---\ntype: concept\napproved: true\n---\n# Step health\nEach step records a "
                     "verdict: PASS, FAIL or BROKEN.\n",
    })
    unweighted = chroma_config(retrieval={"approved_weight": 1.0})
    Ingestor(store_for(unweighted), minilm).add([root])
    q = "what verdicts does the verifier return"
    flat = ConceptRetriever().retrieve(q, RetrievalFilters(min_score=0.0), 2, ctx_for(unweighted))
    assert [c.provenance.weight for c in flat.chunks] == [1.0, 1.0]
    plain, vetted = flat.chunks  # the closer text wins unweighted
    assert (plain.provenance.approved, vetted.provenance.approved) == (False, True)
    assert vetted.provenance.score > 0.05
    factor = round(1.5 * plain.provenance.score / vetted.provenance.score, 2)
    weighted_cfg = chroma_config(retrieval={"approved_weight": factor})
    weighted = ConceptRetriever().retrieve(q, RetrievalFilters(min_score=0.0), 2, ctx_for(weighted_cfg))
    top = weighted.chunks[0].provenance
    assert top.approved is True and top.weight == factor  # the approved source now ranks first
    assert top.extra["weighted_score"] == pytest.approx(top.score * factor, abs=1e-3)


def test_type_filters_from_a_mode_are_applied(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    Ingestor(store_for(config), minilm).add([vault])
    got = ConceptRetriever().retrieve("baking bread", RetrievalFilters(types=["note"], min_score=0.1), 5,
                                      ctx_for(config))
    assert got.chunks and {c.provenance.type for c in got.chunks} == {"note"}
    approved = ConceptRetriever().retrieve("the protocol", RetrievalFilters(approved_only=True, min_score=0.0),
                                           5, ctx_for(config))
    assert approved.chunks and all(c.provenance.approved for c in approved.chunks)


def test_reingest_is_idempotent(minilm, vault, chroma_config):
    store = store_for(chroma_config())
    first = Ingestor(store, minilm).add([vault])
    ids_before = sorted(store.vault.get(include=[])["ids"])
    stamps_before = {m["ingested_at"] for m in store.vault.get(include=["metadatas"])["metadatas"]}
    second = Ingestor(store, minilm).add([vault])
    assert (second.chunks_added, second.chunks_removed, second.files_unchanged) == (0, 0, 4)
    assert second.chunks_total == first.chunks_total
    assert sorted(store.vault.get(include=[])["ids"]) == ids_before
    assert {m["ingested_at"] for m in store.vault.get(include=["metadatas"])["metadatas"]} == stamps_before


def test_a_changed_file_is_replaced_not_duplicated(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    store = store_for(config)
    Ingestor(store, minilm).add([vault])
    total = store.vault.count()
    (vault / "kitchen.txt").write_text("Knead the dough for ten minutes before proofing.\n", encoding="utf-8")
    report = Ingestor(store, minilm).add([vault])
    assert (report.files_changed, report.files_unchanged) == (1, 3)
    assert (report.chunks_added, report.chunks_removed) == (1, 1)
    assert store.vault.count() == total
    texts = store.vault.get(where={"source": str(vault / "kitchen.txt")}, include=["documents"])["documents"]
    assert len(texts) == 1 and "Knead the dough" in texts[0]
    got = ConceptRetriever().retrieve("bake the bread at two hundred degrees", RetrievalFilters(), 5,
                                      ctx_for(config))
    assert all("two hundred degrees" not in c.text for c in got.chunks)


def test_sync_removes_deleted_files_and_their_links(minilm, vault, chroma_config, ctx_for):
    config = chroma_config()
    store = store_for(config)
    Ingestor(store, minilm).add([vault])
    assert store.manifest.edge_counts()[0] == 2
    (vault / "forensic-trace.md").unlink()
    (vault / "new.md").write_text("# New\nA brand new note about step health.\n", encoding="utf-8")
    report = Ingestor(store, minilm).sync()
    assert report.removed == [str(vault / "forensic-trace.md")]
    assert report.files_removed == 1 and report.files_new == 1 and report.chunks_removed >= 1
    assert not store.vault.get(where={"source": str(vault / "forensic-trace.md")}, include=[])["ids"]
    assert store.manifest.get(str(vault / "forensic-trace.md")) is None
    assert store.vault.get(where={"source": str(vault / "new.md")}, include=[])["ids"]
    # the link coverage-gap -> forensic-trace now dangles; only supplemental-rag -> coverage-gap resolves
    assert store.manifest.edge_counts() == (1, 1)
    rel = RelationshipRetriever().retrieve("coverage gap admission", RetrievalFilters(), 5, ctx_for(config))
    assert all(c.provenance.source != str(vault / "forensic-trace.md") for c in rel.chunks)


def test_sync_after_a_whole_root_is_deleted(minilm, tmp_path, notes, chroma_config):
    root = notes(tmp_path / "gone", {"a.md": "# A\nsome text about gears\n"})
    store = store_for(chroma_config())
    Ingestor(store, minilm).add([root])
    shutil.rmtree(root)
    report = Ingestor(store, minilm).sync()
    assert report.files_removed == 1 and store.vault.count() == 0


def test_malformed_front_matter_is_skipped_and_named_while_the_rest_ingests(minilm, tmp_path, notes,
                                                                             chroma_config):
    root = notes(tmp_path / "v", {
        "good.md": "# Good\nfine text\n",
        "bad.md": "---\ntype: [oops\n---\n# Bad\ntext\n",
        "also-good.md": "---\ntype: concept\n---\n# Also good\nmore text\n",
    })
    report = Ingestor(store_for(chroma_config()), minilm).add([root])
    assert report.files_new == 2
    assert report.malformed == 1
    assert report.skipped[0].path == str(root / "bad.md")
    assert str(root / "bad.md") in report.skipped[0].reason


def test_missing_paths_and_unsupported_files_are_clear_errors(tmp_path: Path):
    with pytest.raises(VaultError, match="does not exist"):
        scan([tmp_path / "nowhere"], [".md"])
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF")
    with pytest.raises(VaultError, match="is not a note"):
        scan([pdf], [".md"])


def test_an_unreadable_vault_directory_is_a_clear_error_before_anything_is_written(tmp_path: Path):
    """``ora vault add`` on a directory it cannot list: exit 1, the path and the reason named,
    nothing created. Root reads anything, so as root the command runs without the two
    capabilities that bypass permission checks (setpriv)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.md").write_text("# A\n", encoding="utf-8")
    config = tmp_path / "ora.toml"
    config.write_text(f'[retrieval]\npath = "{tmp_path / "chroma"}"\n', encoding="utf-8")
    cmd = [sys.executable, "-c", "import sys; from ora_core.cli import main; main(sys.argv[1:])",
           "-c", str(config), "vault", "add", str(locked)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv (util-linux) is missing: cannot make a directory unreadable")
        caps = "-dac_override,-dac_read_search"
        cmd = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *cmd]
    locked.chmod(0)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "ORA_PLUGINS": "chroma,minilm"})
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 1, proc.stderr
    assert f"cannot read vault directory '{locked}'" in proc.stderr
    assert "Permission denied" in proc.stderr
    assert not (tmp_path / "chroma").exists()

"""Issue 3, item 7: a Supplemental RAG request runs through the same retrievers as context
assembly. A Gear 2 turn on the scripted backend whose analyst asks for a missing fact gets a
``## SUPPLEMENTAL RAG RESULT`` holding a chunk of a real vault (real Chroma, real MiniLM), and
the re-submitted call answers from it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ora_chroma
import ora_minilm.plugin
import ora_scripted
import ora_trace_fs
import pytest
from ora_chroma.ingest import Ingestor
from ora_chroma.retrievers import store_for

import ora_modes
from ora_core.testing import make_host, make_runtime, run_turn, scripted_config

pytestmark = pytest.mark.slow

QUESTION = "Explain how a step that lacks a fact is handled by the analyst."
REQUEST = ("## SUPPLEMENTAL RAG REQUEST\n"
           "Gap: how many supplemental requests one step may make\n"
           "Query terms: supplemental request cap per step\n"
           "Why: the explanation must say when the model stops asking")
ANSWERED = ("ANSWER-FROM-SUPPLEMENT: a step may ask twice; after the second request it writes a "
            "COVERAGE GAP section naming what the vault lacks instead of guessing.\nCONFIDENCE: 0.85")
NOTES = {
    "supplement-cap.md": """
        ---
        type: concept
        approved: true
        ---
        # Supplement cap

        A step may make at most two supplemental requests. After the second, the model stops
        asking and writes a COVERAGE GAP section naming what is missing.
        """,
    "sourdough.md": """
        ---
        type: note
        ---
        # Sourdough

        Feed the starter with flour and water every day and keep it warm.
        """,
}


def test_a_gear_2_supplement_request_is_answered_from_the_chroma_vault(minilm, tmp_path: Path, notes):
    phase_a = {"match": "PHASE A CLEANUP", "on": "system",
               "reply": f"CLEANED PROMPT:\n{QUESTION}\nCORRECTIONS:\n- none\nINFERRED ITEMS:\n- none"}
    rules = [phase_a,
             # the re-submitted package (it now holds the RESULT block) gets the real answer
             {"match": r"(?s)## SUPPLEMENTAL RAG RESULT.*supplement-cap\.md", "on": "user", "reply": ANSWERED},
             {"match": r"ROLE: ANALYST \(gear 2\)", "on": "system", "reply": REQUEST},
             {"match": ".", "reply": "The answer is supported by the evidence.\nCONFIDENCE: 0.8"}]
    resolved = scripted_config(tmp_path / "traces", rules=rules,
                               retrieval={"path": str(tmp_path / "chroma"),
                                          "streams": {"conversation": False, "relationship": False}},
                               plugins={"trace-fs": {"fsync": False}})
    rt = make_runtime(make_host(ora_scripted, ora_modes, ora_trace_fs, ora_chroma, ora_minilm.plugin), resolved,
                      stderr=io.StringIO())
    vault = notes(tmp_path / "vault", NOTES)
    Ingestor(store_for(rt.config), minilm).add([vault])

    result = run_turn(rt, QUESTION, mode="standard")
    assert result.trace_path, rt.stderr.getvalue()
    assert "ANSWER-FROM-SUPPLEMENT" in result.answer

    calls = rt.pool._built["local"].calls
    analyst = [c for c in calls if "ROLE: ANALYST (gear 2)" in c[0].content]
    assert len(analyst) == 2, [c[0].content[:80] for c in calls]
    first, resubmitted = (c[-1].content for c in analyst)
    assert "## SUPPLEMENTAL RAG RESULT" not in first
    block = resubmitted.split("## SUPPLEMENTAL RAG RESULT", 1)[1]
    # the vault chunk, with its provenance line, fetched by the chroma concept retriever
    assert f"[concept | vault | {vault / 'supplement-cap.md'}" in block
    assert "at most two supplemental requests" in block
    assert "Query: supplemental request cap per step" in block
    assert QUESTION in resubmitted  # the whole package, re-submitted

    lines = [json.loads(x) for x in (Path(result.trace_path) / "supplemental-rag.jsonl").read_text().splitlines()]
    assert len(lines) == 1
    record = lines[0]
    assert record["streams"] == ["concept"] and record["failed_streams"] == []
    assert record["chunks"] >= 1 and record["resolved"] is True
    assert record["query"] == "supplemental request cap per step"

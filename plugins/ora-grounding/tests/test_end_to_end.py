"""A Gear 2 turn (scripted backend) verified by the real grounding verifier, read from the trace."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import ora_grounding
import pytest

from ora_core import hookimpl
from ora_core.api import Chunk, EmptyDiagnosis, Provenance, Retrieval
from ora_core.testing import make_host, make_runtime, scripted_config

pytestmark = pytest.mark.slow

VAULT = [
    {"text": "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris.",
     "source": "notes/eiffel.md"},
    {"text": "The Eiffel Tower was designed and built by the engineering company of Gustave Eiffel. "
             "The tower is 330 metres tall and was the tallest man-made structure in the world until 1930.",
     "source": "notes/eiffel-height.md"},
]
GROUNDED = ("The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris. "
            "It was designed and built by the engineering company of Gustave Eiffel. "
            "The tower is 330 metres tall. "
            "It was the tallest man-made structure in the world until 1930. "
            "It was designed and built by the engineering company of Gustave Eiffel for the World's Fair.")
CONFABULATED = GROUNDED.replace("330 metres", "412 metres")
PHASE_A = {"match": "PHASE A CLEANUP", "on": "system",
           "reply": "CLEANED PROMPT:\nExplain the history of the Eiffel Tower.\nCORRECTIONS:\n- none\n"
                    "INFERRED ITEMS:\n- none"}


class VaultRetriever:
    """An in-memory concept index: a note matches when it shares a word with the query."""

    name, stream = "vault", "concept"

    def retrieve(self, query: str, filters: Any, k: int, ctx: Any) -> Retrieval:
        terms = set(re.findall(r"[a-z0-9]{4,}", query.lower()))
        hits = [d for d in VAULT if terms & set(re.findall(r"[a-z0-9]{4,}", d["text"].lower()))]
        chunks = [Chunk(id=f"vault-{i}", text=d["text"], provenance=Provenance(
            collection="vault", source=d["source"], score=0.8, stream=self.stream)) for i, d in enumerate(hits[:k])]
        return Retrieval(stream=self.stream, query=query, chunks=chunks, retriever=self.name,
                         empty_diagnosis=None if chunks else EmptyDiagnosis(empty_reason="no_match"))


class VaultPlugin:
    @hookimpl
    def ora_register_retrievers(self, register: Any) -> None:
        register(VaultRetriever())


def run_gear2(tmp_path: Path, analysis: str, revision: str) -> tuple[Any, Path]:
    import ora_broken
    import ora_bypass
    import ora_health_detectors
    import ora_minilm.plugin
    import ora_scripted
    import ora_signals
    import ora_trace_fs

    import ora_modes
    from ora_core.testing import run_turn

    rules = [PHASE_A,
             {"match": "ROLE: RE-REVISER", "on": "system", "reply": revision + "\nCONFIDENCE: 0.90"},
             {"match": r"ROLE: ANALYST \(gear 2\)", "on": "system", "reply": analysis + "\nCONFIDENCE: 0.90"}]
    resolved = scripted_config(tmp_path / "traces", rules=rules,
                               verification={"verifier": "grounding", "final_verifier": "grounding",
                                             "threshold": ora_grounding.DEFAULT_THRESHOLD},
                               retrieval={"streams": {"conversation": False, "relationship": False}},
                               plugins={"trace-fs": {"fsync": False}})
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_broken,
                     ora_health_detectors, ora_grounding, ora_minilm.plugin, VaultPlugin())
    runtime = make_runtime(host, resolved, stderr=io.StringIO())
    result = run_turn(runtime, "Explain the history of the Eiffel Tower.", mode="standard")
    assert result.trace_path, runtime.stderr.getvalue()
    return result, Path(result.trace_path)


def step_file(trace: Path, name: str) -> dict[str, Any]:
    found = sorted(trace.glob(f"[0-9][0-9]-{name}.json"))
    assert found, sorted(p.name for p in trace.glob("*.json"))
    return json.loads(found[-1].read_text())


def test_a_grounded_gear2_answer_passes_the_grounding_verifier(tmp_path):
    result, trace = run_gear2(tmp_path, GROUNDED, GROUNDED)
    assert (result.gear, result.status) == (2, "ok")
    assert result.verdicts == {"gear2-cycle1-verify": "PASS"}
    step = step_file(trace, "gear2-cycle1-verify")
    assert step["input"]["verifier"] == "grounding" and step["input"]["evidence_chunks"] == 2
    verdict = step["output"]["verdict"]
    assert (verdict["verifier"], verdict["status"]) == ("grounding", "PASS")
    assert verdict["data"]["threshold_from"] == "config.verification.threshold"
    assert verdict["score"] >= verdict["data"]["threshold"]
    assert "## GROUNDING REPORT" in verdict["raw_output"]


def test_an_invented_figure_fails_grounding_then_the_revision_passes(tmp_path):
    result, trace = run_gear2(tmp_path, CONFABULATED, GROUNDED)
    assert result.verdicts == {"gear2-cycle1-verify": "FAIL", "gear2-cycle2-verify": "PASS"}
    first = step_file(trace, "gear2-cycle1-verify")["output"]["verdict"]
    assert first["verifier"] == "grounding"
    assert first["unsupported_claims"] == ["The tower is 412 metres tall."]
    assert any("'412'" in reason for reason in first["reasons"])
    assert result.answer.startswith(GROUNDED[:40])
    analyst = step_file(trace, "gear2-analyst")
    assert "unsupported-specifics" in json.dumps(analyst)

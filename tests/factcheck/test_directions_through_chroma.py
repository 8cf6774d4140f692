"""Pre-labelled evidence directions reach a fact-check turn through Chroma: a vault note's ``direction:``
front matter (ora-chroma carries it into ``provenance.extra``) is the item's direction, a ``stance:`` is
one through ``[plugins.chroma] direction_from``/``directions``, and a label that is no direction is
named, not silently counted. Real Chroma (embedded, in a tmp dir), the real MiniLM embedder, scripted
debate roles."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ora_core import hookimpl
from ora_core.engine import run_turn
from ora_core.testing import make_host, make_runtime, scripted_config

TEXT = "A review of national records on reactor {n} found incident rates fell over four decades of operation."
NOTES = {  # name -> (source type, extra front matter)
    "gov-1.md": ("government_report", "direction: supports"),
    "gov-2.md": ("government_report", "direction: supports"),
    "study.md": ("peer_reviewed_study", "direction: contradicts"),
    "news-1.md": ("news_primary", "stance: left"),
    "news-2.md": ("news_secondary", "stance: right"),
    "expert.md": ("expert_statement", "direction: maybe"),
}


class Verifiers:
    def __init__(self, verifier: Any) -> None:
        self.verifier = verifier

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        register(self.verifier)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("labelled-vault")
    notes = root / "notes"
    notes.mkdir()
    for n, (name, (source_type, extra)) in enumerate(NOTES.items(), 1):
        (notes / name).write_text(textwrap.dedent(f"""\
            ---
            title: Note {n}
            type: evidence
            source_type: {source_type}
            {extra}
            ---
            {TEXT.format(n=n)}
            """), encoding="utf-8")
    return root


def turn(fc: Any, vault: Path, tmp_path: Path, **chroma: Any) -> tuple[Any, Any]:
    import ora_bypass
    import ora_chroma
    import ora_evidence_guard
    import ora_inject
    import ora_scripted
    import ora_signals
    import ora_trace_fs
    from ora_chroma.ingest import Ingestor
    from ora_chroma.retrievers import store_for
    from ora_minilm import plugin as minilm

    import ora_modes

    verifier = fc.Verifier()
    host = make_host(ora_scripted, ora_bypass, ora_signals, ora_modes, ora_trace_fs, ora_evidence_guard, ora_inject,
                     ora_chroma, minilm, Verifiers(verifier))
    resolved = scripted_config(
        tmp_path / "traces", rules=fc.rules(),
        plugins={"trace-fs": {"fsync": False}, "chroma": {"collection": "labelled", "min_score": -1.0, **chroma}},
        retrieval={"path": str(vault / "chroma"), "k": 12,
                   "streams": {"concept": True, "conversation": False, "relationship": False, "web": False}},
        verification={"verifier": verifier.name}, fact_check={"direction": "provenance"})
    Ingestor(store_for(resolved.config), host.embedder("minilm")).add([vault / "notes"])
    runtime = make_runtime(host, resolved, stderr=io.StringIO())
    result = run_turn(runtime, fc.CLAIM, mode="fact-check")
    assert result.trace_path, runtime.stderr.getvalue()
    return result, Path(result.trace_path)


def step(trace: Path, name: str) -> dict[str, Any]:
    [found] = sorted(trace.glob(f"[0-9][0-9]-{name}.json"))
    return json.loads(found.read_text())


def by_note(trace: Path) -> dict[str, dict[str, Any]]:
    return {Path(i["source"]).name: i for i in step(trace, "factcheck-claim1-research")["output"]["items"]}


def test_a_notes_direction_front_matter_is_its_evidence_items_direction_and_an_odd_label_is_named(fc, vault,
                                                                                                  tmp_path):
    result, trace = turn(fc, vault, tmp_path)
    items = by_note(trace)
    assert set(items) == set(NOTES)
    for name in ("gov-1.md", "gov-2.md"):
        assert (items[name]["direction"], items[name]["direction_source"]) == ("supports", "provenance")
    assert (items["study.md"]["direction"], items["study.md"]["direction_source"]) == ("contradicts", "provenance")
    for name in ("news-1.md", "news-2.md", "expert.md"):  # no mapping for stance here; "maybe" is no direction
        assert items[name]["direction_source"] == "unlabelled", name
    research = step(trace, "factcheck-claim1-research")
    counts = research["output"]["counts"]
    assert (counts["supports"], counts["contradicts"], counts["unlabelled"]) == (2, 1, 3)
    contingencies = [json.loads(line) for line in (trace / "contingencies.jsonl").read_text().splitlines() if line]
    [odd] = [c for c in contingencies if c["name"] == "factcheck-claim1-research-direction-labels-unreadable"]
    assert "'maybe'" in odd["detail"] and items["expert.md"]["id"] in odd["detail"]
    directions = step(trace, "factcheck-claim1-directions")["output"]
    assert sorted(directions["from_provenance"]) == sorted(items[n]["id"] for n in ("gov-1.md", "gov-2.md",
                                                                                     "study.md"))
    assert result.claim_verdicts[0].evidence_counts.support_ratio == 0.6667  # 2 of 3 directional items


def test_a_stance_becomes_a_direction_through_the_chroma_mapping_relative_to_the_claim(fc, vault, tmp_path):
    _, trace = turn(fc, vault, tmp_path, direction_from="stance",
                    directions={"left": "supports", "right": "contradicts", "neutral": "neutral"})
    items = by_note(trace)
    assert (items["news-1.md"]["direction"], items["news-1.md"]["direction_source"]) == ("supports", "provenance")
    assert (items["news-2.md"]["direction"], items["news-2.md"]["direction_source"]) == ("contradicts", "provenance")
    assert items["gov-1.md"]["direction"] == "supports"  # a note's own direction is kept
    counts = step(trace, "factcheck-claim1-research")["output"]["counts"]
    assert (counts["supports"], counts["contradicts"], counts["unlabelled"]) == (3, 2, 1)

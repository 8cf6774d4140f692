"""Fact-check on a ``compact`` backend: the analyst's evidence fit (``k_per_stream`` chunks per
stream) must not starve the sufficiency gate, which counts items. The research pool is the package
as retrieved; the debate prompts cut each item to its share of the compact budget instead."""

from __future__ import annotations

import re

from ora_core.engine import profiles
from ora_core.engine.context import CUT_MARK, item_chars

LONG = ("Reactor operators publish incident rates every year. " * 30).strip()


def compact_backend() -> dict:
    return {"local": {"prompt_profile": "compact", "context_window": 4096}}


def test_a_compact_fit_keeps_two_chunks_but_the_research_pool_keeps_all_six(fc) -> None:
    result, trace, *_ = fc.run(backends=compact_backend())
    context = trace.step("context-assembly")["output"]
    assert context["evidence_fit"]["k_per_stream"] == profiles.COMPACT_FIT.k_per_stream
    assert len(context["retrievals"]["concept"]["chunks"]) == profiles.COMPACT_FIT.k_per_stream
    research = trace.step("factcheck-claim1-research")["output"]
    assert research["source"] == "context-package-unfitted" and len(research["items"]) == 6
    assert trace.step("factcheck-claim1-sufficiency")["output"]["decision"] == "sufficient"  # a debate ran
    assert trace.step("factcheck-claim1-advocate")["input"]["evidence_ids"] == ["E1", "E2", "E3"]
    assert result.claim_verdicts[0].partition.challenger == ["E4", "E5", "E6"]


def test_on_a_compact_backend_each_debate_item_is_cut_to_its_share_of_the_budget(fc) -> None:
    docs = [fc.doc(n, kind, direction, text=f"Item {n}. {LONG}") for n, (kind, direction) in enumerate(
        [("government_report", "supports")] * 3 + [("news_primary", "contradicts")] * 3, 1)]
    _, trace, rt, *_ = fc.run(docs=docs, backends=compact_backend())
    limit = item_chars(rt.config, "reconciler", 6)
    assert limit is not None and limit < len(docs[0]["text"])
    evidence = trace.step("factcheck-claim1-reconciler")["input"]["evidence"]
    assert evidence.count(CUT_MARK) == 6
    for n in range(1, 7):
        assert f"E{n} |" in evidence
    # the six cut items fit the compact evidence budget the analyst's package has
    budget_chars = profiles.COMPACT_FIT.evidence_tokens(4096) * 4
    bodies = re.findall(r"<data \w+>\[[^\]]*\]\n(.*?)\n</data", evidence, re.S)
    assert len(bodies) == 6 and sum(map(len, bodies)) <= budget_chars


def test_under_the_full_profile_items_are_never_cut(fc) -> None:
    docs = [fc.doc(n, kind, direction, text=f"Item {n}. {LONG}") for n, (kind, direction) in enumerate(
        [("government_report", "supports")] * 3 + [("news_primary", "contradicts")] * 3, 1)]
    _, trace, rt, *_ = fc.run(docs=docs)
    assert item_chars(rt.config, "reconciler", 6) is None
    assert CUT_MARK not in trace.step("factcheck-claim1-reconciler")["input"]["evidence"]
    assert trace.step("factcheck-claim1-research")["output"]["source"] == "context-package"

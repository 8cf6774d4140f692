"""``benchmarks/grounding_fit.py`` (issue 25): it reads the shared dev files and the sources issue 25
brought in, and its nested cross-validation reports each source's outer-fold AUROC beside both
baselines, so a source under baseline + 0.03 can be named a MISS. Synthetic features: one source
the model separates and the overlap baseline does not, one the overlap baseline already ranks."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _fit():
    spec = importlib.util.spec_from_file_location("grounding_fit", REPO / "benchmarks" / "grounding_fit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grounding_fit"] = module
    spec.loader.exec_module(module)
    return module


def _split(gf, name: str, *, model_sees: bool, overlap_sees: bool, n: int = 40):
    from ora_core.cli.bench_grounding import GroundingExample

    rng = random.Random(name)
    examples, features = [], []
    for i in range(n):
        label = i % 2
        shared = "harbour lighthouse keeper storm"
        answer = shared if (label and overlap_sees) or (not overlap_sees and rng.random() < 0.5) else "violet dragons"
        examples.append(GroundingExample(id=f"{name}-{i}", evidence=f"The {shared} rose.", answer=answer,
                                         label=label, line=i + 1))
        good = label if model_sees else rng.random() < 0.5
        lexical = 0.9 + 0.1 * rng.random() if good else 0.1 * rng.random()
        # a claim row: lexical, semantic, missing specifics, missing words, content words, specifics, focus, order
        features.append(gf.AnswerFeatures(claims=[[lexical, lexical, 0.0, 0.0 if good else 3.0, 4.0, 0.0, 1.0,
                                                   1.0 if good else 0.5]],
                                          personal=False, answer_lexical=lexical))
    groups = gf.record_groups(examples)
    return gf.Split(file=name, examples=examples, groups=groups, holdout=gf.holdout_of(groups, 0.2, 15),
                    features=features)


def test_the_fit_reads_the_shared_dev_files_and_issue_25s_sources_by_default():
    gf = _fit()
    assert gf.DEFAULT_FOLDERS[1] == REPO / "benchmarks" / "data" / "grounding"
    assert len(list(gf.DEFAULT_FOLDERS[1].glob("*.jsonl"))) >= 4
    assert "ANSWER_LEXICAL" in gf.COLUMNS and "COPY_REORDER" in gf.COLUMNS


def test_the_copy_reorder_column_is_one_minus_order_only_for_a_claim_whose_words_are_all_in_the_evidence():
    gf = _fit()
    caps = gf.Caps(max_missing=1, max_missing_words=4, l2=1.0)
    copied = gf.AnswerFeatures(claims=[[1.0, 0.9, 0.0, 0.0, 4.0, 0.0, 1.0, 0.25]], personal=False)
    partial = gf.AnswerFeatures(claims=[[0.75, 0.9, 0.0, 1.0, 4.0, 0.0, 1.0, 0.25]], personal=False)
    column = gf.COLUMNS.index("COPY_REORDER")
    assert gf.design(copied, caps)[0, column] == 0.75
    assert gf.design(partial, caps)[0, column] == 0.0


def test_compare_prints_the_shipped_model_and_each_candidate_term_per_source_in_one_run(monkeypatch, capsys):
    gf = _fit()
    monkeypatch.setattr(gf, "GRID", gf.GRID[:1])
    splits = [_split(gf, "model-sees.jsonl", model_sees=True, overlap_sees=False),
              _split(gf, "overlap-sees.jsonl", model_sees=False, overlap_sees=True)]
    report = gf.compare(splits, 3, [0], ["short", "order+focus"])
    assert set(report["designs"]) == {"shipped", "short", "order+focus"}
    assert len(report["load_average"]) == 2
    out = capsys.readouterr().out
    assert "model-sees.jsonl" in out and "MET" in out and "MISS" in out and "load average" in out
    assert gf.TERMS["short"].says in out
    assert gf.EXTRA_TERMS == [] and not gf.DROPPED  # the shipped columns again afterwards


def test_a_minus_term_leaves_a_shipped_column_out_and_an_unknown_term_is_refused_by_name():
    gf = _fit()
    caps = gf.Caps(max_missing=1, max_missing_words=4, l2=1.0)
    copied = gf.AnswerFeatures(claims=[[1.0, 0.9, 0.0, 0.0, 4.0, 0.0, 1.0, 0.25]], personal=False)
    column = gf.COLUMNS.index("COPY_REORDER")
    gf.use_terms(["-copy_reorder"])
    try:
        assert gf.design(copied, caps)[0, column] == 0.0
    finally:
        gf.use_terms([])
    assert gf.design(copied, caps)[0, column] == 0.75
    for bad in (["sparkle"], ["-sparkle"]):
        try:
            gf.use_terms(bad)
        except SystemExit as exc:
            assert bad[0] in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_nested_cv_reports_each_sources_outer_folds_beside_both_baselines(monkeypatch):
    gf = _fit()
    monkeypatch.setattr(gf, "GRID", gf.GRID[:2])  # the choice among caps is not what this pins
    splits = [_split(gf, "model-sees.jsonl", model_sees=True, overlap_sees=False),
              _split(gf, "overlap-sees.jsonl", model_sees=False, overlap_sees=True)]
    result = gf.nested(splits, 3, 0)
    ahead, behind = result["files"]["model-sees.jsonl"], result["files"]["overlap-sees.jsonl"]
    for row in (ahead, behind):
        assert set(row) >= {"auroc", "overlap", "length", "delta"}
    assert ahead["delta"] >= gf.TARGET_MARGIN  # a MET source
    assert behind["overlap"] > 0.9 and behind["delta"] < gf.TARGET_MARGIN  # a MISS source
    assert len(result["chosen"]) == 3

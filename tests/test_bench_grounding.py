"""``ora bench grounding``: the cross-validation arithmetic on hand-made sets, and the command on a
small temporary data directory with a stand-in verifier (table, JSON, exit codes, bad input)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ora_core import hookimpl
from ora_core.api import Verdict, VerdictStatus
from ora_core.cli import bench_grounding as bench
from ora_core.cli import state as cli_state
from ora_core.cli.app import build_app
from ora_core.testing import make_config, make_host

# --- metrics ------------------------------------------------------------------------------------


def test_auroc_of_known_rankings() -> None:
    assert bench.auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert bench.auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    # supported {0.35, 0.8} against hallucinated {0.1, 0.4}: 3 of the 4 pairs ordered right
    assert bench.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # a tie between the classes counts half: pairs (0.5>0.2, 0.5=0.5) -> 1.5 of 2
    assert bench.auroc([0.2, 0.5, 0.5], [0, 0, 1]) == 0.75
    assert bench.auroc([0.3, 0.3, 0.3, 0.3], [0, 1, 0, 1]) == 0.5


def test_auroc_needs_both_labels() -> None:
    with pytest.raises(ValueError, match="both labels"):
        bench.auroc([0.1, 0.2], [1, 1])


def test_folds_are_stratified_seeded_and_cover_every_example() -> None:
    labels = [1] * 13 + [0] * 27
    folds = bench.stratified_folds(labels, 5, seed=3)
    assert sorted(set(folds)) == [0, 1, 2, 3, 4]
    for k in range(5):
        pos = sum(1 for f, y in zip(folds, labels, strict=True) if f == k and y)
        neg = sum(1 for f, y in zip(folds, labels, strict=True) if f == k and not y)
        assert pos in (2, 3) and neg in (5, 6)  # 13/5 and 27/5, within one example
        assert pos + neg in (8,)  # the second label fills the folds the first left short
    assert folds == bench.stratified_folds(labels, 5, seed=3)
    assert folds != bench.stratified_folds(labels, 5, seed=4)


def test_folds_refuse_a_label_rarer_than_the_fold_count() -> None:
    with pytest.raises(ValueError, match="labelled supported: 5 folds need at least 5"):
        bench.stratified_folds([1, 1, 0, 0, 0, 0, 0, 0], 5, seed=0)


def test_the_threshold_is_chosen_on_the_training_folds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    scores = [i / 100 for i in range(20)]  # every example has its own score
    labels = [0] * 10 + [1] * 10
    folds = bench.stratified_folds(labels, 4, seed=1)
    seen: list[set[float]] = []
    real = bench.best_threshold

    def spy(s: list[float], y: list[int]) -> float:
        seen.append(set(s))
        return real(s, y)

    monkeypatch.setattr(bench, "best_threshold", spy)
    bench.cross_validate(scores, labels, folds)
    assert len(seen) == 4
    for held, used in enumerate(seen):
        held_out = {scores[i] for i, f in enumerate(folds) if f == held}
        assert not used & held_out
        assert used | held_out == set(scores)


def test_a_threshold_that_only_fits_the_held_out_fold_is_not_credited() -> None:
    # Fold 0 separates at 0.5, fold 1 only at 0.25 (its supported answers score low): chosen
    # with fold 1 in view a threshold gets fold 1 right, chosen on fold 0 alone it cannot.
    scores = [0.1, 0.2, 0.8, 0.9, 0.1, 0.2, 0.3, 0.35]
    labels = [0, 0, 1, 1, 0, 0, 1, 1]
    folds = [0, 0, 0, 0, 1, 1, 1, 1]
    result = bench.cross_validate(scores, labels, folds)
    # fold 1 measured at fold 0's threshold (between 0.2 and 0.8: 0.5): its two supported answers
    # fail; fold 0 at fold 1's threshold (between 0.2 and 0.3: 0.25): all right
    assert result.thresholds == [0.25, 0.5]
    assert result.accuracy == 0.75
    assert result.auroc == 1.0  # AUROC needs no threshold: both folds rank perfectly


def test_best_threshold_maximises_accuracy_on_what_it_is_given() -> None:
    t = bench.best_threshold([0.1, 0.2, 0.3, 0.7, 0.8], [0, 0, 0, 1, 1])
    assert 0.3 < t < 0.7
    assert bench.accuracy([0.1, 0.2, 0.3, 0.7, 0.8], [0, 0, 0, 1, 1], t) == 1.0


def test_length_baseline_takes_the_direction_of_the_training_folds() -> None:
    lengths = [3, 4, 5, 6, 20, 21, 22, 23]
    shorter_supported = bench.cross_validate(lengths, [1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 0, 1, 0, 1, 0, 1],
                                             orient=True)
    longer_supported = bench.cross_validate(lengths, [0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0, 1],
                                            orient=True)
    assert (shorter_supported.direction, shorter_supported.auroc) == ("lower", 1.0)
    assert (longer_supported.direction, longer_supported.auroc) == ("higher", 1.0)


def test_overlap_baseline_is_the_share_of_content_words_in_the_evidence() -> None:
    # content words of the answer: tower, completed, 1889, paris; the evidence has three of them
    assert bench.overlap_score("The tower was completed in 1889 in Paris.",
                               "The Eiffel Tower was completed in 1889.") == 0.75
    assert bench.overlap_score("Yes, it is.", "anything") == 1.0
    assert bench.length_score("Two words") == 2.0


def test_the_synthetic_timing_case_has_the_promised_size_and_is_fresh_per_seed() -> None:
    answer, chunks = bench.synthetic_case(1)
    assert len(answer.split()) >= 300 and len(chunks) == 6
    assert all(150 <= len(c.split()) <= 250 for c in chunks)
    assert bench.synthetic_case(2)[0] != answer and bench.synthetic_case(1)[0] == answer


# --- the command ----------------------------------------------------------------------------------


class MarkerVerifier:
    """Scores 1.0 when the answer says "grounded", 0.0 otherwise; or a constant when ``constant``."""

    name = "marker"

    def __init__(self, constant: float | None = None, fail_on: str = "") -> None:
        self.constant = constant
        self.fail_on = fail_on
        self.calls = 0

    def verify(self, subject: str, package: Any, criteria: str = "", ctx: Any = None) -> Verdict:
        self.calls += 1
        if self.fail_on and self.fail_on in subject:
            raise RuntimeError("the stand-in verifier was told to fail here")
        assert isinstance(package, list) or (package["chunks"] and isinstance(package["question"], str))
        score = self.constant if self.constant is not None else float("grounded" in subject)
        return Verdict(status=VerdictStatus.PASS if score >= 0.5 else VerdictStatus.FAIL, verifier=self.name,
                       reasons=["stand-in"], score=score)


class MarkerPlugin:
    def __init__(self, verifier: MarkerVerifier) -> None:
        self.verifier = verifier

    @hookimpl
    def ora_register_verifiers(self, register: Any) -> None:
        register(self.verifier)


def write_data(directory: Path, name: str = "tiny.jsonl", n: int = 10) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        supported = i % 2 == 0
        answer = ("The tower is grounded and tall." if supported
                  else "The tower, painted gold by a famous artist in a year nobody recorded, is tall.")
        lines.append(json.dumps({"id": f"x-{i}", "evidence": "The tower is tall.", "question": "How tall?",
                                 "answer": answer, "label": "supported" if supported else "hallucinated"}))
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    def run(verifier: MarkerVerifier, *args: str) -> Any:
        monkeypatch.setattr(cli_state.state, "host", make_host(MarkerPlugin(verifier)))
        monkeypatch.setattr(cli_state, "load_resolved", lambda: make_config())
        return CliRunner().invoke(build_app(), ["bench", "grounding", "--verifier", "marker", *args])

    return run


def test_the_command_prints_the_cv_table_and_writes_the_json_report(tmp_path: Path, run_cli) -> None:
    write_data(tmp_path / "data", "a.jsonl")
    write_data(tmp_path / "data", "b.jsonl", n=12)
    out = tmp_path / "report.json"
    result = run_cli(MarkerVerifier(), "--data", str(tmp_path / "data"), "--folds", "2", "--json", str(out))
    assert result.exit_code == 1, result.output  # the length baseline is as good: MISS
    assert "a.jsonl" in result.output and "b.jsonl" in result.output and "MISS" in result.output
    assert "timing: 3" in result.output and "6 chunks" in result.output
    report = bench.BenchReport.model_validate_json(out.read_text())
    assert [f.file for f in report.files] == ["a.jsonl", "b.jsonl"]
    first = report.files[0]
    assert (first.examples, first.supported) == (10, 5)
    assert first.verifier.auroc == 1.0 and first.verifier.accuracy == 1.0
    # the hallucinated answers are the longer ones and share fewer words with the evidence: both
    # baselines rank them perfectly, so the perfect verifier is no better than the better one
    assert first.length.direction == "lower" and first.length.auroc == 1.0 and first.overlap.auroc == 1.0
    assert first.delta_auroc == 0.0 and not first.met
    assert report.timing is not None and report.timing.words >= 300 and report.timing.chunks == 6


def test_a_verifier_that_cannot_rank_misses_and_exits_1(tmp_path: Path, run_cli) -> None:
    write_data(tmp_path / "data")
    result = run_cli(MarkerVerifier(constant=0.5), "--data", str(tmp_path / "data"), "--folds", "2", "--no-timing")
    assert result.exit_code == 1, result.output
    assert "MISS" in result.output and "NO" in result.output


def test_a_verifier_clearly_ahead_of_both_baselines_meets_and_exits_0(tmp_path: Path, run_cli) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows = []
    for i in range(12):
        supported = i % 2 == 0
        # same length and same overlap for both labels: only the marker separates them
        answer = f"The tower {'grounded' if supported else 'floating'} {i}."
        rows.append(json.dumps({"id": str(i), "evidence": f"The tower grounded floating {i}.", "answer": answer,
                                "label": "supported" if supported else "hallucinated"}))
    (data / "even.jsonl").write_text("\n".join(rows))
    result = run_cli(MarkerVerifier(), "--data", str(data), "--folds", "3", "--no-timing")
    assert result.exit_code == 0, result.output
    assert "MET" in result.output and "yes" in result.output


@pytest.mark.parametrize(("content", "message"), [
    ('{"id": "1", "evidence": "e", "answer": "a", "label": "supported"}\nnot json\n', "bad.jsonl:2: not JSON"),
    ('{"id": "1", "evidence": "e", "answer": "a", "label": "true"}\n', "bad.jsonl:1: label must be"),
    ('{"id": "1", "evidence": 3, "answer": "a", "label": "supported"}\n', "bad.jsonl:1: not a grounding example"),
    ('["a list"]\n', "bad.jsonl:1: a line must be a JSON object"),
])
def test_a_malformed_line_is_named_and_exits_2(tmp_path: Path, run_cli, content: str, message: str) -> None:
    (tmp_path / "bad.jsonl").write_text(content)
    verifier = MarkerVerifier()
    result = run_cli(verifier, "--data", str(tmp_path), "--no-timing")
    assert result.exit_code == 2
    assert message in result.output
    assert verifier.calls == 0  # the data is checked before anything is verified


def test_a_missing_or_empty_directory_exits_2(tmp_path: Path, run_cli) -> None:
    missing = run_cli(MarkerVerifier(), "--data", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "no such directory" in missing.output
    empty = run_cli(MarkerVerifier(), "--data", str(tmp_path))
    assert empty.exit_code == 2 and "no *.jsonl files" in empty.output


def test_too_few_examples_of_a_label_for_the_folds_exits_2(tmp_path: Path, run_cli) -> None:
    write_data(tmp_path, n=6)  # three of each label
    result = run_cli(MarkerVerifier(), "--data", str(tmp_path), "--folds", "5", "--no-timing")
    assert result.exit_code == 2 and "tiny.jsonl" in result.output and "5 folds need at least 5" in result.output


def test_a_verifier_that_raises_is_named_with_the_example(tmp_path: Path, run_cli) -> None:
    write_data(tmp_path)
    result = run_cli(MarkerVerifier(fail_on="painted"), "--data", str(tmp_path), "--folds", "2", "--no-timing")
    assert result.exit_code == 1
    assert "tiny.jsonl:2 (x-1)" in result.output and "RuntimeError" in result.output


def test_an_unknown_verifier_name_is_an_error_listing_the_registered_ones(tmp_path: Path, run_cli) -> None:
    write_data(tmp_path)
    result = run_cli(MarkerVerifier(), "--data", str(tmp_path), "--verifier", "nope")
    assert result.exit_code == 1 and "nope" in result.output and "marker" in result.output


def test_a_verifier_without_a_score_is_named_and_exits_1(tmp_path: Path, run_cli) -> None:
    class Scoreless(MarkerVerifier):
        def verify(self, subject: str, package: Any, criteria: str = "", ctx: Any = None) -> Verdict:
            return Verdict(status=VerdictStatus.PASS, verifier=self.name, reasons=["no score"])

    write_data(tmp_path)
    result = run_cli(Scoreless(), "--data", str(tmp_path), "--folds", "2", "--no-timing")
    assert result.exit_code == 1
    assert "tiny.jsonl:1 (x-0)" in result.output and "returned no numeric score (None)" in result.output

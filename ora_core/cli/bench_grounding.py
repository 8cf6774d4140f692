"""``ora bench grounding``: a grounding verifier against two trivial baselines, under k-fold CV.

    ora bench grounding [--data DIR] [--folds K] [--seed N] [--json PATH] [--verifier NAME]

Reads every ``*.jsonl`` file of ``DIR`` (default ``../shared/data`` beside the repository). Each
line is ``{"id", "evidence", "question", "answer", "label": "supported"|"hallucinated", ...}``:
is ``answer`` supported by ``evidence``? (``question`` and ``id`` may be missing.) A missing
directory, a directory with no ``*.jsonl`` file, a line that is not such an example, or a file
with fewer than K examples of a label is an error naming the file (and line): exit 2.

Three scores rank each file's answers, higher meaning "more supported":

- the verifier's: ``Verdict.score`` of ``verify(answer, {"chunks": [evidence], "question":
  question}, "", ctx)``, the verifier taken from the plugin host by name (default ``grounding``);
- content-word overlap: the share of the answer's content words (not stopwords, not single
  letters) that occur as words of the evidence;
- answer length: the answer's word count, ranked in the direction that the training folds
  favour. On HaluEval and most hallucination data the shorter answer is the supported one;
  choosing the direction on the training folds (never on the held-out fold) keeps the baseline
  honest on data where it is the other way round. The report names the direction taken.

Each score is cross-validated the same way: the examples are split into K folds stratified by
label (seeded: ``--seed``); for each fold the accuracy threshold (and the length direction) is
chosen on the other K-1 folds and measured on the held-out one. The table shows the mean AUROC
over the held-out folds (and its standard deviation), the accuracy of the held-out predictions,
the verifier's AUROC delta over the better baseline, and MET when that delta is at least
``TARGET_MARGIN`` (+0.03). The verifier's own weights are fixed before this command runs; if
they were fitted on the same files, these figures are only as honest as that fit (see the
verifier's documentation for how it was fitted).

Timing: the mean verification time per answer of each file, and the time to verify a synthetic
300-word answer against 6 evidence chunks (fresh text each run, so no cache helps; the median of
three runs, after one warm-up that loads the model), against ``TIME_TARGET_S``.

Exit status: 0 when the verifier MEETs the margin on every file and the timing target, 1 when it
misses one (or the verifier is not registered, or fails on an example: the example is named),
2 for bad input. ``--json PATH`` also writes the whole report (``BenchReport``) as JSON.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:
    from ora_core.kernel.components import ComponentContext

from ora_core.cli.bench_defaults import DEFAULT_DATA, DEFAULT_FOLDS, DEFAULT_SEED  # noqa: F401 - DEFAULT_DATA re-exported

LABELS = {"supported": 1, "hallucinated": 0}
TARGET_MARGIN = 0.03
TIME_TARGET_S = 0.3  # issue 25: unchanged by the refit, 300 words over 6 chunks
TIMING_WORDS = 300
TIMING_CHUNKS = 6

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
#: Function words the overlap baseline does not count (the usual English list; a baseline needs
#: nothing cleverer: it is the bar a verifier must clear, not a competitor to tune).
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being below between
both but by can cannot could did do does doing down during each even ever every few for from further get gets
got had has have having he her here hers herself him himself his how however i if in into is it its itself just
like many may me might more most much must my myself no nor not now of off on once one only or other ought our
ours ourselves out over own per quite rather really same shall she should so some such than that the their
theirs them themselves then there these they this those though through thus to too under until up upon us very
was we were what when where whether which while who whom whose why will with within without would yes yeah yet
you your yours yourself yourselves oh ok okay well um uh hmm lol actually s t d ll m re ve
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


class BenchDataError(Exception):
    """Input the bench cannot read: ``message`` names the file and, when it applies, the line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GroundingExample(BaseModel):
    """One labelled line of a data file."""

    model_config = ConfigDict(extra="forbid")

    id: str
    evidence: str
    question: str = ""
    answer: str
    label: Literal[0, 1]
    line: int


class MethodResult(BaseModel):
    """One score's cross-validated figures on one file."""

    model_config = ConfigDict(extra="forbid")

    auroc: float  # mean over the held-out folds
    auroc_sd: float
    auroc_all: float  # the whole file ranked at once (no threshold involved)
    accuracy: float  # of the held-out predictions, each at its training folds' threshold
    accuracy_sd: float
    thresholds: list[float]
    direction: Literal["higher", "lower", "mixed"] = "higher"  # which scores count as supported


class FileResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    examples: int
    supported: int
    verifier: MethodResult
    overlap: MethodResult
    length: MethodResult
    better_baseline: Literal["overlap", "length"]
    delta_auroc: float
    delta_accuracy: float
    met: bool
    seconds_per_answer: float


class TimingResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: int
    chunks: int
    runs_s: list[float]
    median_s: float
    target_s: float
    met: bool


class BenchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verifier: str
    data: str
    folds: int
    seed: int
    margin: float
    files: list[FileResult]
    timing: Optional[TimingResult] = None
    all_met: bool


# --- data --------------------------------------------------------------------------------------

def load_examples(path: Path) -> list[GroundingExample]:
    """The examples of one JSONL file; a line that is not one is a ``BenchDataError`` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchDataError(f"{path}: cannot read: {exc}") from exc
    examples: list[GroundingExample] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchDataError(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(row, dict):
            raise BenchDataError(f"{path}:{n}: a line must be a JSON object, got {type(row).__name__}")
        label = row.get("label")
        if label not in LABELS:
            raise BenchDataError(f"{path}:{n}: label must be 'supported' or 'hallucinated', got {label!r}")
        try:
            examples.append(GroundingExample(
                id=str(row.get("id") or f"{path.name}:{n}"), evidence=row.get("evidence"),
                question=row.get("question") or "", answer=row.get("answer"), label=LABELS[label], line=n))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise BenchDataError(f"{path}:{n}: not a grounding example ({problems}); expected string "
                                 "'evidence' and 'answer' and a label") from exc
    if not examples:
        raise BenchDataError(f"{path}: no examples")
    return examples


def data_files(data: Path) -> list[Path]:
    if not data.is_dir():
        raise BenchDataError(f"{data}: no such directory (pass --data DIR, a directory of *.jsonl files)")
    files = sorted(data.glob("*.jsonl"))
    if not files:
        raise BenchDataError(f"{data}: no *.jsonl files")
    return files


# --- metrics -----------------------------------------------------------------------------------

def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Probability that a supported example (label 1) outscores a hallucinated one; ties count half."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    positives = sum(1 for y in labels if y)
    negatives = len(labels) - positives
    if not positives or not negatives:
        raise ValueError("AUROC needs both labels")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mid_rank = (i + j) / 2 + 1
        rank_sum += mid_rank * sum(1 for k in range(i, j + 1) if labels[order[k]])
        i = j + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def stratified_folds(labels: Sequence[int], k: int, seed: int) -> list[int]:
    """The fold (0..k-1) of each example: each label's examples shuffled (seeded) and dealt round
    the folds, so every fold holds each label in the file's proportion (within one example)."""
    if k < 2:
        raise ValueError(f"k-fold cross-validation needs k >= 2, got {k}")
    rng = random.Random(seed)
    fold = [0] * len(labels)
    start = 0
    for label in (1, 0):
        members = [i for i, y in enumerate(labels) if y == label]
        if len(members) < k:
            raise ValueError(f"{len(members)} example(s) labelled {'supported' if label else 'hallucinated'}: "
                             f"{k} folds need at least {k}")
        rng.shuffle(members)
        for n, i in enumerate(members):
            fold[i] = (start + n) % k
        start = (start + len(members)) % k  # the next label fills the folds this one left short
    return fold


def accuracy(scores: Sequence[float], labels: Sequence[int], threshold: float) -> float:
    """Share of examples where ``score >= threshold`` agrees with the label."""
    return sum((s >= threshold) == bool(y) for s, y in zip(scores, labels, strict=True)) / len(labels)


def best_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The threshold of highest accuracy on these examples: a midpoint between two adjacent
    distinct scores (or just outside the range); ties go to the one nearest the median score."""
    import statistics  # here, not at import: ``ora --help`` stays fast

    values = sorted(set(scores))
    candidates = [values[0] - 1e-9, *((a + b) / 2 for a, b in zip(values, values[1:], strict=False)),
                  values[-1] + 1e-9]
    centre = statistics.median(scores)
    return max(candidates, key=lambda t: (round(accuracy(scores, labels, t), 12), -abs(t - centre)))


def cross_validate(scores: Sequence[float], labels: Sequence[int], folds: Sequence[int], *,
                   orient: bool = False) -> MethodResult:
    """AUROC and accuracy of ``scores`` on each held-out fold, the threshold (and, with
    ``orient``, the direction: higher or lower = supported) chosen on the other folds only."""
    import statistics

    k = max(folds) + 1
    aurocs: list[float] = []
    fold_accuracies: list[float] = []
    thresholds: list[float] = []
    directions: set[str] = set()
    correct = 0
    for held in range(k):
        train = [i for i, f in enumerate(folds) if f != held]
        test = [i for i, f in enumerate(folds) if f == held]
        sign = 1.0
        if orient and auroc([scores[i] for i in train], [labels[i] for i in train]) < 0.5:
            sign = -1.0
        directions.add("higher" if sign > 0 else "lower")
        threshold = best_threshold([sign * scores[i] for i in train], [labels[i] for i in train])
        thresholds.append(round(sign * threshold, 6))
        test_scores = [sign * scores[i] for i in test]
        test_labels = [labels[i] for i in test]
        aurocs.append(auroc(test_scores, test_labels))
        hits = sum((s >= threshold) == bool(y) for s, y in zip(test_scores, test_labels, strict=True))
        correct += hits
        fold_accuracies.append(hits / len(test))
    overall_sign = -1.0 if directions == {"lower"} else 1.0
    return MethodResult(
        auroc=round(statistics.fmean(aurocs), 4), auroc_sd=round(statistics.pstdev(aurocs), 4),
        auroc_all=round(auroc([overall_sign * s for s in scores], labels), 4),
        accuracy=round(correct / len(scores), 4), accuracy_sd=round(statistics.pstdev(fold_accuracies), 4),
        thresholds=thresholds, direction=directions.pop() if len(directions) == 1 else "mixed")


# --- baselines ---------------------------------------------------------------------------------

def words(text: str) -> list[str]:
    return [w.lower().replace("’", "'").strip("'-") for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if (w not in STOPWORDS and len(w) > 1) or w.isdigit()]


def overlap_score(answer: str, evidence: str) -> float:
    """The share of the answer's content words that occur as words of the evidence (1.0 when
    the answer has no content word: nothing in it is absent from the evidence)."""
    said = content_words(answer)
    if not said:
        return 1.0
    vocabulary = set(words(evidence))
    return sum(w in vocabulary for w in said) / len(said)


def length_score(answer: str) -> float:
    """The answer's length in words (``cross_validate(orient=True)`` picks the direction)."""
    return float(len(words(answer)))


# --- running the verifier ----------------------------------------------------------------------

_TIMING_TEXT = ("tower river city engineer museum council bridge railway harbour station market cathedral "
                 "festival library bishop army treaty merchant canal mill architect survey census school "
                 "hospital company factory engine vessel island province governor senate court charter")
_TIMING_WORDS = _TIMING_TEXT.split()


def synthetic_case(seed: int, words_wanted: int = TIMING_WORDS, chunks: int = TIMING_CHUNKS) -> tuple[str, list[str]]:
    """A ``words_wanted``-word answer (sentences of about 20 words) and ``chunks`` evidence chunks of
    about 200 words, all fresh text for ``seed`` (so no embedding cache helps)."""
    rng = random.Random(seed)

    def sentence(n: int) -> str:
        body = " ".join(rng.choice(_TIMING_WORDS) for _ in range(n - 2))
        return f"{body.capitalize()} in {rng.randint(1700, 2020)}."

    answer_sentences: list[str] = []
    while sum(len(s.split()) for s in answer_sentences) < words_wanted:
        answer_sentences.append(sentence(20))
    evidence = [" ".join(sentence(16) for _ in range(12)) for _ in range(chunks)]
    return " ".join(answer_sentences), evidence


class VerifierFailed(Exception):
    """The verifier raised on an example, or gave no score: the message names the example."""


def _score_of(verdict: Any, verifier_name: str, where: str) -> float:
    score = getattr(verdict, "score", None)
    if isinstance(score, bool) or not isinstance(score, int | float) or math.isnan(score):
        raise VerifierFailed(f"{where}: verifier {verifier_name!r} returned no numeric score ({score!r}); "
                             "the bench ranks answers by Verdict.score")
    return float(score)


def verify_example(verifier: Any, name: str, example: GroundingExample, path: Path, ctx: ComponentContext) -> float:
    where = f"{path}:{example.line} ({example.id})"
    try:
        verdict = verifier.verify(example.answer, {"chunks": [example.evidence], "question": example.question},
                                  "", ctx)
    except Exception as exc:  # noqa: BLE001 - re-raised naming the example
        raise VerifierFailed(f"{where}: verifier {name!r} raised {type(exc).__name__}: {exc}") from exc
    return _score_of(verdict, name, where)


def measure_timing(verifier: Any, name: str, ctx: ComponentContext, runs: int = 3) -> TimingResult:
    import statistics

    times: list[float] = []
    for run in range(runs + 1):  # run 0 is the warm-up (the model loads), not counted
        answer, chunks = synthetic_case(10_000 + run)
        started = time.perf_counter()
        try:
            verifier.verify(answer, chunks, "", ctx)
        except Exception as exc:  # noqa: BLE001 - re-raised naming the case
            raise VerifierFailed(f"timing case {run}: verifier {name!r} raised {type(exc).__name__}: {exc}") from exc
        if run:
            times.append(round(time.perf_counter() - started, 4))
    median = statistics.median(times)
    return TimingResult(words=len(answer.split()), chunks=len(chunks), runs_s=times, median_s=round(median, 4),
                        target_s=TIME_TARGET_S, met=median <= TIME_TARGET_S)


def evaluate_file(path: Path, examples: list[GroundingExample], scores: list[float], *, k: int, seed: int,
                  seconds: float, margin: float = TARGET_MARGIN) -> FileResult:
    """The cross-validated figures of one file, given the verifier's score of each example."""
    labels = [e.label for e in examples]
    try:
        folds = stratified_folds(labels, k, seed)
    except ValueError as exc:
        raise BenchDataError(f"{path}: {exc}") from exc
    verifier = cross_validate(scores, labels, folds)
    overlap = cross_validate([overlap_score(e.answer, e.evidence) for e in examples], labels, folds)
    length = cross_validate([length_score(e.answer) for e in examples], labels, folds, orient=True)
    better_name, better = max((("overlap", overlap), ("length", length)), key=lambda nb: nb[1].auroc)
    delta = round(verifier.auroc - better.auroc, 4)
    return FileResult(file=path.name, examples=len(examples), supported=sum(labels), verifier=verifier,
                      overlap=overlap, length=length, better_baseline=better_name, delta_auroc=delta,
                      delta_accuracy=round(verifier.accuracy - better.accuracy, 4),
                      met=delta >= margin - 1e-9, seconds_per_answer=round(seconds / len(examples), 4))


def run_bench(data: Path, verifier: Any, name: str, ctx: ComponentContext, *, k: int = DEFAULT_FOLDS,
              seed: int = DEFAULT_SEED, timing: bool = True, limit: int | None = None,
              progress: Callable[[int, int, str], None] | None = None) -> BenchReport:
    """Everything the command reports. ``progress(done, total, file)`` is called per example."""
    loaded = [(path, load_examples(path)[: limit or None]) for path in data_files(data)]
    total = sum(len(examples) for _, examples in loaded)
    done = 0
    results: list[FileResult] = []
    for path, examples in loaded:
        started = time.perf_counter()
        scores = []
        for example in examples:
            scores.append(verify_example(verifier, name, example, path, ctx))
            done += 1
            if progress is not None:
                progress(done, total, path.name)
        results.append(evaluate_file(path, examples, scores, k=k, seed=seed,
                                     seconds=time.perf_counter() - started))
    if timing and progress is not None:
        progress(total, total, f"timing ({TIMING_WORDS}-word answer, {TIMING_CHUNKS} chunks)")
    timed = measure_timing(verifier, name, ctx) if timing else None
    return BenchReport(verifier=name, data=str(data), folds=k, seed=seed, margin=TARGET_MARGIN, files=results,
                       timing=timed, all_met=all(r.met for r in results) and (timed is None or timed.met))


# --- the command -------------------------------------------------------------------------------

_LENGTH_DIRECTION = {"lower": "shorter", "higher": "longer", "mixed": "mixed"}


def _cell(m: MethodResult) -> str:
    return f"{m.auroc:.3f}±{m.auroc_sd:.3f}"


def print_report(report: BenchReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ora bench grounding: verifier {report.verifier!r}, {report.folds}-fold CV (seed "
                        f"{report.seed}); AUROC: mean ± sd over the held-out folds; acc: held-out, threshold "
                        "chosen on the training folds")
    table.add_column("file", no_wrap=True)
    table.add_column("n (supp.)", no_wrap=True)
    for col in ("verifier", "acc", "overlap", "acc", "length", "acc", "Δ AUROC", "Δ acc", f"+{report.margin:.2f}",
                "s/answer"):
        table.add_column(col, no_wrap=True, justify="right")
    for r in report.files:
        table.add_row(r.file, f"{r.examples} ({r.supported})", _cell(r.verifier), f"{r.verifier.accuracy:.3f}",
                      _cell(r.overlap), f"{r.overlap.accuracy:.3f}",
                      f"{_cell(r.length)} {_LENGTH_DIRECTION[r.length.direction]}", f"{r.length.accuracy:.3f}",
                      f"{r.delta_auroc:+.3f} vs {r.better_baseline}", f"{r.delta_accuracy:+.3f}",
                      "MET" if r.met else "MISS", f"{r.seconds_per_answer:.3f}")
    console = Console(width=max(190, Console().width))
    console.print(table)
    if report.timing is not None:
        t = report.timing
        console.print(f"timing: {t.words}-word answer over {t.chunks} chunks: median {t.median_s:.3f} s of "
                      f"{', '.join(f'{s:.3f}' for s in t.runs_s)} (target <= {t.target_s} s): "
                      f"{'MET' if t.met else 'MISS'}")
    console.print("verifier ahead of both baselines by the margin on every file"
                  + (" and within the time target" if report.timing is not None else "") + ": "
                  + ("yes" if report.all_met else "NO"))


def run_with_progress(data: Path, verifier: Any, name: str, ctx: ComponentContext, k: int, seed: int, timing: bool,
                       limit: int | None) -> BenchReport:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("verifying", total=None)

        def step(done: int, total: int, file: str) -> None:
            bar.update(task, completed=done, total=total, description=f"verifying {file}")

        return run_bench(data, verifier, name, ctx, k=k, seed=seed, timing=timing, limit=limit, progress=step)

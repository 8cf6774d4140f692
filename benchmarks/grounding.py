"""Grounding verifier vs the content-word-overlap baseline, on the dev files only.

    .venv/bin/python benchmarks/grounding.py [--data DIR] [--limit N] [--threads N] [--json PATH]

Reads ``DIR/*_dev.jsonl`` (default ``../shared/data`` relative to the repo root; lines are
``{"evidence", "answer", "label": "supported"|"hallucinated", ...}``; only ``*_dev.jsonl`` files
are read). For each file it prints, side by side for the verifier's score and the baseline
(the share of the answer's content words that occur in the evidence):

- AUROC (supported = positive, higher score = more supported);
- accuracy at the threshold chosen on that dev file (the threshold is printed);
- accuracy under 2-fold cross-validation of the threshold (chosen on one half, measured on
  the other, both ways; an honest check that the chosen threshold is not a lucky pick);

and whether the verifier beats the baseline on AUROC and accuracy. Last, the single threshold
that maximises the mean balanced accuracy over all files: the recommended default for
``[verification] threshold``. Exit status 1 when the verifier does not beat the baseline on
every file.

The verifier runs as in a turn: ``GroundingVerifier().verify(answer, package)``, the package
carrying the evidence and the question (as a turn's ``EvidencePackage`` carries the prompt;
the verifier reads the question only to ground a bare yes/no answer).
``--threads`` sets the encoder's BLAS threads (``ORA_MINILM_THREADS``; default 1: on a busy
shared machine one thread is steadier than two contending ones).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "ora-grounding"))

from ora_grounding.text import content_words, words  # noqa: E402

LABELS = {"supported": 1, "hallucinated": 0}


class Example(BaseModel):
    id: str
    evidence: str
    answer: str
    question: str = ""
    label: int


class Scores(BaseModel):
    auroc: float
    threshold: float
    accuracy: float
    cv_accuracy: float


class FileResult(BaseModel):
    file: str
    examples: int
    supported: int
    seconds: float
    verifier: Scores
    baseline: Scores
    beats: bool


def baseline_score(answer: str, evidence: str) -> float:
    """The share of the answer's content words that occur in the evidence (as words)."""
    answer_words = content_words(answer)
    if not answer_words:
        return 1.0
    vocabulary = set(words(evidence))
    return sum(w in vocabulary for w in answer_words) / len(answer_words)


def auroc(scores: list[float], labels: list[int]) -> float:
    """Probability that a supported example outscores a hallucinated one (ties count half)."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    positives = sum(labels)
    negatives = len(labels) - positives
    if not positives or not negatives:
        raise SystemExit("a dev file needs both labels to compute AUROC")
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def accuracy(scores: list[float], labels: list[int], threshold: float) -> float:
    return sum((s >= threshold) == bool(y) for s, y in zip(scores, labels, strict=True)) / len(labels)


def balanced_accuracy(scores: list[float], labels: list[int], threshold: float) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    return (sum(s >= threshold for s in pos) / len(pos) + sum(s < threshold for s in neg) / len(neg)) / 2


def candidate_thresholds(scores: list[float]) -> list[float]:
    values = sorted(set(scores))
    mids = [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]
    return [values[0] - 1e-9, *mids, values[-1] + 1e-9]


def best_threshold(scores: list[float], labels: list[int]) -> float:
    return max(candidate_thresholds(scores), key=lambda t: (accuracy(scores, labels, t), -abs(t - 0.5)))


def evaluate(scores: list[float], labels: list[int]) -> Scores:
    threshold = best_threshold(scores, labels)
    idx = list(range(len(scores)))
    random.Random(0).shuffle(idx)
    halves = [idx[: len(idx) // 2], idx[len(idx) // 2:]]
    correct = 0
    for fit, test in (halves, halves[::-1]):
        t = best_threshold([scores[i] for i in fit], [labels[i] for i in fit])
        correct += sum((scores[i] >= t) == bool(labels[i]) for i in test)
    return Scores(auroc=round(auroc(scores, labels), 4), threshold=round(threshold, 4),
                  accuracy=round(accuracy(scores, labels, threshold), 4),
                  cv_accuracy=round(correct / len(scores), 4))


def load(path: Path, limit: int | None) -> list[Example]:
    examples = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            examples.append(Example(id=str(row.get("id", n)), evidence=row["evidence"], answer=row["answer"],
                                    question=row.get("question") or "", label=LABELS[row["label"]]))
        except (KeyError, ValueError) as exc:
            raise SystemExit(f"{path}:{n}: not a grounding example ({type(exc).__name__}: {exc}); expected "
                             "evidence, answer and label 'supported' or 'hallucinated'") from exc
    if limit:
        examples = examples[:limit]
    return examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                        help="directory holding the *_dev.jsonl files (default: ../shared/data)")
    parser.add_argument("--limit", type=int, default=None, help="first N examples of each file (quick runs)")
    parser.add_argument("--threads", type=int, default=1, help="MiniLM encoder BLAS threads (default 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)

    files = sorted(args.data.glob("*_dev.jsonl"))
    if not files:
        raise SystemExit(f"no *_dev.jsonl files in {args.data} (pass --data DIR)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["ORA_MINILM_THREADS"] = str(max(1, args.threads))  # read when the encoder loads
    from ora_grounding import GroundingVerifier

    verifier = GroundingVerifier()
    started = time.perf_counter()
    verifier.embedder()
    threads = os.environ["ORA_MINILM_THREADS"]
    print(f"MiniLM loaded in {time.perf_counter() - started:.1f}s (encoder BLAS threads: {threads}); "
          "the machine is shared, times are noisy")

    results: list[FileResult] = []
    per_file_scores: list[tuple[list[float], list[int]]] = []
    for path in files:
        examples = load(path, args.limit)
        labels = [e.label for e in examples]
        t0 = time.perf_counter()
        ours = [float(verifier.verify(e.answer, {"chunks": [e.evidence], "question": e.question}, "", None).score
                      or 0.0) for e in examples]
        seconds = time.perf_counter() - t0
        base = [baseline_score(e.answer, e.evidence) for e in examples]
        v, b = evaluate(ours, labels), evaluate(base, labels)
        results.append(FileResult(file=path.name, examples=len(examples), supported=sum(labels),
                                  seconds=round(seconds, 1), verifier=v, baseline=b,
                                  beats=v.auroc > b.auroc and v.accuracy > b.accuracy))
        per_file_scores.append((ours, labels))

    header = (f"{'file':26s} {'n':>4s} | {'verifier AUROC':>14s} {'acc':>6s} {'thr':>6s} {'cv acc':>6s} | "
              f"{'baseline AUROC':>14s} {'acc':>6s} {'thr':>6s} {'cv acc':>6s} | {'ratio':>5s} beats  s/ex")
    print(header)
    print("-" * len(header))
    for r in results:
        v, b = r.verifier, r.baseline
        print(f"{r.file:26s} {r.examples:4d} | {v.auroc:14.3f} {v.accuracy:6.3f} {v.threshold:6.3f} "
              f"{v.cv_accuracy:6.3f} | {b.auroc:14.3f} {b.accuracy:6.3f} {b.threshold:6.3f} {b.cv_accuracy:6.3f} | "
              f"{v.auroc / b.auroc:5.2f} {'yes' if r.beats else 'NO':5s} {r.seconds / r.examples:5.3f}")

    grid = sorted({round(t, 2) for t in [i / 100 for i in range(5, 96)]})
    recommended = max(grid, key=lambda t: sum(balanced_accuracy(s, y, t) for s, y in per_file_scores))
    mean_bacc = sum(balanced_accuracy(s, y, recommended) for s, y in per_file_scores) / len(per_file_scores)
    print(f"\nrecommended [verification] threshold: {recommended:.2f} "
          f"(max mean balanced accuracy over the dev files: {mean_bacc:.3f}; "
          + ", ".join(f"{r.file.split('_')[0]} acc {accuracy(s, y, recommended):.3f}"
                      for r, (s, y) in zip(results, per_file_scores, strict=True)) + ")")
    all_beat = all(r.beats for r in results)
    print("verifier beats the baseline (AUROC and accuracy) on every file:", "yes" if all_beat else "NO")
    if args.json:
        args.json.write_text(json.dumps({"results": [r.model_dump() for r in results],
                                         "recommended_threshold": recommended}, indent=2))
    return 0 if all_beat else 1


if __name__ == "__main__":
    raise SystemExit(main())

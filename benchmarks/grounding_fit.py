"""Refit the grounding score's constants (``ora_grounding/model.py``) and report them honestly.

    .venv/bin/python benchmarks/grounding_fit.py [--data DIR] [--folds 5] [--seed 0]
        [--holdout 0.2] [--holdout-seed 15] [--cache PATH] [--write] [--json PATH]
        [--nested] [--seeds A-B] [--terms A,B] [--compare=A,B+C,-copy_reorder]

1. Reads every ``*.jsonl`` of ``DIR`` (default ``../shared/data``; the format of ``ora bench
   grounding``) and sets a fixed seeded share of each file aside (``--holdout``, seed
   ``--holdout-seed``; answers whose ids differ only in a final one-digit ``-N`` — a HaluEval record's two
   answers — go together). Nothing below looks at that part until step 4.
2. Runs the registered ``grounding`` verifier on every example, as ``ora bench grounding`` does,
   and keeps what its report says of each claim (lexical share, similarity, missing specifics)
   and whether the answer talks about the speaker or the listener. Features do not depend on the
   fitted constants, so a refit needs no second pass (``--cache PATH`` keeps them between runs).
3. Cross-validates the fit on the rest: ``--folds`` folds per file stratified by label (records
   kept together), the model fitted on the training folds of all files pooled, its AUROC measured
   on each file's held-out fold; the verdict threshold is chosen on the training folds (the one
   that maximises the mean balanced accuracy over the files) and measured on the held-out fold.
   The two baselines of ``ora bench grounding`` are measured on the same folds.
4. Fits on all of the rest: the constants to ship. Reports their AUROC (and the baselines') on
   the held-out share, and the threshold they recommend.

``--compare`` runs step 3's nested CV (``--nested``) for the shipped model and for each design
given (a candidate term of ``TERMS`` added, ``A+B`` both, ``-name`` a shipped column left out) in
one run, and prints each source's outer-fold delta side by side with the load average: how a
term is judged before it ships (issue 25's third design round; ``model.py`` has the figures).

With ``--write`` the fitted block of ``model.py`` is rewritten. The fit: L2-penalised logistic
regression (Newton's method, intercept free), "the weakest claim decides" fitted as a
multiple-instance problem: each answer is represented by its weakest claim under the current
weights, refitted until those picks settle (answers with no claim are left out of the fit and
scored 0).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "ora-grounding"))

from ora_grounding import model  # noqa: E402
from ora_grounding.scoring import copy_reorder  # noqa: E402

from ora_core.cli.bench_grounding import (  # noqa: E402
    DEFAULT_DATA,
    TARGET_MARGIN,
    GroundingExample,
    auroc,
    data_files,
    length_score,
    load_examples,
)
from ora_core.cli.bench_grounding import overlap_score as _overlap_score  # noqa: E402


@functools.cache
def overlap_score(answer: str, evidence: str) -> float:
    """The overlap baseline, kept per example (the nested CV asks for the same ones many times)."""
    return _overlap_score(answer, evidence)

#: The folders the fit reads by default: the shared dev files and the sources issue 25 brought in.
DEFAULT_FOLDERS = (DEFAULT_DATA, ROOT / "benchmarks" / "data" / "grounding")
FEATURES = ("lexical", "semantic", "missing", "missing_words")
#: The columns of ``design`` and the constant each weight becomes (the intercept last): the shipped model's.
COLUMNS = ("LEXICAL", "SEMANTIC", "MISSING_SPECIFIC", "MISSING_WORD", "PERSONAL", "ANSWER_LEXICAL", "COPY_REORDER")
#: Changes when the verifier's features change meaning (cached features of another version are recomputed).
FEATURES_VERSION = 7

#: Yes/no openings of an answer (``yes_to_personal``).
_YES_NO = re.compile(r"^\s*(?:yes|yeah|yep|yup|no|nope|nah|sure|definitely|absolutely|of course)\b", re.IGNORECASE)


class Term(BaseModel):
    """A candidate term: measured by ``--terms`` / ``--compare`` beside the shipped columns, shipped
    only when the nested CV says it helps out of sample (``model.py`` records which were measured)."""

    column: str
    says: str  # the one sentence the docs would state


#: Candidate terms of issue 25's third design round (aimed at the dialogue sources' worst-ranked
#: answers: copies of a knowledge sentence that change who or what it is about, answers that
#: gather their words from all over the evidence, "yes" to a question about the speaker, short
#: chit-chat claims sinking a supported answer). The values come from each claim's row
#: (``features_of``) and the answer (``AnswerFeatures``).
TERMS = {
    "order": Term(column="ORDER", says="the share of the claim's consecutive content-word pairs that some "
                  "evidence sentence has in that order, at most four content words apart"),
    "focus": Term(column="FOCUS", says="the share of the claim's content words found in its best single "
                  "evidence unit (a sentence or two adjacent ones)"),
    "yes_to_personal": Term(column="YES_TO_PERSONAL", says="the answer opens with yes/no to a question about "
                            "the speaker or the listener (\"do you like it?\"), which no evidence supports"),
    "short": Term(column="SHORT", says="the claim has at most two content words and no specific (chit-chat "
                  "such as \"that's awesome\")"),
}


def term_value(name: str, row: list[float], f: AnswerFeatures) -> float:
    """The value of candidate term ``name`` for one claim ``row`` of answer ``f``."""
    content, specifics, focus, order = row[4], row[5], row[6], row[7]
    if name == "order":
        return order
    if name == "focus":
        return focus
    if name == "yes_to_personal":
        return float(f.yes_to_personal)
    if name == "short":
        return float(content <= 2 and specifics == 0)
    raise ValueError(f"unknown term {name!r} (known: {', '.join(TERMS)})")


#: The candidate terms the design adds to ``COLUMNS`` (``--terms``; empty: the shipped model).
EXTRA_TERMS: list[str] = []


def columns() -> tuple[str, ...]:
    return COLUMNS + tuple(TERMS[t].column for t in EXTRA_TERMS)


#: Shipped columns the design leaves out (``-name`` in ``--terms`` / ``--compare``: the column is
#: zero, so its weight stays 0 under the L2 penalty: the model as it was before that term).
DROPPED: set[str] = set()


def use_terms(terms: list[str]) -> None:
    """Fit (and design) with the shipped columns plus ``terms`` from now on; a term ``-name``
    leaves the shipped column ``NAME`` out instead (``-copy_reorder``: the model before issue
    25's third design round)."""
    dropped = {t[1:].upper() for t in terms if t.startswith("-")}
    added = [t for t in terms if not t.startswith("-")]
    unknown = [t for t in added if t not in TERMS] + [f"-{c.lower()}" for c in dropped if c not in COLUMNS]
    if unknown:
        raise SystemExit(f"grounding_fit: unknown term(s) {', '.join(unknown)} (known: {', '.join(TERMS)}, "
                         f"or -column of {', '.join(c.lower() for c in COLUMNS)})")
    EXTRA_TERMS[:] = added
    DROPPED.clear()
    DROPPED.update(dropped)
    _designs.clear()


class Caps(BaseModel):
    """The hyper-parameters of the fit: the caps of the two counts and the L2 penalty."""

    max_missing: int
    max_missing_words: int
    l2: float


class AnswerFeatures(BaseModel):
    """What the verifier's report says of one answer: a row per claim, and the personal flag."""

    #: per claim: lexical, semantic, missing specifics, missing words (the model's inputs), then the
    #: claim's content words and specifics (what it asserts: read by the design, not fitted)
    claims: list[list[float]]
    personal: bool
    answer_lexical: float = 1.0  # the share of the whole answer's content words the evidence has
    #: the answer opens with yes/no to a question about the speaker or listener (candidate term)
    yes_to_personal: bool = False


class Split(BaseModel):
    file: str
    examples: list[GroundingExample]
    groups: list[str]
    holdout: list[bool]
    features: list[AnswerFeatures]

    def labels(self) -> np.ndarray:
        return np.array([e.label for e in self.examples])


# --- the fit -----------------------------------------------------------------------------------

_designs: dict[tuple[int, int, int, tuple[str, ...]], tuple[AnswerFeatures, np.ndarray]] = {}


def design(f: AnswerFeatures, caps: Caps) -> np.ndarray:
    """The claim rows of one answer as model inputs (``COLUMNS``): lexical, semantic, capped
    missing specifics, capped missing words, personal, answer lexical, then the ``EXTRA_TERMS``
    (kept per answer, caps and terms: the nested CV asks for the same ones many times)."""
    key = (id(f), caps.max_missing, caps.max_missing_words, (*EXTRA_TERMS, *sorted(DROPPED)))
    kept = _designs.get(key)
    if kept is not None and kept[0] is f:
        return kept[1]
    rows = [[row[0], row[1], min(row[2], caps.max_missing), min(row[3], caps.max_missing_words), float(f.personal),
             f.answer_lexical, copy_reorder(row[0], row[7]), *(term_value(t, row, f) for t in EXTRA_TERMS)]
            for row in f.claims]
    x = np.array(rows, dtype=float).reshape(-1, len(columns()))
    for name in DROPPED:
        x[:, COLUMNS.index(name)] = 0.0
    _designs[key] = (f, x)
    return x


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iterations: int = 100) -> np.ndarray:
    """Weights (last = intercept, unpenalised) of an L2-penalised logistic regression, by Newton."""
    x1 = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x1.shape[1])
    penalty = np.eye(x1.shape[1]) * l2
    penalty[-1, -1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x1 @ w)))
        gradient = x1.T @ (p - y) + penalty @ w
        hessian = x1.T @ (x1 * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def fit_weakest_claim(answers: list[np.ndarray], y: np.ndarray, l2: float, rounds: int = 20) -> np.ndarray:
    """Fit where each answer counts as its weakest claim under the weights being fitted."""
    keep = [i for i, a in enumerate(answers) if len(a)]
    picks = [answers[i][np.argmin(answers[i][:, 0] + answers[i][:, 1])] for i in keep]  # start: lexical + similarity
    w = fit_logistic(np.array(picks), y[keep], l2)
    for _ in range(rounds):
        new_picks = [answers[i][np.argmin(answers[i] @ w[:-1])] for i in keep]
        if all(np.array_equal(a, b) for a, b in zip(picks, new_picks, strict=True)):
            break
        picks = new_picks
        w = fit_logistic(np.array(picks), y[keep], l2)
    return w


def answer_logits(w: np.ndarray, answers: list[np.ndarray]) -> np.ndarray:
    """The answer's logit: its weakest claim's (the personal term is the same on every row)."""
    return np.array([float((a @ w[:-1]).min() + w[-1]) if len(a) else -50.0 for a in answers])


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def balanced_accuracy(scores: np.ndarray, y: np.ndarray, t: float) -> float:
    return float(((scores[y == 1] >= t).mean() + (scores[y == 0] < t).mean()) / 2)


def shared_threshold(per_file: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The threshold on a 0.01 grid that maximises the mean balanced accuracy over the files
    (ties: the one nearest 0.5)."""
    grid = [round(t, 2) for t in np.arange(0.05, 0.96, 0.01)]
    return max(grid, key=lambda t: (round(statistics.fmean(balanced_accuracy(s, y, t) for s, y in per_file), 9),
                                    -abs(t - 0.5)))


# --- splits ------------------------------------------------------------------------------------

def record_groups(examples: list[GroundingExample]) -> list[str]:
    """Answers whose ids differ only in a final ``-N`` (one digit) belong together (a HaluEval record)."""
    stems = [re.sub(r"-\d$", "", e.id) for e in examples]
    counts: dict[str, int] = {}
    for s in stems:
        counts[s] = counts.get(s, 0) + 1
    return [s if counts[s] > 1 else e.id for s, e in zip(stems, examples, strict=True)]


def group_folds(labels: list[int], groups: list[str], k: int, seed: int) -> list[int]:
    """Folds of whole groups, dealt round per label mix so each fold keeps the file's proportions."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    order = sorted(members)
    random.Random(seed).shuffle(order)
    fold_of: dict[str, int] = {}
    mixes = sorted({tuple(sorted(labels[i] for i in members[g])) for g in order})
    start = 0
    for mix in mixes:
        same = [g for g in order if tuple(sorted(labels[i] for i in members[g])) == mix]
        for n, g in enumerate(same):
            fold_of[g] = (start + n) % k
        start = (start + len(same)) % k
    return [fold_of[g] for g in groups]


def holdout_of(groups: list[str], share: float, seed: int) -> list[bool]:
    """A seeded ``share`` of the groups (whole groups only): the groups sorted, shuffled with
    ``random.Random(seed)``, the first ``round(share * groups)`` taken. This is the split the
    shipped features were designed against (their choices never saw it), so keep it unless the
    design is redone."""
    order = sorted(set(groups))
    random.Random(seed).shuffle(order)
    held = set(order[: round(len(order) * share)])
    return [g in held for g in groups]


# --- features from the verifier ----------------------------------------------------------------

def verifier_and_ctx() -> tuple[Any, Any]:
    """The registered ``grounding`` verifier and a ctx whose ``embedder()`` is the configured one,
    found as ``ora bench grounding`` finds them."""
    from ora_core.cli.state import get_host, load_resolved
    from ora_core.kernel.trace import StandaloneContext

    host = get_host()
    return host.get("verifier", "grounding"), StandaloneContext(load_resolved(), host=host)


def features_of(verdict: Any) -> AnswerFeatures:
    from ora_grounding.text import content_words

    claims = [[float(c["lexical"]), float(c["semantic"]), float(len(c["missing_specifics"])),
               float(len(c["missing_words"])), float(len(content_words(c["claim"]))), float(len(c["specifics"])),
               float(c.get("focus", 1.0)), float(c.get("order", 1.0))]
              for c in verdict.data.get("claims", [])]
    return AnswerFeatures(claims=claims, personal=bool(verdict.data.get("personal")),
                          answer_lexical=float(verdict.data.get("answer_lexical", 1.0)))


def answers_personal_question(e: GroundingExample) -> bool:
    """The answer opens with yes/no to a question (the example's ``question`` ends with "?") whose
    last sentence talks about the speaker or the listener (``text.speaks_of_persons``)."""
    from ora_grounding.text import speaks_of_persons, split_sentences

    question = (e.question or "").strip()
    last = (split_sentences(question) or [question])[-1]
    return bool(_YES_NO.match(e.answer)) and question.endswith("?") and speaks_of_persons(last)


def example_key(e: GroundingExample) -> str:
    return hashlib.sha256(json.dumps([e.evidence, e.question, e.answer, model.CANDIDATES, model.CLAUSE_CANDIDATES,
                                      FEATURES_VERSION]).encode()).hexdigest()


def compute_features(examples: list[GroundingExample], cache: dict[str, Any], verifier: Any, ctx: Any,
                     path: Path) -> list[AnswerFeatures]:
    out = []
    for e in examples:
        key = example_key(e)
        if key not in cache:
            verdict = verifier.verify(e.answer, {"chunks": [e.evidence], "question": e.question}, "", ctx)
            cache[key] = features_of(verdict).model_dump()
        features = AnswerFeatures.model_validate(cache[key])
        features.yes_to_personal = answers_personal_question(e)
        out.append(features)
    print(f"  features: {path.name} ({len(examples)} answers)", file=sys.stderr)
    return out


# --- the report --------------------------------------------------------------------------------

def _rows(splits: list[Split], caps: Caps, pick: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """The design and labels of the examples ``pick(split, i)`` selects, the files pooled."""
    x = [design(f, caps) for s in splits for i, f in enumerate(s.features) if pick(s, i)]
    y = np.array([s.examples[i].label for s in splits for i in range(len(s.examples)) if pick(s, i)])
    return x, y


def _baselines(s: Split, test: list[int], train: list[int]) -> tuple[float, float]:
    """AUROC of content-word overlap and of answer length on ``test``, the length direction as
    ``train`` favours it (as ``ora bench grounding`` does)."""
    y = [s.examples[i].label for i in test]
    overlap = auroc([overlap_score(s.examples[i].answer, s.examples[i].evidence) for i in test], y)
    sign = -1.0 if auroc([length_score(s.examples[i].answer) for i in train],
                         [s.examples[i].label for i in train]) < 0.5 else 1.0
    return overlap, auroc([sign * length_score(s.examples[i].answer) for i in test], y)


def cross_validate(splits: list[Split], k: int, seed: int, caps: Caps,
                   member: dict[str, list[bool]] | None = None) -> dict[str, Any]:
    """``k``-fold CV (folds seeded ``seed``) over the examples ``member`` marks (default: the
    tuning part, every example not held out): fitted on the training folds of all files pooled,
    AUROC per file on each held-out fold, the threshold chosen on the training folds."""
    member = member or {s.file: [not h for h in s.holdout] for s in splits}
    folds = {s.file: group_folds([e.label for e in s.examples], s.groups, k, seed) for s in splits}
    per_file: dict[str, dict[str, list[float]]] = {
        s.file: {"model": [], "overlap": [], "length": [], "accuracy": [], "balanced": []} for s in splits}
    thresholds = []
    for held in range(k):
        def train(s: Split, i: int, held: int = held) -> bool:
            return member[s.file][i] and folds[s.file][i] != held

        w = fit_weakest_claim(*_rows(splits, caps, train), caps.l2)
        train_scores, test_scores = [], []
        for s in splits:
            y = s.labels()
            tr = [i for i in range(len(y)) if train(s, i)]
            te = [i for i in range(len(y)) if member[s.file][i] and folds[s.file][i] == held]
            train_scores.append((sigmoid(answer_logits(w, [design(s.features[i], caps) for i in tr])), y[tr]))
            test_scores.append((s, te, tr, sigmoid(answer_logits(w, [design(s.features[i], caps) for i in te])), y[te]))
        t = shared_threshold(train_scores)
        thresholds.append(float(t))
        for s, te, tr, scores, y in test_scores:
            r = per_file[s.file]
            r["model"].append(auroc(list(scores), list(y)))
            overlap, length = _baselines(s, te, tr)
            r["overlap"].append(overlap)
            r["length"].append(length)
            r["accuracy"].append(float(((scores >= t) == (y == 1)).mean()))
            r["balanced"].append(balanced_accuracy(scores, y, t))
    summary = {}
    for file, r in per_file.items():
        m, o, ln = (statistics.fmean(r[n]) for n in ("model", "overlap", "length"))
        summary[file] = {"auroc": round(m, 4), "auroc_sd": round(statistics.pstdev(r["model"]), 4),
                         "overlap": round(o, 4), "length": round(ln, 4), "delta": round(m - max(o, ln), 4),
                         "accuracy": round(statistics.fmean(r["accuracy"]), 4),
                         "balanced_accuracy": round(statistics.fmean(r["balanced"]), 4)}
    return {"files": summary, "thresholds": thresholds}


#: The hyper-parameters ``--nested`` chooses among (each by an inner cross-validation).
GRID = [Caps(max_missing=m, max_missing_words=w, l2=l2)
        for m in (1, 2, 3) for w in (0, 2, 3, 4, 6) for l2 in (0.3, 1.0, 3.0)]


def nested(splits: list[Split], k: int, seed: int) -> dict[str, Any]:
    """Nested CV of choosing the caps: for each outer fold, a ``k - 1``-fold CV of its training
    part picks the ``GRID`` entry of best mean delta over the files; the model refitted with it on
    the whole training part is measured on the outer fold. The figures are those of the procedure
    (choice included), not of one choice."""
    folds = {s.file: group_folds([e.label for e in s.examples], s.groups, k, seed) for s in splits}
    per_file: dict[str, dict[str, list[float]]] = {s.file: {"model": [], "delta": [], "overlap": [], "length": []}
                                                    for s in splits}
    chosen: list[dict[str, Any]] = []
    for held in range(k):
        member = {s.file: [not s.holdout[i] and folds[s.file][i] != held for i in range(len(s.examples))]
                  for s in splits}

        def inner(caps: Caps, member: dict[str, list[bool]] = member) -> float:
            files = cross_validate(splits, k - 1, seed + 1000, caps, member)["files"]
            return statistics.fmean(r["delta"] for r in files.values())

        caps = max(GRID, key=inner)
        chosen.append(caps.model_dump())
        w = fit_weakest_claim(*_rows(splits, caps, lambda s, i, m=member: m[s.file][i]), caps.l2)
        for s in splits:
            te = [i for i in range(len(s.examples)) if not s.holdout[i] and folds[s.file][i] == held]
            tr = [i for i in range(len(s.examples)) if member[s.file][i]]
            m = auroc(list(answer_logits(w, [design(s.features[i], caps) for i in te])),
                      [s.examples[i].label for i in te])
            overlap, length = _baselines(s, te, tr)
            per_file[s.file]["model"].append(m)
            per_file[s.file]["overlap"].append(overlap)
            per_file[s.file]["length"].append(length)
            per_file[s.file]["delta"].append(m - max(overlap, length))
    return {"files": {f: {name: round(statistics.fmean(r[name]), 4) for name in ("model", "overlap", "length", "delta")}
                      | {"auroc": round(statistics.fmean(r["model"]), 4)} for f, r in per_file.items()},
            "chosen": chosen}


def held_out(splits: list[Split], w: np.ndarray, threshold: float, caps: Caps) -> dict[str, Any]:
    out = {}
    for s in splits:
        idx = [i for i in range(len(s.examples)) if s.holdout[i]]
        tune = [i for i in range(len(s.examples)) if not s.holdout[i]]
        y = [s.examples[i].label for i in idx]
        scores = sigmoid(answer_logits(w, [design(s.features[i], caps) for i in idx]))
        overlap, length = _baselines(s, idx, tune)
        m = auroc(list(scores), y)
        out[s.file] = {"examples": len(idx), "auroc": round(m, 4), "overlap": round(overlap, 4),
                       "length": round(length, 4), "delta": round(m - max(overlap, length), 4),
                       "accuracy": round(float(((scores >= threshold) == (np.array(y) == 1)).mean()), 4)}
    return out


def write_constants(w: np.ndarray) -> None:
    path = ROOT / "plugins" / "ora-grounding" / "ora_grounding" / "model.py"
    text = path.read_text(encoding="utf-8")
    start = text.index("# --- fitted:")
    end = text.index("# --- end of fitted block ---")
    values = dict(zip((*COLUMNS, "INTERCEPT"), w, strict=True))
    block = "# --- fitted: benchmarks/grounding_fit.py --write rewrites this block ---\n" + "".join(
        f"{name} = {values[name]:.2f}\n" for name in ("INTERCEPT", *COLUMNS))
    path.write_text(text[:start] + block + text[end:], encoding="utf-8")
    print(f"wrote the fitted constants to {path}")


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def compare(splits: list[Split], k: int, seeds: list[int], designs: list[str]) -> dict[str, Any]:
    """The nested CV of the shipped model and of each design (a term, or terms joined by ``+``)
    added to it, on the same folds and in the same run: per source, the outer-fold delta over
    the better baseline (mean over ``seeds``) and MET/MISS, with the load average."""
    names = ["shipped", *designs]
    for design_name in designs:
        use_terms(design_name.split("+"))  # refuses an unknown term before the long run starts
    results: dict[str, dict[str, Any]] = {}
    load = [os.getloadavg()]
    for name in names:
        use_terms([] if name == "shipped" else name.split("+"))
        started = time.perf_counter()
        runs = [nested(splits, k, seed) for seed in seeds]
        results[name] = {s.file: {"delta": round(statistics.fmean(r["files"][s.file]["delta"] for r in runs), 4),
                                  "min": round(min(r["files"][s.file]["delta"] for r in runs), 4),
                                  "auroc": round(statistics.fmean(r["files"][s.file]["auroc"] for r in runs), 4)}
                         for s in splits}
        print(f"  nested CV of {name}: {time.perf_counter() - started:.0f}s", file=sys.stderr)
    use_terms([])
    load.append(os.getloadavg())
    print(f"\nnested CV, outer-fold AUROC delta over the better baseline per source (mean over fold seeds "
          f"{seeds[0]}-{seeds[-1]}; MET at +{TARGET_MARGIN}); load average {load[0][0]:.1f} at the start, "
          f"{load[1][0]:.1f} at the end:")
    print(f"{'source':26s}" + "".join(f" {n[:22]:>22s}" for n in names))
    for s in splits:
        cells = []
        for n in names:
            r = results[n][s.file]
            cells.append(f"{r['delta']:+.4f} {'MET ' if r['delta'] >= TARGET_MARGIN else 'MISS'}")
        print(f"{s.file:26s}" + "".join(f" {c:>22s}" for c in cells))
    for n in designs:
        print(f"{n}: " + "; ".join(f"without the shipped {t[1:]}" if t.startswith("-") else TERMS[t].says
                                   for t in n.split("+")))
    return {"seeds": seeds, "load_average": load, "designs": results}


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, action="append", default=None,
                        help="a folder of *.jsonl (repeatable; default: ../shared/data and benchmarks/data/grounding)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seed of the cross-validation folds")
    parser.add_argument("--seeds", type=_seeds, default=None, metavar="A-B",
                        help="also cross-validate with each fold seed A..B: mean and minimum delta per file")
    parser.add_argument("--nested", action="store_true",
                        help="nested CV of choosing the caps and L2 (GRID) over the fold seeds (--seeds, else --seed)")
    parser.add_argument("--holdout", type=float, default=0.2, help="share of each file kept out of all fitting")
    parser.add_argument("--holdout-seed", type=int, default=15)
    parser.add_argument("--cache", type=Path, default=None, help="keep the verifier's features here (JSON)")
    parser.add_argument("--write", action="store_true", help="rewrite the fitted block of ora_grounding/model.py")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--terms", type=_names, default=[], metavar="A,B",
                        help=f"fit with these candidate terms besides the shipped columns ({', '.join(TERMS)})")
    parser.add_argument("--compare", type=_names, default=None, metavar="A,B",
                        help="nested CV (over --seeds) of the shipped model and of the shipped model plus each "
                             "term, in the same run, side by side per source (A+B: both terms together; "
                             "-name: without the shipped column NAME, e.g. --compare=-copy_reorder; the = keeps "
                             "the dash an argument)")
    args = parser.parse_args(argv)
    if args.write and args.terms:  # a dropped column would be written as 0.00: refused too
        parser.error("--write rewrites the shipped columns only: a candidate term is not read by the verifier")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    cache: dict[str, Any] = {}
    if args.cache is not None and args.cache.exists():
        cache = json.loads(args.cache.read_text(encoding="utf-8"))
    verifier, ctx = verifier_and_ctx()
    started = time.perf_counter()
    splits = []
    for path in [f for folder in (args.data or DEFAULT_FOLDERS) for f in data_files(folder)]:
        examples = load_examples(path)
        groups = record_groups(examples)
        splits.append(Split(file=path.name, examples=examples, groups=groups,
                            holdout=holdout_of(groups, args.holdout, args.holdout_seed),
                            features=compute_features(examples, cache, verifier, ctx, path)))
    if args.cache is not None:
        args.cache.write_text(json.dumps(cache), encoding="utf-8")
    print(f"features of {sum(len(s.examples) for s in splits)} answers in {time.perf_counter() - started:.0f}s",
          file=sys.stderr)

    if args.compare is not None:
        report = compare(splits, args.folds, args.seeds or [args.seed], args.compare)
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
        return 0
    use_terms(args.terms)
    caps = Caps(max_missing=model.MAX_MISSING, max_missing_words=model.MAX_MISSING_WORDS, l2=model.L2)
    report: dict[str, Any] = {"caps": caps.model_dump(), "terms": args.terms}
    cv = report["cv"] = cross_validate(splits, args.folds, args.seed, caps)
    x, y = _rows(splits, caps, lambda s, i: not s.holdout[i])
    w = fit_weakest_claim(x, y, caps.l2)
    tune_scores = []
    for s in splits:
        idx = [i for i in range(len(s.examples)) if not s.holdout[i]]
        tune_scores.append((sigmoid(answer_logits(w, [design(s.features[i], caps) for i in idx])), s.labels()[idx]))
    threshold = shared_threshold(tune_scores)
    held = report["held_out"] = held_out(splits, w, threshold, caps)

    print(f"\n{args.folds}-fold CV on the tuning part ({1 - args.holdout:.0%} of each file), AUROC mean over "
          f"held-out folds (fold seed {args.seed}); threshold chosen on the training folds:")
    print(f"{'file':26s} {'model':>7s} {'± sd':>6s} {'overlap':>8s} {'length':>7s} {'delta':>7s} {'acc':>6s} "
          f"{'bal.acc':>7s}")
    for file, r in cv["files"].items():
        print(f"{file:26s} {r['auroc']:7.3f} {r['auroc_sd']:6.3f} {r['overlap']:8.3f} {r['length']:7.3f} "
              f"{r['delta']:+7.3f} {r['accuracy']:6.3f} {r['balanced_accuracy']:7.3f}")
    print(f"thresholds chosen on the training folds: {cv['thresholds']}")
    if args.seeds:
        runs = [cross_validate(splits, args.folds, seed, caps)["files"] for seed in args.seeds]
        report["seeds"] = {"seeds": args.seeds, "files": {}}
        print(f"\nover fold seeds {args.seeds[0]}-{args.seeds[-1]}: AUROC (mean) and its delta over the better "
              "baseline (mean, minimum):")
        for file in cv["files"]:
            deltas = [run[file]["delta"] for run in runs]
            row = {"auroc": round(statistics.fmean(run[file]["auroc"] for run in runs), 4),
                   "delta_mean": round(statistics.fmean(deltas), 4), "delta_min": round(min(deltas), 4)}
            report["seeds"]["files"][file] = row
            print(f"{file:26s} AUROC {row['auroc']:.3f}  delta mean {row['delta_mean']:+.4f}  "
                  f"min {row['delta_min']:+.4f}")
    if args.nested:
        runs = [nested(splits, args.folds, seed) for seed in (args.seeds or [args.seed])]
        report["nested"] = runs
        print("\nnested CV (the caps and L2 chosen by an inner CV on each outer training part), outer-fold AUROC "
              f"per source, mean over fold seeds {[r for r in (args.seeds or [args.seed])]}; target: the better "
              f"baseline + {TARGET_MARGIN}:")
        print(f"{'source':26s} {'model':>7s} {'overlap':>8s} {'length':>7s} {'delta':>7s} {'min':>7s}")
        for file in cv["files"]:
            deltas = [run["files"][file]["delta"] for run in runs]
            mean = {name: statistics.fmean(run["files"][file][name] for run in runs)
                    for name in ("auroc", "overlap", "length")}
            verdict = "MET" if statistics.fmean(deltas) >= TARGET_MARGIN else "MISS"
            print(f"{file:26s} {mean['auroc']:7.3f} {mean['overlap']:8.3f} {mean['length']:7.3f} "
                  f"{statistics.fmean(deltas):+7.4f} {min(deltas):+7.4f}  {verdict}")
        picks: dict[str, int] = {}
        for run in runs:
            for c in run["chosen"]:
                label = f"max_missing={c['max_missing']} max_missing_words={c['max_missing_words']} l2={c['l2']}"
                picks[label] = picks.get(label, 0) + 1
        print("chosen: " + "; ".join(f"{n}x {label}" for label, n in sorted(picks.items(), key=lambda kv: -kv[1])))
    print(f"\nheld-out {args.holdout:.0%} (seed {args.holdout_seed}), model fitted on the whole tuning part, "
          f"threshold {threshold:.2f}:")
    for file, r in held.items():
        print(f"{file:26s} n={r['examples']:4d} AUROC {r['auroc']:.3f} overlap {r['overlap']:.3f} length "
              f"{r['length']:.3f} delta {r['delta']:+.3f} acc {r['accuracy']:.3f}")
    names = (*columns(), "INTERCEPT")
    print("\nfitted constants: " + ", ".join(f"{n} = {v:.2f}" for n, v in zip(names, w, strict=True)))
    print(f"recommended [verification] threshold: {threshold:.2f}")
    report.update(constants=dict(zip(names, map(float, w), strict=True)), threshold=threshold)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    if args.write:
        write_constants(w)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

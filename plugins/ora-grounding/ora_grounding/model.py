"""The fitted constants of the grounding score: a logistic model over five features.

For each claim (a sentence that asserts something) of an answer::

    claim logit = INTERCEPT + LEXICAL * lexical + SEMANTIC * semantic
                  + MISSING_SPECIFIC * min(missing specifics, MAX_MISSING)
                  + MISSING_WORD * min(missing words, MAX_MISSING_WORDS)

- ``lexical``: the share of the claim's content words found in the evidence (stem-aware);
- ``semantic``: the best MiniLM cosine between the claim and an evidence unit: the
  ``CANDIDATES`` sentence units (a sentence, or two adjacent ones) and the ``CLAUSE_CANDIDATES``
  clause units (one to three clauses of a sentence) sharing most content words with it; 1.0
  when the claim is a verbatim span of the evidence;
- ``missing specifics``: numbers, dates, names and quotations of the claim absent from the evidence;
- ``missing words``: how many of the claim's content words the evidence lacks (the count, where
  ``lexical`` is the share: what a hallucination adds grows the count, while a long claim
  dilutes the share).

The answer's score is ``sigmoid(min over claims of the claim logit + PERSONAL * personal)``:
the weakest claim decides (one unsupported claim is enough), and ``personal`` is 1 when a
sentence of the answer talks about the speaker or the listener ("I love dogs", "have you tried
it?"), which no evidence can support. The score is an estimate of P(supported).

How these numbers were fitted (``benchmarks/grounding_fit.py`` refits them and prints the
figures; ``--write`` rewrites the fitted block below; the block below was written by
``benchmarks/grounding_fit.py --cache FEATURES.json --seeds 0-9 --write``): on the three dev files
of ``../shared/data`` (HaluEval QA, BEGIN/WoW, WiCE), with a fixed seeded 20% of each file (seed
15; a HaluEval record's two answers together) kept out of all fitting and of the comparisons of
feature sets, as a held-out check (the first round's first look at the data, whole-file listings
of errors and of single features, did include it; the second round's choices read only the
other 80%). The claim features come from the verifier itself (its report), so what is fitted is
what runs. The fit is an L2-penalised (intercept free) logistic regression by Newton's method,
each answer represented by its weakest claim under the current weights and the model refitted
until those picks settle (a multiple-instance fit of "the weakest claim decides"); the files are
pooled, not weighted per file (weighting them equally changed no AUROC by more than 0.001).

``MAX_MISSING``, ``MAX_MISSING_WORDS`` and ``L2`` are what a nested cross-validation chose
(``grounding_fit.py --nested --seeds 0-9``: on each of 50 outer training parts, an inner 4-fold CV
over caps 1-3 and 0/2/3/4/6 and lambda 0.3/1/3 picked the missing-words cap 3 42 times, the
specifics cap 1 37 times, lambda 3 27 times); the outer folds of that procedure gave BEGIN +0.043
(min over seeds +0.038), HaluEval +0.034 (+0.030), WiCE +0.084 (+0.062) over the better baseline.
``CANDIDATES`` and ``CLAUSE_CANDIDATES`` are 1 for time: 2 + 2 gave the same cross-validated AUROC
within 0.003 on BEGIN and HaluEval (WiCE +0.008) at about 1.7 times the verification time of a
300-word answer with commas.

Figures of the fit that wrote the block below (AUROC; 5-fold CV on the 80%, mean over held-out
folds and over fold seeds 0-9, against the better of the two baselines of ``ora bench grounding``,
with the smallest delta over the seeds; then on the held-out 20%): BEGIN 0.942 vs 0.896 (+0.046,
min +0.039), held-out 0.989 vs 0.970; HaluEval 0.998 vs 0.963 (+0.035, min +0.033), held-out
0.989 vs 0.983; WiCE 0.842 vs 0.747 (+0.095, min +0.085), held-out 0.824 vs 0.675. The held-out
baselines leave little room: +0.03 over 0.983 is out of reach, over 0.970 needs a perfect ranking.
"""

from __future__ import annotations

# --- fitted: benchmarks/grounding_fit.py --write rewrites this block ---
INTERCEPT = -2.53
LEXICAL = 1.60
SEMANTIC = 2.78
MISSING_SPECIFIC = -1.70
MISSING_WORD = -0.48
PERSONAL = -1.54
# --- end of fitted block ---

#: Missing specifics counted at most this many times (one invented figure already says most).
MAX_MISSING = 1
#: Content words absent from the evidence counted at most this many times.
MAX_MISSING_WORDS = 3
#: Evidence units compared with each claim by similarity (the ones sharing most content words).
CANDIDATES = 1
#: Clause units (parts of a sentence, ``scoring.clause_units``) compared besides, chosen the same way.
CLAUSE_CANDIDATES = 1
#: The L2 penalty of the fit (not of the score): kept for the refit script.
L2 = 3.0

"""The grounding verifier against two trivial baselines under k-fold cross-validation.

    .venv/bin/python benchmarks/grounding.py [--data DIR] [--folds K] [--seed N] [--json PATH]
        [--verifier NAME] [--limit N] [--no-timing]

The same as ``ora bench grounding`` (the evaluation lives in ``ora_core/cli/bench_grounding.py``,
where its method is documented): for every ``*.jsonl`` of DIR (default ``../shared/data``), the
AUROC and accuracy of the verifier's score, of content-word overlap and of answer length, each
under stratified k-fold CV (thresholds chosen on the training folds), the verifier's delta over
the better baseline against +0.03, and the verification time (per answer, and for a 300-word
answer over 6 chunks against 0.5 s). ``benchmarks/grounding_fit.py`` refits the verifier's
constants and reports their cross-validated and held-out figures.
"""

from __future__ import annotations

import sys

from ora_core.cli.app import main

if __name__ == "__main__":
    main(["bench", "grounding", *sys.argv[1:]])

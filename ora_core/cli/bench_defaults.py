"""The defaults of ``ora bench grounding``, shared by its light command (``cli.bench``) and its
work (``cli.bench_grounding``) so that neither imports the other at module level."""

from __future__ import annotations

from pathlib import Path

#: The labelled dev data beside the repository (``../shared/data``).
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEFAULT_FOLDS = 5
DEFAULT_SEED = 0

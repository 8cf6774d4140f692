"""Calibration (seed 002): mirrored claim pairs through the fact-check debate, measured for skew.

- ``fixture``: the pairs and their evidence notes (the bundled, versioned fixture), selection.
- ``profiles`` / ``instrument``: the role -> backend maps a run uses; the planted-bias instrument.
- ``ingest``: the notes into the run's own Chroma store, through ``ora vault add``.
- ``runner``: the run (concurrency, token and cost caps, checkpoints, resume).
- ``sides``: one side's turn read into a result, or its failure diagnosed.
- ``metrics`` / ``gates``: the formulas and the gates (pure functions).
- ``compare``: the A/B decision sheet and seed 002 D4's promotion gates.
- ``models`` / ``report``: the report's shapes and its writers (a renderer per format).
"""

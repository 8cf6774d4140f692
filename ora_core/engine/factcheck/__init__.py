"""The fact-check debate (gear 5): seed 002's claim verification with its knowledge-diversity controls.

- ``gear``: the turn (claims -> per claim: research, sufficiency gate, directions, balance,
  partition, contrarian pass, debate, validation, verdict -> article), ``run_gear5``.
- ``evidence``: the evidence pool and the deterministic D5 controls.
- ``scoring``: verdict bands, the spread factor, the revert rule, the article value.
- ``replies``: reading the roles' replies.
- ``prompts``: the roles' steps.
"""

from __future__ import annotations

from ora_core.engine.factcheck.gear import run_gear5

__all__ = ["run_gear5"]

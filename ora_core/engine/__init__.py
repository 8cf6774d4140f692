"""The pipeline engine: one turn from raw prompt to result, every boundary traced."""

from ora_core.engine.runner import run_turn
from ora_core.engine.runtime import Runtime

__all__ = ["Runtime", "run_turn"]

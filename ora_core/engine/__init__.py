"""The pipeline engine: one turn from raw prompt to result, every boundary traced."""

from ora_core.engine.runner import Runtime, run_turn

__all__ = ["Runtime", "run_turn"]

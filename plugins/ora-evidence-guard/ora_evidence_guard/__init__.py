"""Ora plugin: retrieved text is data, never instructions (issue 13, item 3).

Three detectors:

- ``instruction-in-chunk`` (layer ``context_package``, kind ``instruction``): instruction-like
  passages in a retrieved chunk: imperatives to the model, role markers, verdict tokens,
  protocol blocks, fence forgeries, hidden text (``rules`` says what counts and where the line
  is). The engine runs it on every chunk at context assembly and on every supplement result,
  names each flagged chunk as a contingency with its source (``context-instruction-in-chunk``,
  ``<step>-supplement-instruction-in-chunk``) and marks it
  (``provenance.extra["instruction_like"]``); the chunk stays in the package.
- ``planted-instruction-echo`` (``model_output``, ``unhealthy``, strong): the output repeats such
  a passage word for word or nearly; the step is regenerated once, then degraded.
- ``planted-instruction-verdict`` (``verifier_output``, ``broken``, strong): a verifier that repeats
  a planted imperative in its own voice and does not fail the subject is BROKEN, never PASS.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {
    "InstructionInChunkDetector": "detectors", "PlantedEchoDetector": "detectors",
    "PlantedVerdictDetector": "detectors", "MARK_KEY": "echo", "Planted": "echo", "planted_in": "echo",
    "repeated": "echo", "Finding": "rules", "scan": "rules"})

__all__ = ["MARK_KEY", "Finding", "InstructionInChunkDetector", "Planted", "PlantedEchoDetector",
           "PlantedVerdictDetector", "planted_in", "repeated", "scan"]


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    from .detectors import InstructionInChunkDetector, PlantedEchoDetector, PlantedVerdictDetector

    for detector in (InstructionInChunkDetector(), PlantedEchoDetector(), PlantedVerdictDetector()):
        register(detector)

"""Ora plugin: unhealthy-output detectors on the ``model_output`` layer.

``refusal``, ``clarification-loop``, ``brief-stub``, ``leaked-tool-call`` and ``prompt-echo`` (the
output parrots the orchestrator's own instructions): a strong signal from any of them means the
reliability layer regenerates the step once.
Settings live in ``[plugins.health-detectors]`` (``min_words``, ``clarification_body_words``;
declared as ``ora_health_detectors.options.HealthDetectorsOptions``);
a step sets ``ctx.data["expected_min_words"]`` to say how long its output should be.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {
    "BriefStubDetector": "detectors", "ClarificationLoopDetector": "detectors", "LeakedToolCallDetector": "detectors",
    "RefusalDetector": "detectors", "PromptEchoDetector": "echo"})

__all__ = ["BriefStubDetector", "ClarificationLoopDetector", "LeakedToolCallDetector", "PromptEchoDetector",
           "RefusalDetector"]


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    from .detectors import BriefStubDetector, ClarificationLoopDetector, LeakedToolCallDetector, RefusalDetector
    from .echo import PromptEchoDetector

    for detector in (RefusalDetector(), ClarificationLoopDetector(), BriefStubDetector(),
                     LeakedToolCallDetector(), PromptEchoDetector()):
        register(detector)


@hookimpl
def ora_register_options(register: Callable[..., None]) -> None:
    from .options import TABLE, HealthDetectorsOptions

    register(HealthDetectorsOptions, table=TABLE)

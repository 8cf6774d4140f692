"""Ora plugin: the verdict parser, the BROKEN verdict detector (seed 000, failure #9) and the
``model`` verifier.

A verifier whose backend raised, whose browser session expired, who hit a rate limit or who
answered with garbage has not verified anything: its output is BROKEN, never PASS.

- ``parse_verdict(raw, quoted=...) -> ParsedVerdict`` — the pure function the kernel calls on
  every verifier output (``ParsedVerdict.to_verdict(name, raw)`` gives the kernel's ``Verdict``):
  the strict grammar (a verdict line is a whole line; a PASS is unanimous, so a failure signal in
  the verifier's own text turns it into a FAIL; quoted material never counts), in ``verdict``.
- ``FailureSignal`` — one line of the verifier's own text that names a failure (``failure_signals``).
- ``VERDICT_CONTRACT`` — the instruction to give verifier models (the grammar, told exactly).
- ``BrokenVerdictDetector`` — the same parse as a Detector on the ``verifier_output`` layer,
  registered as ``broken-verdict``: a strong ``broken`` signal for a BROKEN output, a ``verdict``
  signal (PASS/FAIL and the findings) otherwise. The engine reads every verifier's raw text
  through it.
- ``ModelVerifier`` — the verifier registered as ``model``: an LLM through the verifier role.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {
    "QUOTED_KEY": "detector", "BrokenVerdictDetector": "detector", "FailureSignal": "failure_signals",
    "ModelVerifier": "model_verifier", "VERDICT_CONTRACT": "verdict", "VERDICT_SCHEMA": "verdict",
    "StructuredVerdict": "verdict", "ParsedVerdict": "verdict",
    "parse_verdict": "verdict", "verdict_from_output": "verdict"})

__all__ = [
    "QUOTED_KEY",
    "VERDICT_CONTRACT",
    "VERDICT_SCHEMA",
    "BrokenVerdictDetector",
    "FailureSignal",
    "ModelVerifier",
    "ParsedVerdict",
    "StructuredVerdict",
    "parse_verdict",
    "verdict_from_output",
]


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    from .detector import BrokenVerdictDetector

    register(BrokenVerdictDetector())


@hookimpl
def ora_register_verifiers(register: Callable[..., None]) -> None:
    from .model_verifier import ModelVerifier

    register(ModelVerifier())

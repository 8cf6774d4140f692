"""Ora plugin: the BROKEN verdict detector (seed 000, failure #9).

A verifier whose backend raised, whose browser session expired, who hit a rate limit or who
answered with garbage has not verified anything: its output is BROKEN, never PASS.

- ``parse_verdict(raw, quoted=...) -> ParsedVerdict`` — the pure function the kernel calls on
  every verifier output (``ParsedVerdict.to_verdict(name, raw)`` gives the kernel's ``Verdict``).
- ``VERDICT_CONTRACT`` — the instruction to give verifier models (the verdict-line contract).
- ``BrokenVerdictDetector`` — the same parse as a Detector on the ``verifier_output`` layer,
  registered as ``broken-verdict``.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl

from .detector import QUOTED_KEY, BrokenVerdictDetector
from .verdict import VERDICT_CONTRACT, ParsedVerdict, parse_verdict, verdict_from_output

__all__ = [
    "QUOTED_KEY",
    "VERDICT_CONTRACT",
    "BrokenVerdictDetector",
    "ParsedVerdict",
    "parse_verdict",
    "verdict_from_output",
]


@hookimpl
def ora_register_detectors(register: Callable[..., None]) -> None:
    register(BrokenVerdictDetector())

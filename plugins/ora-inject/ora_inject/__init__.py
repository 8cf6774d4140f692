"""Ora plugin: fault injection (``ora run --inject MODE``), one failure path per mode.

Each mode drives one path end to end (the ``description`` of each injector says which):

- ``lowconf``: the primary analyst's first attempt reports ``CONFIDENCE: 0.60`` -> confidence
  routing retries, the retry recovers.
- ``hallucination``: its first attempt quotes a fabricated source -> the judge catches it, the
  retry recovers.
- ``persistent``: every attempt quotes it -> retries run out, the turn halts with the diagnostic.
- ``coverage``: the context package silently loses a stream -> the deterministic coverage
  assertion halts at once (no retry).
- ``verifier-exception``: every verifier raises -> BROKEN, recorded by name, never PASS.
- ``verifier-garbage``: every verifier answers garbage -> BROKEN, never PASS.
- ``backend-timeout``: the primary analyst's backend times out -> its stream degrades (gear 4
  continues on the other stream; gear 2 has nothing left and halts).
- ``rate-limit``: the consolidator (gear 4; otherwise the primary analyst) is rate limited ->
  consolidation degrades, the longer stream ships under ``[degraded — consolidation failed]``.
- ``rag-down``: every retrieval raises -> empty context and one ``rag-failures.jsonl`` record
  per stream; supplements cannot resolve.
"""

from __future__ import annotations

from collections.abc import Callable

from ora_core import hookimpl
from ora_core.api import lazy_exports

# Imported on first use (``ora --help`` loads this plugin without its components).
__getattr__ = lazy_exports(__name__, {"INJECTORS": "modes"})

__all__ = ["INJECTORS"]


@hookimpl
def ora_register_fault_injectors(register: Callable[..., None]) -> None:
    from .modes import INJECTORS

    for injector in INJECTORS:
        register(injector)

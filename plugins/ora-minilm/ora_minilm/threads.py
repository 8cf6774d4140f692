"""How many threads numpy's BLAS (OpenBLAS) uses for the encoder's matrix products.

Measured on the 2-core machine this was written on, shared with a local LLM: two OpenBLAS
threads made a 45-text encode take 0.8-2.8 s (a descheduled thread stalls its partner, and
idle threads spin after each product, taking CPU from the LLM), one thread a steady 0.7 s.
So the default is one thread; ``ORA_MINILM_THREADS=N`` asks for N, ``ORA_MINILM_THREADS=auto``
leaves OpenBLAS's own choice (one thread per core).

numpy has no API for this; ``threadpoolctl`` sets it on the BLAS library numpy loaded. It is
process-wide (numpy has one BLAS). When no BLAS library is found the encoder still works, on
the library's default threads, and says so: a ``RuntimeWarning`` and ``BlasThreads.applied =
False`` with the reason.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

from .errors import MiniLMError

ENV = "ORA_MINILM_THREADS"
DEFAULT = 1


@dataclass(frozen=True)
class BlasThreads:
    """What was asked for and what happened: ``requested`` None means "leave the default"."""

    requested: int | None
    applied: bool
    threads: int | None  # what OpenBLAS reports afterwards, when it can be asked
    detail: str


def requested_threads(value: str | None = None) -> int | None:
    """The thread count from ``ORA_MINILM_THREADS`` (or ``value``): None for ``auto``."""
    raw = os.environ.get(ENV) if value is None else value
    if raw is None or raw.strip() == "":
        return DEFAULT
    if raw.strip().lower() == "auto":
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise MiniLMError(f"environment variable {ENV}", f"expected a positive integer or 'auto', found {raw!r}")
    return n


def blas_libraries() -> Any:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


def set_blas_threads(requested: int | None) -> BlasThreads:
    """Apply ``requested`` to every BLAS library numpy loaded; warn when that is impossible."""
    import numpy  # noqa: F401 - loads numpy's BLAS, so threadpoolctl can find it

    if requested is None:
        return BlasThreads(None, True, None, f"{ENV}=auto: the BLAS library chooses")
    libraries = blas_libraries()
    if not libraries.lib_controllers:
        detail = "no BLAS library is loaded that threadpoolctl can control"
        warnings.warn(f"ora_minilm: cannot set numpy's BLAS threads to {requested} ({ENV}): {detail}; "
                      "the encoder runs with the BLAS library's default", RuntimeWarning, stacklevel=2)
        return BlasThreads(requested, False, None, detail)
    libraries.limit(limits=requested)  # stays in force: a process-wide setting, never restored
    counts = {c.num_threads for c in blas_libraries().lib_controllers}
    names = ", ".join(sorted({c.internal_api for c in libraries.lib_controllers}))
    return BlasThreads(requested, True, max(counts) if counts else None, f"{names}: {requested} thread(s)")

"""How many threads numpy's BLAS (OpenBLAS) uses for the encoder's matrix products.

Measured on the 2-core machine this was written on, shared with a local LLM: two OpenBLAS
threads made a 45-text encode take 0.8-2.8 s (a descheduled thread stalls its partner, and
idle threads spin after each product, taking CPU from the LLM), one thread a steady 0.7 s.
So the default is one thread; ``ORA_MINILM_THREADS=N`` asks for N, ``ORA_MINILM_THREADS=auto``
leaves OpenBLAS's own choice (one thread per core).

numpy has no API for this, so the setting goes to the OpenBLAS library numpy loaded, found in
``/proc/self/maps`` and called through ctypes. It is process-wide (numpy has one BLAS). When
no such library or function is found the encoder still works, on OpenBLAS's default threads,
and says so: a ``RuntimeWarning`` and ``BlasThreads.applied = False`` with the reason.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import MiniLMError

ENV = "ORA_MINILM_THREADS"
DEFAULT = 1
SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
           "openblas_set_num_threads")
GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
           "openblas_get_num_threads")


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


def loaded_openblas() -> list[Path]:
    """Paths of the OpenBLAS libraries mapped into this process (numpy's, once it is imported)."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: dict[str, None] = {}
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "openblas" in Path(parts[5]).name.lower():
            found[parts[5]] = None
    return [Path(p) for p in found]


def set_blas_threads(requested: int | None) -> BlasThreads:
    """Apply ``requested`` to every OpenBLAS library numpy loaded; warn when that is impossible."""
    import numpy  # noqa: F401 - loads numpy's OpenBLAS, so it appears in the process's maps

    if requested is None:
        return BlasThreads(None, True, None, f"{ENV}=auto: OpenBLAS chooses")
    libraries = loaded_openblas()
    problems: list[str] = []
    for path in libraries:
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            problems.append(f"{path}: {exc}")
            continue
        setter = next((getattr(lib, name) for name in SETTERS if hasattr(lib, name)), None)
        if setter is None:
            problems.append(f"{path}: none of {SETTERS}")
            continue
        setter.argtypes, setter.restype = [ctypes.c_int], None
        setter(requested)
        getter = next((getattr(lib, name) for name in GETTERS if hasattr(lib, name)), None)
        threads = None
        if getter is not None:
            getter.argtypes, getter.restype = [], ctypes.c_int
            threads = int(getter())
        return BlasThreads(requested, True, threads, f"{path.name}: {requested} thread(s)")
    detail = ("no OpenBLAS library is loaded (numpy uses another BLAS)" if not libraries
              else "; ".join(problems))
    warnings.warn(f"ora_minilm: cannot set numpy's BLAS threads to {requested} ({ENV}): {detail}; "
                  "the encoder runs with the BLAS library's default", RuntimeWarning, stacklevel=2)
    return BlasThreads(requested, False, None, detail)

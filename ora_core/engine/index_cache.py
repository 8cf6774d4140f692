"""The router's example vectors, kept on disk between processes.

Pre-routing compares the prompt with every mode's examples: hundreds of texts to embed, ~1.8 s of
CPU with MiniLM on two cores, which a one-shot ``ora run`` paid on every turn (and, with Phase A
skipped, waited for). The vectors depend only on the embedder and the texts, so they are written
once to ``<user cache dir>/routing-index/<key>.f64`` (the rows, float64, exactly what was computed)
with a ``<key>.json`` beside it (key, count, dimension), and read back by later processes.

The key hashes the in-process index key (embedder name, dimension, every mode's examples and
description) with the embedder's ``fingerprint`` (what its vectors depend on, e.g. its model files'
sizes and times): an embedder without a fingerprint is never cached, since nothing would tell a
changed model from the cached one. A cache that cannot be read or written is rebuilt or skipped,
and the routing audit says which (``RoutingAudit.example_index``); the turn never depends on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from array import array
from pathlib import Path
from typing import Any

FORMAT = 1
DIR_NAME = "routing-index"


def cache_dir() -> Path:
    """``<user cache dir>/routing-index`` (on Linux ``$XDG_CACHE_HOME/ora``, else ``~/.cache/ora``)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("ora", appauthor=False)) / DIR_NAME


def disk_key(index_key: str, embedder: Any) -> tuple[str | None, str]:
    """The cache key for ``index_key`` and ``embedder``, or None and why there is none."""
    try:
        fingerprint = getattr(embedder, "fingerprint", None)
    except OSError as exc:  # a model file that cannot be stat'ed: no key, and the index is built
        return None, f"the embedder's fingerprint cannot be read ({type(exc).__name__}: {exc})"
    if not isinstance(fingerprint, str) or not fingerprint:
        return None, f"embedder {getattr(embedder, 'name', '?')!r} declares no fingerprint"
    return hashlib.sha256(f"{FORMAT}\0{index_key}\0{fingerprint}".encode()).hexdigest()[:32], ""


def load(key: str, count: int, dimension: int | None) -> tuple[list[list[float]] | None, str]:
    """The rows cached under ``key`` (``count`` of them), or None and why (absent: "")."""
    base = cache_dir() / key
    meta_path, data_path = base.with_suffix(".json"), base.with_suffix(".f64")
    if not meta_path.exists():
        return None, ""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        width = int(meta["dimension"])
        if meta.get("key") != key or int(meta["count"]) != count or (dimension is not None and width != dimension):
            return None, f"{meta_path} does not match this index (count or dimension differ)"
        values = array("d")
        with data_path.open("rb") as handle:
            values.fromfile(handle, count * width)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return None, f"{data_path} cannot be read ({type(exc).__name__}: {exc})"
    return [values[i * width:(i + 1) * width].tolist() for i in range(count)], ""


_WRITE_LOCK = threading.Lock()


def store(key: str, rows: list[list[float]]) -> str:
    """Write ``rows`` under ``key`` (the data, then its meta file, each renamed into place); "" or
    what went wrong."""
    if not rows:
        return ""
    directory = cache_dir()
    base = directory / key
    tag = f".{os.getpid()}.{threading.get_ident()}.tmp"
    data_tmp = base.with_name(base.name + ".f64" + tag)
    meta_tmp = base.with_name(base.name + ".json" + tag)
    try:
        with _WRITE_LOCK:
            directory.mkdir(parents=True, exist_ok=True)
            values = array("d", (x for row in rows for x in row))
            with data_tmp.open("wb") as handle:
                values.tofile(handle)
            os.replace(data_tmp, base.with_suffix(".f64"))
            meta_tmp.write_text(json.dumps({"key": key, "count": len(rows), "dimension": len(rows[0]),
                                            "format": FORMAT}), encoding="utf-8")
            os.replace(meta_tmp, base.with_suffix(".json"))
    except OSError as exc:
        for leftover in (data_tmp, meta_tmp):
            try:
                leftover.unlink(missing_ok=True)
            except OSError as cleanup:
                exc.add_note(f"and {leftover} could not be removed: {cleanup}")
        return f"cannot write {base}.f64 ({type(exc).__name__}: {exc})"
    return ""

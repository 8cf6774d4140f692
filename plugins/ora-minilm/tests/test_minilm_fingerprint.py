"""The ``minilm`` embedder's fingerprint: what its vectors depend on, read without loading the model
(the router keys its cache of example vectors on it, ``ora_core/engine/index_cache.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ora_minilm.encoder import default_model_dir
from ora_minilm.plugin import MiniLMEmbedder

FILES = ("model.safetensors", "tokenizer.json", "config.json", "modules.json")


def test_the_fingerprint_is_stable_and_changes_with_any_model_file(tmp_path: Path) -> None:
    source = default_model_dir()
    copy = tmp_path / "model"
    copy.mkdir()
    for name in FILES:  # the weights linked, the small files copied
        if name == "model.safetensors":
            (copy / name).symlink_to(source / name)
        else:
            shutil.copy2(source / name, copy / name)
    embedder = MiniLMEmbedder(copy)
    first = embedder.fingerprint
    assert first == MiniLMEmbedder(copy).fingerprint and str(copy.resolve()) in first
    assert first != MiniLMEmbedder().fingerprint  # another directory
    stat = (copy / "config.json").stat()
    os.utime(copy / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert embedder.fingerprint != first

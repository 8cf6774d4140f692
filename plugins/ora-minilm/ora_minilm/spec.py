"""What the model directory says about the network, read from its own files (stdlib only).

A sentence-transformers directory for a BERT encoder holds:

- ``config.json``: the BERT architecture (layers, heads, sizes, LayerNorm epsilon, activation);
- ``sentence_bert_config.json``: ``max_seq_length`` (tokens kept per text) and ``do_lower_case``;
- ``modules.json``: the pipeline, here Transformer -> Pooling [-> Normalize];
- ``<pooling path>/config.json``: which pooling (this encoder implements mean over the mask);
- ``tokenizer.json`` and ``model.safetensors``: read by :mod:`ora_minilm.encoder` and
  :mod:`ora_minilm.weights`.

Anything missing or different from what this encoder implements is a :class:`MiniLMError`
naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MiniLMError

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class ModelSpec:
    """The numbers the forward pass needs, each read from the model directory."""

    model_dir: Path
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    max_position_embeddings: int
    type_vocab_size: int
    pad_token_id: int
    max_seq_length: int
    do_lower_case: bool
    normalize: bool

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def weights_file(self) -> Path:
        return self.model_dir / "model.safetensors"

    @property
    def tokenizer_file(self) -> Path:
        return self.model_dir / "tokenizer.json"


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise MiniLMError(path, "file is missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MiniLMError(path, f"cannot be read as JSON: {type(exc).__name__}: {exc}") from exc


def _object(path: Path, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MiniLMError(path, f"expected a JSON object, found {type(data).__name__}")
    return data


def _field(path: Path, data: dict[str, Any], name: str, kind: type, *, default: Any = None) -> Any:
    """``data[name]`` checked to be of ``kind`` (bool is not accepted as an int)."""
    if name not in data:
        if default is not None:
            return default
        raise MiniLMError(path, "is missing", field=name)
    value = data[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MiniLMError(path, f"expected {kind.__name__}, found {value!r}", field=name)
    return value


def _positive(path: Path, data: dict[str, Any], name: str) -> int:
    value = _field(path, data, name, int)
    if value <= 0:
        raise MiniLMError(path, f"must be a positive integer, found {value}", field=name)
    return value


def _expect(path: Path, data: dict[str, Any], name: str, allowed: set[Any], *, default: Any = None) -> None:
    value = data.get(name, default)
    if value not in allowed:
        raise MiniLMError(path, f"this encoder implements {sorted(map(str, allowed))}, found {value!r}", field=name)


def _read_architecture(path: Path) -> dict[str, Any]:
    config = _object(path, read_json(path))
    _expect(path, config, "model_type", {"bert"})
    # "gelu" is the exact (erf) GELU in transformers' naming; the tanh forms are other names.
    _expect(path, config, "hidden_act", {"gelu"})
    _expect(path, config, "position_embedding_type", {"absolute"}, default="absolute")
    arch = {name: _positive(path, config, name) for name in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "max_position_embeddings", "type_vocab_size")}
    if arch["hidden_size"] % arch["num_attention_heads"]:
        raise MiniLMError(path, f"hidden_size {arch['hidden_size']} is not a multiple of "
                                f"num_attention_heads {arch['num_attention_heads']}", field="num_attention_heads")
    eps = _field(path, config, "layer_norm_eps", float)
    if not 0 < eps < 1:
        raise MiniLMError(path, f"must be in (0, 1), found {eps}", field="layer_norm_eps")
    arch["layer_norm_eps"] = eps
    arch["pad_token_id"] = _field(path, config, "pad_token_id", int, default=0)
    return arch


def _read_modules(path: Path) -> tuple[str, bool]:
    """The pooling directory and whether vectors are L2-normalised, from ``modules.json``."""
    modules = read_json(path)
    if not isinstance(modules, list) or not modules:
        raise MiniLMError(path, "expected a non-empty JSON list of modules")
    types: list[str] = []
    paths: list[str] = []
    for i, module in enumerate(modules):
        entry = _object(path, module)
        kind, where = entry.get("type"), entry.get("path", "")
        if not isinstance(kind, str) or not kind:
            raise MiniLMError(path, f"expected a module type name, found {kind!r}", field=f"[{i}].type")
        if not isinstance(where, str):
            raise MiniLMError(path, f"expected a directory name, found {where!r}", field=f"[{i}].path")
        types.append(kind)
        paths.append(where)
    expected = [TRANSFORMER, POOLING]
    if types[:2] != expected or types[2:] not in ([], [NORMALIZE]):
        raise MiniLMError(path, f"this encoder implements the modules {expected} optionally followed by "
                                f"{NORMALIZE!r}; found {types}", field="type")
    if paths[0]:
        raise MiniLMError(path, f"the Transformer module must sit in the model directory itself, "
                                f"found path {paths[0]!r}", field="[0].path")
    return paths[1], len(types) == 3


def _check_pooling(path: Path, hidden_size: int) -> None:
    config = _object(path, read_json(path))
    if not _field(path, config, "pooling_mode_mean_tokens", bool):
        raise MiniLMError(path, "this encoder implements mean pooling only; it is false",
                          field="pooling_mode_mean_tokens")
    for name, value in config.items():
        if name.startswith("pooling_mode_") and name != "pooling_mode_mean_tokens" and value:
            raise MiniLMError(path, f"this encoder implements mean pooling only; found {value!r}", field=name)
    dims = _field(path, config, "word_embedding_dimension", int)
    if dims != hidden_size:
        raise MiniLMError(path, f"{dims} differs from config.json's hidden_size {hidden_size}",
                          field="word_embedding_dimension")


def read_spec(model_dir: str | Path) -> ModelSpec:
    """Read and check the model directory's configuration files."""
    root = Path(model_dir)
    if not root.is_dir():
        raise MiniLMError(root, "the model directory does not exist")
    arch = _read_architecture(root / "config.json")
    st_path = root / "sentence_bert_config.json"
    st_config = _object(st_path, read_json(st_path))
    max_seq_length = _positive(st_path, st_config, "max_seq_length")
    if max_seq_length > arch["max_position_embeddings"]:
        raise MiniLMError(st_path, f"{max_seq_length} exceeds config.json's max_position_embeddings "
                                   f"{arch['max_position_embeddings']}", field="max_seq_length")
    do_lower_case = _field(st_path, st_config, "do_lower_case", bool) if "do_lower_case" in st_config else False
    pooling_dir, normalize = _read_modules(root / "modules.json")
    _check_pooling(root / pooling_dir / "config.json", arch["hidden_size"])
    return ModelSpec(
        model_dir=root,
        vocab_size=arch["vocab_size"],
        hidden_size=arch["hidden_size"],
        num_layers=arch["num_hidden_layers"],
        num_heads=arch["num_attention_heads"],
        intermediate_size=arch["intermediate_size"],
        layer_norm_eps=arch["layer_norm_eps"],
        max_position_embeddings=arch["max_position_embeddings"],
        type_vocab_size=arch["type_vocab_size"],
        pad_token_id=arch["pad_token_id"],
        max_seq_length=max_seq_length,
        do_lower_case=do_lower_case,
        normalize=normalize,
    )

"""The BERT weights from ``model.safetensors``, checked against ``config.json`` and laid out
for the forward pass (float32, dense matrices transposed to ``(in, out)``, q/k/v fused)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import MiniLMError
from .spec import ModelSpec

PREFIXES = ("", "bert.", "model.")  # how BertModel / BertFor* checkpoints name the encoder's tensors


@dataclass(frozen=True)
class LayerWeights:
    qkv_w: Any  # (hidden, 3 * hidden): query | key | value
    qkv_b: Any
    attn_out_w: Any  # (hidden, hidden)
    attn_out_b: Any
    attn_ln_g: Any
    attn_ln_b: Any
    inter_w: Any  # (hidden, intermediate)
    inter_b: Any
    out_w: Any  # (intermediate, hidden)
    out_b: Any
    out_ln_g: Any
    out_ln_b: Any


@dataclass(frozen=True)
class BertWeights:
    word: Any  # (vocab, hidden)
    position: Any  # (max_positions, hidden)
    token_type: Any  # (type_vocab, hidden)
    emb_ln_g: Any
    emb_ln_b: Any
    layers: tuple[LayerWeights, ...]


def _read_tensors(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise MiniLMError(path, "file is missing")
    try:
        from safetensors.numpy import load_file

        return load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own and OS errors; re-raised typed
        raise MiniLMError(path, f"cannot be read as safetensors: {type(exc).__name__}: {exc}") from exc


def _prefix(path: Path, tensors: dict[str, Any]) -> str:
    for prefix in PREFIXES:
        if f"{prefix}embeddings.word_embeddings.weight" in tensors:
            return prefix
    raise MiniLMError(path, "no BERT embedding table found (looked for "
                            f"{[p + 'embeddings.word_embeddings.weight' for p in PREFIXES]})",
                      field="embeddings.word_embeddings.weight")


def load_weights(spec: ModelSpec) -> BertWeights:
    """Read every tensor the encoder uses, check its shape, convert to float32."""
    import numpy as np

    path = spec.weights_file
    tensors = _read_tensors(path)
    prefix = _prefix(path, tensors)
    h, inter = spec.hidden_size, spec.intermediate_size

    def get(name: str, shape: tuple[int, ...]) -> Any:
        key = prefix + name
        if key not in tensors:
            raise MiniLMError(path, "tensor is missing", field=key)
        value = tensors[key]
        if value.dtype.kind != "f":
            raise MiniLMError(path, f"expected a floating-point tensor, found {value.dtype}", field=key)
        if tuple(value.shape) != shape:
            raise MiniLMError(path, f"expected shape {shape} (from config.json), found {tuple(value.shape)}",
                              field=key)
        return np.ascontiguousarray(value, dtype=np.float32)

    def dense(name: str, n_in: int, n_out: int) -> tuple[Any, Any]:
        # stored as torch's Linear: weight (out, in); the forward pass multiplies x (tokens, in) by (in, out)
        return np.ascontiguousarray(get(f"{name}.weight", (n_out, n_in)).T), get(f"{name}.bias", (n_out,))

    scale = np.float32(1.0 / math.sqrt(spec.head_size))
    layers = []
    for i in range(spec.num_layers):
        base = f"encoder.layer.{i}."
        q_w, q_b = dense(base + "attention.self.query", h, h)
        # the attention's 1/sqrt(head size) is applied to the query projection once, here,
        # instead of to every (length x length) score matrix of every batch
        q_w *= scale
        q_b = q_b * scale
        k_w, k_b = dense(base + "attention.self.key", h, h)
        v_w, v_b = dense(base + "attention.self.value", h, h)
        o_w, o_b = dense(base + "attention.output.dense", h, h)
        i_w, i_b = dense(base + "intermediate.dense", h, inter)
        f_w, f_b = dense(base + "output.dense", inter, h)
        layers.append(LayerWeights(
            qkv_w=np.ascontiguousarray(np.concatenate([q_w, k_w, v_w], axis=1)),
            qkv_b=np.concatenate([q_b, k_b, v_b]),
            attn_out_w=o_w, attn_out_b=o_b,
            attn_ln_g=get(base + "attention.output.LayerNorm.weight", (h,)),
            attn_ln_b=get(base + "attention.output.LayerNorm.bias", (h,)),
            inter_w=i_w, inter_b=i_b, out_w=f_w, out_b=f_b,
            out_ln_g=get(base + "output.LayerNorm.weight", (h,)),
            out_ln_b=get(base + "output.LayerNorm.bias", (h,)),
        ))
    extra = f"{prefix}encoder.layer.{spec.num_layers}.attention.self.query.weight"
    if extra in tensors:
        raise MiniLMError(path, f"holds more layers than config.json's num_hidden_layers {spec.num_layers}",
                          field=extra)
    return BertWeights(
        word=get("embeddings.word_embeddings.weight", (spec.vocab_size, h)),
        position=get("embeddings.position_embeddings.weight", (spec.max_position_embeddings, h)),
        token_type=get("embeddings.token_type_embeddings.weight", (spec.type_vocab_size, h)),
        emb_ln_g=get("embeddings.LayerNorm.weight", (h,)),
        emb_ln_b=get("embeddings.LayerNorm.bias", (h,)),
        layers=tuple(layers),
    )

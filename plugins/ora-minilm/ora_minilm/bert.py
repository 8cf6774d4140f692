"""The BERT encoder's forward pass in numpy, float32 throughout.

Embeddings (word + position + token type) and LayerNorm; then per layer: multi-head
self-attention (fused q/k/v projection, scaled dot product, padding masked out, softmax),
output projection + residual + LayerNorm, intermediate projection + exact GELU, output
projection + residual + LayerNorm. Dropout is absent (inference). Activations are kept as
``(tokens, hidden)`` matrices so every projection is one matrix product.
"""

from __future__ import annotations

from typing import Any

from .gelu import gelu_
from .spec import ModelSpec
from .weights import BertWeights, LayerWeights

ATTENTION_BYTES = 16 << 20  # attention scores are computed for as many texts at a time as fit in this


def layer_norm_(x: Any, gamma: Any, beta: Any, eps: float) -> Any:
    """LayerNorm over the last axis, in place on ``x`` (biased variance, as torch)."""
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= np.float32(1.0 / x.shape[-1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


def embed_tokens(spec: ModelSpec, w: BertWeights, ids: Any, type_ids: Any) -> Any:
    """``(batch, length)`` token ids -> ``(batch * length, hidden)`` normalised embeddings."""
    batch, length = ids.shape
    x = w.word[ids]
    x += w.position[:length][None, :, :]
    x += w.token_type[type_ids]
    x = x.reshape(batch * length, spec.hidden_size)
    return layer_norm_(x, w.emb_ln_g, w.emb_ln_b, spec.layer_norm_eps)


def attention(spec: ModelSpec, layer: LayerWeights, x: Any, mask_bias: Any | None, batch: int, length: int) -> Any:
    """Multi-head self-attention over ``x`` (tokens, hidden); returns the context (tokens, hidden)."""
    import numpy as np

    heads, size, hidden = spec.num_heads, spec.head_size, spec.hidden_size
    qkv = x @ layer.qkv_w
    qkv += layer.qkv_b
    # (batch, length, 3, heads, size) -> three (batch, heads, length, size) views, no copy: each
    # (length, size) matrix has unit column stride, so numpy still hands the products to BLAS
    qkv = qkv.reshape(batch, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]  # q arrives scaled by 1/sqrt(size): see weights.load_weights
    context = np.empty((batch, length, heads, size), dtype=np.float32)
    per_text = heads * length * length * 4
    step = max(1, ATTENTION_BYTES // per_text)
    for start in range(0, batch, step):
        sl = slice(start, start + step)
        scores = q[sl] @ k[sl].transpose(0, 1, 3, 2)  # (texts, heads, length, length)
        if mask_bias is not None:
            scores += mask_bias[sl]
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores *= np.reciprocal(scores.sum(axis=-1, keepdims=True))
        context[sl] = (scores @ v[sl]).transpose(0, 2, 1, 3)
    return context.reshape(batch * length, hidden)


def encoder_layer(spec: ModelSpec, layer: LayerWeights, x: Any, mask_bias: Any, batch: int, length: int) -> Any:
    eps = spec.layer_norm_eps
    attended = attention(spec, layer, x, mask_bias, batch, length) @ layer.attn_out_w
    attended += layer.attn_out_b
    attended += x
    x = layer_norm_(attended, layer.attn_ln_g, layer.attn_ln_b, eps)
    inner = x @ layer.inter_w
    inner += layer.inter_b
    gelu_(inner)
    out = inner @ layer.out_w
    out += layer.out_b
    out += x
    return layer_norm_(out, layer.out_ln_g, layer.out_ln_b, eps)


def forward(spec: ModelSpec, w: BertWeights, ids: Any, type_ids: Any, mask: Any) -> Any:
    """Token ids, token types and attention mask, each ``(batch, length)`` -> the last hidden
    states ``(batch, length, hidden)``. Padded positions carry values but are never attended to."""
    import numpy as np

    batch, length = ids.shape
    x = embed_tokens(spec, w, ids, type_ids)
    # an additive bias: 0 where a key may be attended to, the most negative float32 at padding
    # (none at all when the batch has no padding)
    mask_bias = None
    if not mask.all():
        mask_bias = ((1.0 - mask.astype(np.float32)) * np.finfo(np.float32).min)[:, None, None, :]
    for layer in w.layers:
        x = encoder_layer(spec, layer, x, mask_bias, batch, length)
    return x.reshape(batch, length, spec.hidden_size)

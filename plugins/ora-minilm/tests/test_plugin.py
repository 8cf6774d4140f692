"""ora-minilm as an Ora plugin: the ``minilm`` embedder, registered without loading anything heavy,
found by the host by name, one model per process however many hosts and components use it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ora_minilm.plugin as minilm_plugin
import pytest

from ora_core.api import PluginError, StandaloneContext
from ora_core.testing import make_config, make_host

PROBE = """
import json, sys
import ora_minilm.plugin
from ora_core.testing import make_host
host = make_host(ora_minilm.plugin)
embedder = host.embedder("minilm")
heavy = sorted(m for m in ("numpy", "tokenizers", "safetensors", "torch", "chromadb") if m in sys.modules)
print(json.dumps({"heavy": heavy, "embedders": sorted(host.components("embedder")),
                  "dimension": embedder.dimension, "normalized": embedder.normalized}))
"""


def test_registering_the_plugin_loads_no_model_and_no_numpy() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"heavy": [], "embedders": ["minilm"], "dimension": 384, "normalized": True}


def test_the_installed_distribution_registers_the_minilm_embedder_through_its_entry_point() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORA")}
    ora = Path(sys.executable).with_name("ora")  # the console script the installed ora-core provides
    proc = subprocess.run([str(ora), "plugins", "list", "--json"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    [row] = [r for r in json.loads(proc.stdout) if r["distribution"] == "ora-minilm"]
    assert (row["name"], row["status"], row["error"]) == ("minilm", "ok", None)
    assert row["components"] == {"embedder": ["minilm"]} and row["hooks"] == ["ora_register_embedders"]


def test_embed_gives_unit_float32_rows_of_384_in_input_order(encoder: Any) -> None:
    import numpy as np

    embedder = make_host(minilm_plugin).embedder("minilm")
    texts = ["The tower is 330 metres tall.", "Cats purr.", "The tower is 330 metres tall."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(vectors[0], vectors[2]) and float(vectors[0] @ vectors[1]) < 0.5
    assert np.array_equal(vectors, encoder.encode(texts))  # exactly the library's vectors
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError, match="not one string"):
        embedder.embed("a bare string")


def test_every_host_and_every_component_share_one_model_per_process(encoder: Any, model_dir: Any) -> None:
    from ora_minilm import encoder as encoder_module

    first, second = (make_host(minilm_plugin).embedder("minilm") for _ in range(2))
    assert first is not second  # two hosts, two registrations ...
    first.warm_up()
    second.embed(["warm"])
    assert first.encoder() is second.encoder() is encoder  # ... one model
    assert encoder_module._encoders[str(model_dir.resolve())] is encoder


def test_a_model_that_breaks_the_embedders_promise_is_named(model_copy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ora_minilm import MiniLMError
    from ora_minilm import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_encoders", {})  # this test's model stays out of the session's cache

    (model_copy / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]), encoding="utf-8")
    with pytest.raises(MiniLMError, match="lists no Normalize module; the 'minilm' embedder promises") as err:
        minilm_plugin.MiniLMEmbedder(model_copy).embed(["x"])
    assert err.value.path == str(model_copy / "modules.json")


def test_a_configured_name_no_plugin_registers_lists_the_registered_embedders() -> None:
    config = make_config({"embedding": {"embedder": "e5-large"}}).config
    ctx = StandaloneContext(config, host=make_host(minilm_plugin))
    with pytest.raises(PluginError) as err:
        ctx.embedder()
    assert "embedding.embedder names 'e5-large'" in str(err.value)
    assert "registered embedders: minilm" in str(err.value)
    assert ctx.embedder("minilm").name == "minilm"

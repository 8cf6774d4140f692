"""Importing ora_minilm loads nothing heavy, and encoding never touches torch or transformers."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import ora_minilm
after_import = sorted(m for m in ("numpy", "tokenizers", "safetensors") if m in sys.modules)
vector = ora_minilm.get_encoder().encode(["a sentence about the trace"])[0]
heavy = sorted(m for m in sys.modules if m.split(".")[0] in
               {"torch", "transformers", "sentence_transformers", "huggingface_hub", "chromadb"})
print(json.dumps({"after_import": after_import, "heavy": heavy, "dims": len(vector),
                  "numpy_loaded": "numpy" in sys.modules}))
"""


def test_import_is_light_and_encoding_never_imports_torch_or_transformers():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["after_import"] == []
    assert out["heavy"] == []
    assert out["dims"] == 384 and out["numpy_loaded"]

"""Loading the plugins (registering retrievers and commands) imports no heavy library:
``ora --help`` and ``ora plugins list`` stay fast (simonw/llm #732/#848 are the mistake)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys, typer
import ora_chroma
from ora_core.testing import make_host
mods = [ora_chroma]
try:
    import ora_web
    mods.append(ora_web)
except ImportError:
    pass
host = make_host(*mods)
host.register_commands(typer.Typer())
heavy = sorted(m for m in ("chromadb", "torch", "sentence_transformers", "transformers", "numpy")
               if m in sys.modules)
print(json.dumps({"heavy": heavy, "retrievers": sorted(host.components("retriever"))}))
"""


def test_registering_the_plugins_imports_no_heavy_library():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    assert {"chroma-concept", "chroma-conversation", "chroma-relationship"} <= set(out["retrievers"])

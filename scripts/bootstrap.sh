#!/usr/bin/env bash
# Sets up .venv and the local model files. Idempotent: a second run only checks stamps.
# Heavy artifacts (the built llama-cpp-python wheel, the assembled GGUF files) live in
# $RAG_CACHE_DIR (default ~/.cache/agentic-rag) so fresh clones reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
CACHE="${RAG_CACHE_DIR:-$HOME/.cache/agentic-rag}"
LLAMA_VERSION="0.3.36"
WHEELS="$CACHE/wheels"
mkdir -p "$WHEELS"

step() { printf '\n==> %s\n' "$*"; }

if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $PYTHON"
    "$PYTHON" -m venv .venv
fi

if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    step "building llama-cpp-python $LLAMA_VERSION once (about 4 minutes; cached in $WHEELS)"
    tmp="$(mktemp -d)"
    CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        .venv/bin/pip wheel --no-deps --progress-bar on -w "$tmp" "llama-cpp-python==$LLAMA_VERSION"
    mv "$tmp"/llama_cpp_python-*.whl "$WHEELS"/
    rmdir "$tmp" 2>/dev/null || true
fi

stamp=".venv/.installed-$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    step "installing the project and its dependencies into .venv"
    links=(--find-links "$WHEELS")
    [ -d /opt/wheels ] && links+=(--find-links /opt/wheels)
    # requirements.lock pins every version (see scripts/lock.sh): no resolver backtracking
    .venv/bin/pip install --progress-bar on "${links[@]}" -c requirements.lock -e '.[dev]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi

step "checking local model files (assembled once into $CACHE/models)"
.venv/bin/rag setup --test-models

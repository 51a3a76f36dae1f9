#!/usr/bin/env bash
# Regenerates requirements.lock, the pinned versions bootstrap.sh installs with.
# Why a lock: pip's resolver backtracks for many minutes on this dependency set
# (litellm and langchain-core releases that need a certifi not yet on the index);
# uv resolves it in a second. Run after changing dependencies in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${RAG_CACHE_DIR:-$HOME/.cache/agentic-rag}"
command -v uv >/dev/null || python3 -m pip install -q uv
uv pip compile pyproject.toml --extra dev --python-version 3.11 --no-header --no-annotate \
    --index-url https://pypi.org/simple --find-links "$CACHE/wheels" --find-links /opt/wheels \
    -o requirements.lock
# the project itself is installed editable, not pinned
sed -i '/^agentic-rag/d' requirements.lock

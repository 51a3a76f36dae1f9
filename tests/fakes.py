"""Deterministic stand-ins for models, for unit tests of logic only (never the product path)."""

from __future__ import annotations

import hashlib
import math

from langchain_core.embeddings import Embeddings

from tools.keyword_index import tokenize


class HashEmbeddings(Embeddings):
    """Bag-of-stemmed-words hashed into 64 dims: texts sharing words are close, others far."""

    dim = 64

    def __init__(self) -> None:
        self.calls: list[int] = []

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for token in tokenize(text) or ["<empty>"]:
            vec[int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

"""The vector half of a PostgreSQL collection: pgvector, cosine distance, HNSW.

The same contract as ``tools.store.chroma_vectors.ChromaChunkStore`` (the contract suite runs
both): vectors are written before the manifest commit and deleted after it, and hold
the chunk's text and metadata so a hit needs no second read. The table is made at the
first write, when the embedding's dimension is known (an HNSW index needs it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from tools.documents import Chunk
from tools.store.chroma_vectors import StorageError
from tools.store.postgres import connect, lock_key, use_schema

# the search index (pgvector's default build parameters); bench/bench_scale.py builds it
# after a bulk load with this statement
HNSW_INDEX = (
    "CREATE INDEX IF NOT EXISTS vectors_hnsw ON vectors USING hnsw (embedding vector_cosine_ops)"
)
_TABLE = (
    """
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY, text_hash TEXT NOT NULL, document TEXT NOT NULL,
    metadata JSONB NOT NULL, embedding vector({dim}) NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_text_hash ON vectors (text_hash);
"""
    + HNSW_INDEX
    + ";"
)


def _literal(vector: Sequence[float]) -> str:
    """pgvector's text form; the tests compare it with exact numpy search to 1e-5."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgChunkStore:
    """Search returns cosine *distances* (0 = identical), as Chroma's does."""

    def __init__(self, url: str, schema: str, ef_search: int, max_batch: int = 1000) -> None:
        self.name = schema
        self._max_batch = max_batch  # rows per statement
        self._db = connect(url)
        use_schema(self._db, schema)
        # pgvector caps hnsw.ef_search at 1000
        self._db.execute(f"SET hnsw.ef_search = {min(int(ef_search), 1000)}")
        # a filtered search keeps scanning the graph until k rows pass the filter
        self._db.execute("SET hnsw.iterative_scan = relaxed_order")
        self._made = False  # the table, once seen, stays for this handle's life

    def close(self) -> None:
        self._db.close()

    def _exists(self) -> bool:
        """Whether the table is made; asked of the database only until it is, so a search
        costs no extra round trip."""
        if not self._made:
            row = self._db.execute("SELECT to_regclass('vectors') IS NOT NULL").fetchone()
            self._made = bool(row and row[0])
        return self._made

    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> None:
        if not chunks:
            return
        try:
            with self._db.transaction():
                if not self._exists():  # one creator: concurrent DDL on one name fails
                    key = lock_key(self.name, "vectors")
                    self._db.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                    self._db.execute(_TABLE.format(dim=len(vectors[0])))
                for start in range(0, len(chunks), self._max_batch):
                    part = slice(start, start + self._max_batch)
                    self._insert(chunks[part], vectors[part])
        except psycopg.Error as exc:
            raise StorageError(f"writing vectors to PostgreSQL failed: {exc}") from exc

    def _insert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> None:
        with self._db.cursor() as cur:
            cur.executemany(
                "INSERT INTO vectors VALUES (%s, %s, %s, %s, %s::vector) "
                "ON CONFLICT (id) DO UPDATE SET text_hash = EXCLUDED.text_hash, "
                "document = EXCLUDED.document, metadata = EXCLUDED.metadata, "
                "embedding = EXCLUDED.embedding",
                [
                    (c.id, c.text_hash, c.text, json.dumps(c.to_metadata()), _literal(v))
                    for c, v in zip(chunks, vectors, strict=True)
                ],
            )

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if not ids or not self._exists():
            return
        try:
            for start in range(0, len(ids), self._max_batch):
                part = ids[start : start + self._max_batch]
                self._db.execute("DELETE FROM vectors WHERE id = ANY(%s)", (part,))
        except psycopg.Error as exc:
            raise StorageError(f"deleting vectors from PostgreSQL failed: {exc}") from exc

    def ids(self) -> set[str]:
        if not self._exists():
            return set()
        return {r[0] for r in self._db.execute("SELECT id FROM vectors")}

    def count(self) -> int:
        if not self._exists():
            return 0
        return self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]

    def vectors_for_text_hashes(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        """Stored vectors of identical texts, so unchanged text is never embedded twice."""
        wanted = list(dict.fromkeys(hashes))
        if not wanted or not self._exists():
            return {}
        rows = self._db.execute(
            "SELECT DISTINCT ON (text_hash) text_hash, embedding::real[] FROM vectors "
            "WHERE text_hash = ANY(%s)",
            (wanted,),
        )
        return {h: list(v) for h, v in rows}

    def search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]:
        if k <= 0 or not self._exists():
            return []
        if where and any(isinstance(v, dict) for v in where.values()):
            raise ValueError(f"only equality filters are supported, not {where!r}")
        query = (
            "SELECT document, metadata, embedding <=> %(v)s::vector AS distance FROM vectors "
            + ("WHERE metadata @> %(where)s::jsonb " if where else "")
            + "ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
        )
        rows = self._db.execute(
            query, {"v": _literal(vector), "k": k, "where": json.dumps(where or {})}
        )
        return [(Chunk.from_metadata(doc, meta), float(dist)) for doc, meta, dist in rows]

    def held(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` have a vector here."""
        ids = list(ids)
        if not ids or not self._exists():
            return set()
        rows = self._db.execute("SELECT id FROM vectors WHERE id = ANY(%s)", (ids,))
        return {r[0] for r in rows}

    def vectors_for_ids(self, ids: Sequence[str]) -> dict[str, Sequence[float]]:
        if not ids or not self._exists():
            return {}
        rows = self._db.execute(
            "SELECT id, embedding::real[] FROM vectors WHERE id = ANY(%s)", (list(ids),)
        )
        return {cid: np.asarray(v, dtype=np.float32) for cid, v in rows}

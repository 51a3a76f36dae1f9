"""The contract every store retrieval reads (``tools.retrieval.hybrid.ChunkReader``) must meet, on
each backend: dense search gives an exact nearest-neighbour search's answer, keyword
search and scores give a plain BM25's over the same tokens, and chunks by id and their
neighbours come back whole and in order. A new backend (issue 40: PostgreSQL) joins the
``backend_settings`` parameters and must pass the same tests."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.bm25_reference import MemoryKeywordIndex
from tests.fakes import HashEmbeddings
from tools.store.collection import Collection
from tools.store.protocol import ChunkReader

EMB = HashEmbeddings()
TOPICS = [
    "sorting arrays with quicksort picks a pivot and partitions the array",
    "binary search trees keep keys ordered for logarithmic lookups",
    "hash tables trade memory for constant time lookups of keys",
    "garbage collection reclaims memory no reference reaches",
    "compilers parse source text into syntax trees before code generation",
    "operating systems schedule processes and manage virtual memory",
]
QUERIES = ["memory lookups of keys", "parse syntax trees", "pivot partitions", "nothing matches zz"]


@pytest.fixture
def reader(backend_settings, tmp_path) -> ChunkReader:
    root = tmp_path / "docs"
    root.mkdir()
    for n, topic in enumerate(TOPICS):
        # three paragraphs per file, each its own chunk: neighbours to walk
        paragraphs = [f"Part {p} of file {n}: {topic}, seen from side {p}." for p in range(3)]
        (root / f"f{n}.md").write_text("\n\n".join(paragraphs) + "\n")
    collection = Collection(backend_settings, "contract", create=True)
    options = IngestOptions(partition=PartitionOptions("structure", 80, 0))
    Ingestor(backend_settings, collection, EMB, options, progress=False).run([root])
    return collection


def every_chunk(reader: ChunkReader):
    """All committed chunks, through the protocol: a dense search deep enough for all."""
    return [chunk for chunk, _ in reader.dense_search(EMB.embed_query("x"), 1000)]


def test_dense_search_is_an_exact_nearest_neighbour_search(reader):
    chunks = every_chunk(reader)
    assert len(chunks) >= 3 * len(TOPICS)
    ids = [c.id for c in chunks]
    stored = reader.vectors_for_ids(ids)
    matrix = np.array([stored[i] for i in ids], dtype=np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    for query in QUERIES:
        vector = np.array(EMB.embed_query(query), dtype=np.float64)
        distances = 1 - matrix @ (vector / np.linalg.norm(vector))
        found = reader.dense_search(vector.tolist(), 5)
        # the k nearest: their distances are the exact search's k smallest (ties may
        # come in either order), and each is its chunk's own distance
        assert [d for _, d in found] == pytest.approx(sorted(distances)[:5], abs=1e-5), query
        exact = dict(zip(ids, distances, strict=True))
        assert [d for _, d in found] == pytest.approx([exact[c.id] for c, _ in found], abs=1e-5)


def test_keyword_search_and_scores_are_plain_bm25_over_the_stored_tokens(reader):
    ids = [c.id for c in every_chunk(reader)]
    tokens = reader.chunk_tokens(ids)
    reference = MemoryKeywordIndex(ids, [tokens[i] for i in ids])
    for query in QUERIES:
        # every matching chunk, so ties at the cut cannot differ: the same chunks, scores
        expected = dict(reference.search(query, len(ids)))
        found = {c.id: score for c, score in reader.keyword_search(query, len(ids))}
        assert found == pytest.approx(expected, rel=1e-6), query
        top = [score for _, score in reader.keyword_search(query, 5)]
        assert top == pytest.approx(sorted(expected.values(), reverse=True)[:5], rel=1e-6)
        assert reader.keyword_scores(query, ids) == pytest.approx(reference.scores(query, ids))


def test_chunks_by_id_and_their_neighbours_come_back_whole_and_in_order(reader):
    chunks = every_chunk(reader)
    middle = next(c for c in chunks if c.chunk_index == 1)
    assert reader.chunks_by_id([middle.id, "no-such-id"]) == {middle.id: middle}
    window = reader.neighbours(middle, 1, 1)
    assert [c.chunk_index for c in window] == [0, 1, 2]
    assert {c.doc_id for c in window} == {middle.doc_id} and window[1] == middle
    assert [c.chunk_index for c in reader.neighbours(window[0], 1, 0)] == [0]

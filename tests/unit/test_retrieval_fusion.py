"""Hybrid fusion: every candidate is scored by both methods, by hand on a tiny stub index."""

from __future__ import annotations

import pytest

from tools.config import load_settings
from tools.documents import Chunk
from tools.retrieval.hybrid import HybridRetriever, make_retriever


def chunk(name: str, text: str) -> Chunk:
    return Chunk(text, name, f"{name}.md", 0, 1, 0, len(text))


A = chunk("a", "apples grow on orchard trees")
B = chunk("b", "bananas ripen in warm kitchens")
C = chunk("c", "cherries need cold winters to fruit")
VECTORS = {A.id: [1.0, 0.0], B.id: [0.6, 0.8], C.id: [0.8, 0.6]}  # cosine to [1, 0]
BM25 = {A.id: 2.5, B.id: 3.0, C.id: 2.0}


class StubIndex:
    """Dense finds A and C, BM25 finds B and C (fetch_k 2): A is missing from BM25's top."""

    def vectors_for_ids(self, ids):
        return {i: VECTORS[i] for i in ids}

    def dense_search(self, vector, k, where=None):
        return [(A, 0.0), (C, 0.2)][:k]

    def keyword_search(self, query, k):
        return [(B, 3.0), (C, 2.0)][:k]

    def keyword_scores(self, query, ids):
        return {i: BM25[i] for i in ids}

    def chunk_tokens(self, ids):
        return {}


class UnitQuery:
    def embed_documents(self, texts):
        return [[2.0, 0.0] for _ in texts]  # not unit length: cosine must normalise


def test_a_candidate_missing_from_one_index_keeps_its_real_score_there():
    settings = load_settings({"fetch_k": 2, "hybrid_weight": 0.5, "distance_threshold": 0.75})
    passages, report = HybridRetriever(StubIndex(), UnitQuery(), settings).retrieve(["q"])
    scores = {p.source: p.score for p in passages}
    # dense cos {A 1, B .6, C .8} -> min-max {1, 0, .5}; BM25 {2.5, 3, 2} -> {.5, 1, 0}
    # fused 0.5 * dense + 0.5 * BM25: A .75, B .5, C .25 (A would get .5 with BM25 = 0)
    assert scores == pytest.approx({"a.md": 0.75, "b.md": 0.5, "c.md": 0.25})
    assert [p.source for p in passages] == ["a.md", "b.md", "c.md"]
    assert {p.source: p.distance for p in passages} == pytest.approx(
        {"a.md": 0.0, "b.md": 0.4, "c.md": 0.2}
    )
    assert report.candidates == 3 and report.closest_distance == 0.0


def test_every_retriever_setting_has_a_factory_and_back():
    from tools.config import choices
    from tools.retrieval.hybrid import RETRIEVERS

    assert set(RETRIEVERS) == set(choices("retriever"))


@pytest.mark.parametrize(
    ("retriever", "ranked"),
    [
        # dense alone finds A and C, ranked by cosine whatever hybrid_weight says
        ("dense", ["a.md", "c.md"]),
        # BM25 alone finds B and C, ranked by BM25; the threshold still measures distance
        ("keyword", ["b.md", "c.md"]),
    ],
)
def test_a_single_index_retriever_finds_and_ranks_by_its_index_alone(retriever, ranked):
    settings = load_settings(
        {"retriever": retriever, "fetch_k": 2, "hybrid_weight": 0.5, "distance_threshold": 0.75}
    )
    passages, report = make_retriever(StubIndex(), UnitQuery(), settings).retrieve(["q"])
    assert [p.source for p in passages] == ranked and report.candidates == 2
    assert passages[0].score == 1.0 and passages[1].score == 0.0

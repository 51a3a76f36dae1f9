"""Every candidate cut before generation is listed with its scores, stage and reason."""

from __future__ import annotations

from graph import build_graph, config_for
from tools.config import load_settings
from tools.documents import Chunk
from tools.retrieval.hybrid import HybridRetriever

FIELDS = {"chunk_id", "source", "location", "stage", "reason", "score", "distance", "snippet"}


def ask(models, question, config):
    return build_graph().invoke(
        {"question": question}, config_for(**config), context=models.services
    )


def test_threshold_cuts_are_listed_best_first_with_scores(corpus_env, models):
    out = ask(models, "How do I install the service?", {"distance_threshold": 0.0})
    dropped = out["retrieval"]["dropped"]
    assert dropped and all(set(d) == FIELDS for d in dropped)
    assert {d["stage"] for d in dropped} == {"threshold"}
    assert "> threshold 0.0" in dropped[0]["reason"]
    assert [d["score"] for d in dropped] == sorted((d["score"] for d in dropped), reverse=True)
    install = next(d for d in dropped if d["source"] == "docs/install.md")
    assert install["location"] == "docs/install.md, lines 1-3"
    assert install["snippet"].startswith("# Install")
    assert install["distance"] > 0.0


def test_passages_beyond_k_are_listed_as_top_k_cuts(corpus_env, models):
    out = ask(models, "How do I install the service?", {"k": 1, "distance_threshold": 2.0})
    kept = out["citations"][0]["chunk_id"]
    cuts = [d for d in out["retrieval"]["dropped"] if d["stage"] == "top_k"]
    assert len(cuts) == out["retrieval"]["candidates"] - 1
    assert kept not in {d["chunk_id"] for d in cuts}
    assert all(d["reason"] == "ranked below the top 1" for d in cuts)


def test_reranker_cuts_are_listed(corpus_env, models):
    models.grades = {"Turning it off": 3, "verifier is": 1}
    out = ask(
        models,
        "How do I install the service?",
        {"rerank": "llm", "k": 3, "rerank_keep": 2, "distance_threshold": 2.0},
    )
    reranked = [d for d in out["retrieval"]["dropped"] if d["stage"] == "rerank"]
    assert len(reranked) == out["retrieval"]["kept"] - 2
    assert all(d["reason"] == "reranked below the top 2" for d in reranked)
    assert not any("Turning it off" in d["snippet"] for d in reranked)  # graded best: kept


def _chunk(name: str, text: str) -> Chunk:
    return Chunk(text, name, f"{name}.md", 0, 1, 0, len(text))


def test_duplicates_are_listed_with_their_twin():
    one, twin = _chunk("a", "apples grow on trees"), _chunk("b", "apples grow on trees")

    class Index:
        def vectors_for_ids(self, ids):
            return {i: [1.0, 0.0] for i in ids}

        def dense_search(self, vector, k, where=None):
            return [(one, 0.0), (twin, 0.0)]

        def keyword_search(self, query, k):
            return []

        def keyword_scores(self, query, ids):
            return {i: 0.0 for i in ids}

        def chunk_tokens(self, ids):  # the stored tokens, as the manifest keeps them
            return {c.id: c.text.split() for c in (one, twin) if c.id in ids}

    class Embed:
        def embed_documents(self, texts):
            return [[1.0, 0.0] for _ in texts]

    passages, report = HybridRetriever(Index(), Embed(), load_settings()).retrieve(["apples"])
    assert len(passages) == 1 and report.duplicates == 1
    (entry,) = report.dropped
    assert entry["stage"] == "duplicate"
    assert entry["reason"] == f"duplicate of {passages[0].chunk_ids[0]}"
    assert entry["chunk_id"] != passages[0].chunk_ids[0]
    assert entry["score"] == 1.0 and entry["distance"] == 0.0

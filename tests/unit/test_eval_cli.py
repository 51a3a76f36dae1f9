"""`rag eval` end to end through ``main``: a tiny BEIR collection, fake embeddings, real
ingestion, real ``HybridRetriever``, real reports."""

from __future__ import annotations

import json

import pytest

from graph.services import Services
from rag_cli.main import main
from tests.fakes import HashEmbeddings
from tests.files import write_tree

DOCS = {
    "d1": "Quicksort sorts an array by partitioning it around a pivot element.",
    "d2": "Mergesort sorts by merging sorted halves; it is stable.",
    "d3": "Hash tables map keys to values with constant expected lookup time.",
    "d4": "Binary search trees keep keys ordered for range queries.",
    "d5": "Garbage collection reclaims memory that programs no longer reference.",
    "d6": "Compilers translate source programs into machine code.",
}
QUERIES = {
    "q1": "sorting an array with a pivot",
    "q2": "hash table lookup of keys",
    "q3": "garbage collection of memory",
    "q4": "a query nobody judged",
}
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td3\t1\nq3\td5\t1\nq3\td6\t0\n"


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def beir(tmp_path):
    corpus = [
        {"_id": k, "title": "Compilers" if k == "d6" else "", "text": v} for k, v in DOCS.items()
    ]
    return write_tree(
        tmp_path / "tiny",
        {
            "corpus.jsonl": _jsonl(corpus),
            "queries.jsonl": _jsonl([{"_id": k, "text": v} for k, v in QUERIES.items()]),
            "qrels/test.tsv": QRELS,
        },
    )


@pytest.fixture
def emb():
    return HashEmbeddings()


def rag_json(emb, capsys, *argv) -> dict:
    services = Services(embed=lambda settings: emb)
    assert main([str(a) for a in argv], services=services) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _by_label(report: dict) -> dict[str, dict]:
    return {run["label"]: run for run in report["runs"]}


def test_eval_retrieval_scores_three_modes_and_writes_the_reports(beir, emb, capsys, tmp_path):
    out = tmp_path / "out"
    report = rag_json(
        emb, capsys, "eval", "retrieval", "--beir", beir, "--mode", "all", "--out", out, "--json"
    )
    runs = _by_label(report)
    assert list(runs) == ["hybrid", "bm25", "dense"]
    assert report["dataset"] | {"corpus": ""} == {
        "name": "tiny",
        "corpus": "",
        "queries": 4,
        "judged_queries": 3,
        "unjudged_skipped": 1,  # q4 has no judgments
        "qrels_without_query": 0,
        "evaluated": 3,
    }
    assert report["collection"]["documents"] == 6 and not report["collection"]["reused"]
    # BM25 puts d1 (sort, array, pivot) before d2 (sort) for q1, d3 first for q2, d5 for q3
    bm25 = runs["bm25"]
    assert [q["top"][0] for q in bm25["queries"]] == ["d1", "d3", "d5"]
    assert bm25["metrics"]["ndcg@10"] == pytest.approx(1.0)
    assert bm25["metrics"]["recall@100"] == pytest.approx(1.0)
    assert runs["hybrid"]["settings"]["fetch_k"] == 100  # raised to the depth
    assert runs["dense"]["settings"]["retriever"] == "dense"  # the service's own, one index
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "chart.png"}
    assert json.loads((out / "report.json").read_text()) == report
    assert "| `bm25` | 1.000 |" in (out / "report.md").read_text()


def test_a_second_run_reuses_the_collection_and_embeds_only_queries(beir, emb, capsys):
    first = rag_json(emb, capsys, "eval", "retrieval", "--beir", beir, "--json")
    assert max(emb.calls) > 1  # the corpus was embedded in batches
    emb.calls.clear()
    second = rag_json(
        emb, capsys, "eval", "retrieval", "--beir", beir, "--hybrid-weight", "0.3", "--json"
    )
    assert second["collection"]["reused"] is True
    assert second["collection"]["name"] == first["collection"]["name"]
    assert emb.calls == [1, 1, 1]  # one query embedding per judged query, nothing else
    assert second["runs"][0]["settings"]["hybrid_weight"] == 0.3
    # other chunking is another collection
    third = rag_json(
        emb, capsys, "eval", "retrieval", "--beir", beir, "--chunk-size", "30", "--json"
    )
    assert third["collection"]["name"] != first["collection"]["name"]


def test_single_index_modes_rank_by_their_own_index_only(beir, emb, capsys):
    report = rag_json(
        emb,
        capsys, "eval", "retrieval", "--beir", beir, "--mode", "bm25", "--mode", "dense",
        "--distance-threshold", "2.0", "--json",
    )  # fmt: skip
    runs = _by_label(report)
    q3 = {label: run["queries"][2] for label, run in runs.items()}
    assert q3["bm25"]["results"] == 1  # only d5 shares a word with the query
    assert q3["dense"]["results"] == 6  # every vector is a neighbour at threshold 2.0


def test_chunks_of_one_document_count_once_at_its_best_rank(beir, emb, capsys):
    report = rag_json(
        emb,
        capsys, "eval", "retrieval", "--beir", beir, "--splitter", "chars", "--chunk-size", "25",
        "--overlap", "0", "--distance-threshold", "2.0", "--limit", "2", "--json",
    )  # fmt: skip
    assert report["collection"]["chunks"] > 2 * len(DOCS)
    run = report["runs"][0]
    assert [q["id"] for q in run["queries"]] == ["q1", "q2"]  # --limit
    for query in run["queries"]:
        assert len(query["top"]) == len(set(query["top"])) == query["results"] == 6


def test_sweep_makes_one_run_per_value_and_corpus_flags_take_trec_qrels(
    beir, emb, capsys, tmp_path
):
    trec = tmp_path / "qrels.txt"
    trec.write_text("q1 0 d1 1\nq2 0 d3 1\n")
    report = rag_json(
        emb,
        capsys, "eval", "retrieval", "--corpus", beir / "corpus.jsonl",
        "--queries", beir / "queries.jsonl", "--qrels", trec, "--mode", "hybrid",
        "--mode", "bm25", "--sweep", "distance_threshold=0.5,2.0",
        "--sweep", "hybrid_weight=0.2,0.8", "--json",
    )  # fmt: skip
    # hybrid: 2 thresholds x 2 weights; bm25 ignores the weight: 2 thresholds
    assert list(_by_label(report)) == [
        "hybrid distance_threshold=0.5 hybrid_weight=0.2",
        "hybrid distance_threshold=0.5 hybrid_weight=0.8",
        "hybrid distance_threshold=2.0 hybrid_weight=0.2",
        "hybrid distance_threshold=2.0 hybrid_weight=0.8",
        "bm25 distance_threshold=0.5",
        "bm25 distance_threshold=2.0",
    ]
    assert report["dataset"]["evaluated"] == 2


def test_compare_and_convert_cacm_commands(beir, emb, capsys, tmp_path):
    for name, weight in (("a", "0.5"), ("b", "0.0")):
        rag_json(emb, capsys, "eval", "retrieval", "--beir", beir, "--hybrid-weight", weight,
                 "--out", tmp_path / name, "--json")  # fmt: skip
    capsys.readouterr()
    a, b = (str(tmp_path / n / "report.json") for n in "ab")
    assert main(["eval", "compare", a, b]) == 0
    text = capsys.readouterr().out
    assert f"# Retrieval comparison: {a} vs {b}" in text
    assert "| nDCG@10 |" in text and "wins" in text
    result = rag_json(emb, capsys, "eval", "compare", a, b, "--json")
    assert result["pairs"][0]["shared_queries"] == 3

    source = write_tree(
        tmp_path / "cacm-src",
        {
            "cacm.json": '{"id": "CACM-1", "contents": "Preliminary report\\n"}\n'
            '{"id": "CACM-2", "contents": "Extraction of roots"}\n',
            "topics.cacm.txt": "<DOC>\n<DOCNO> 1 </DOCNO>\n roots of\n polynomials\n</DOC>\n",
            "qrels.cacm.txt": "1 Q0 CACM-2 1\n",
        },
    )
    assert main(["eval", "convert-cacm", str(tmp_path / "conv"), "--source", str(source)]) == 0
    assert "2 documents, 1 queries (1 with judgments), 1 judgments" in capsys.readouterr().out
    assert (tmp_path / "conv" / "queries.jsonl").read_text() == (
        '{"_id": "1", "text": "roots of polynomials"}\n'
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--corpus", "c.jsonl"], "--corpus needs --queries and --qrels"),
        (["--set", "multi_query=2"], "not supported in retrieval eval yet"),
        (["--set", "rerank=llm"], "not supported in retrieval eval yet"),
        (["--sweep", "k=1,2"], "--sweep expects KEY=V1,V2"),
        (["--sweep", "distance_threshold=3"], "distance_threshold"),
        (["--depth", "5"], "--depth must be between 10 and 500"),
        (["--retrieval-strategy", "best"], "retrieval_strategy"),
    ],
)
def test_bad_evaluation_requests_exit_2_with_a_reason(beir, emb, capsys, extra, message):
    args = ["eval", "retrieval", *extra]
    if "--corpus" not in extra:
        args[2:2] = ["--beir", str(beir)]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert emb.calls == []  # refused before anything was embedded


def test_fetch_k_is_raised_to_the_depth_and_a_shallow_depth_drops_recall_at_100(beir, emb, capsys):
    report = rag_json(
        emb,
        capsys, "eval", "retrieval", "--beir", beir, "--depth", "10",
        "--sweep", "fetch_k=5,20", "--json",
    )  # fmt: skip
    runs = _by_label(report)
    assert [r["settings"]["fetch_k"] for r in runs.values()] == [10, 20]
    assert list(runs) == ["hybrid fetch_k=5", "hybrid fetch_k=20"]
    assert all("recall@100" not in r["metrics"] for r in runs.values())
    assert any("Recall@100 is left out" in note for note in report["notes"])

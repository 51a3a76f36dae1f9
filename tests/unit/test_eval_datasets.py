"""BEIR and TREC loaders on tiny files; the CACM converter on the real CACM files."""

from __future__ import annotations

import json

import pytest

from evaluation.datasets import (
    DatasetError,
    convert_cacm,
    load_beir,
    load_qrels,
    load_queries,
    parse_trec_topics,
    read_corpus,
)
from tests.files import write_tree
from tests.shared_data import CACM_DIR


def _jsonl(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def beir(tmp_path):
    return write_tree(
        tmp_path / "tiny",
        {
            "corpus.jsonl": _jsonl(
                {"_id": "d1", "title": "Sorting", "text": "Quicksort sorts arrays."},
                {"_id": "d2", "text": "Hash tables map keys to values."},
            ),
            "queries.jsonl": _jsonl(
                {"_id": "q1", "text": "how to sort"}, {"_id": "q2", "text": "x"}
            )
            + "\n",  # a trailing blank line is fine
            "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n",
        },
    )


def test_load_beir_reads_corpus_queries_and_graded_qrels(beir):
    data = load_beir(beir)
    assert data.name == "tiny"
    assert data.queries == {"q1": "how to sort", "q2": "x"}
    assert data.qrels == {"q1": {"d1": 2, "d2": 0}}
    assert list(read_corpus(data.corpus)) == [
        ("d1", "Sorting", "Quicksort sorts arrays."),
        ("d2", "", "Hash tables map keys to values."),
    ]


def test_load_qrels_reads_trec_and_headerless_beir(tmp_path):
    trec = tmp_path / "qrels.txt"
    trec.write_text("1 0 CACM-1 1\n1 Q0 CACM-7 2\n\n2 0 CACM-3 0\n")
    assert load_qrels(trec) == {"1": {"CACM-1": 1, "CACM-7": 2}, "2": {"CACM-3": 0}}
    tsv = tmp_path / "plain.tsv"
    tsv.write_text("q1\td1\t1\n")
    assert load_qrels(tsv) == {"q1": {"d1": 1}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q1 d1\n", "plain.txt:1: expected"),
        ("q1 0 d1 1\nq1 0 d2 high\n", "plain.txt:2: relevance 'high' is not a number"),
        ("query-id\tcorpus-id\tscore\n", "no judgments"),
    ],
)
def test_load_qrels_names_file_and_line_of_bad_input(tmp_path, content, message):
    path = tmp_path / "plain.txt"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_qrels(path)


def test_queries_and_corpus_reject_malformed_records(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(_jsonl({"_id": "q1", "text": "ok"}, {"_id": "q2", "text": "  "}))
    with pytest.raises(DatasetError, match=r"queries.jsonl:2: a query needs"):
        load_queries(queries)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(_jsonl({"_id": "d1", "text": "a"}, {"_id": "d1", "text": "b"}))
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: duplicate _id 'd1'"):
        list(read_corpus(corpus))
    corpus.write_text("{not json\n")
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:1: invalid JSON"):
        list(read_corpus(corpus))
    with pytest.raises(DatasetError, match="no such file"):
        load_queries(tmp_path / "missing.jsonl")


def test_parse_trec_topics_joins_each_topic_onto_one_line():
    text = (
        "<DOC>\n<DOCNO> 1 </DOCNO>\n\n What about\nTSS?\n</DOC>\n<DOC>\n<DOCNO>2</DOCNO>\nB\n</DOC>"
    )
    assert parse_trec_topics(text) == {"1": "What about TSS?", "2": "B"}
    with pytest.raises(DatasetError, match="without <DOCNO>"):
        parse_trec_topics("<DOC> no number </DOC>")


def test_convert_cacm_on_the_real_files(tmp_path):
    out = tmp_path / "cacm"
    report = convert_cacm(CACM_DIR, out)
    assert (report.documents, report.queries, report.judged_queries) == (3204, 64, 52)
    assert report.judgments == 796
    data = load_beir(out)
    corpus = list(read_corpus(data.corpus))
    assert len(corpus) == 3204
    assert corpus[0][0] == "CACM-2636"
    assert corpus[0][2].startswith("Generation of Random Correlated Normal Variables")
    assert len(data.queries) == 64
    assert data.queries["2"] == (
        "I am interested in articles written either by Prieve or Udo Pooch Prieve, B. Pooch, U."
    )
    judged = [q for q in data.queries if any(g > 0 for g in data.qrels.get(q, {}).values())]
    assert len(judged) == 52
    assert data.qrels["1"]["CACM-1410"] == 1
    assert sum(len(j) for j in data.qrels.values()) == 796
    assert (out / "qrels" / "test.tsv").read_text().startswith("query-id\tcorpus-id\tscore\n")

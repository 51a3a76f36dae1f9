"""Test collections: BEIR folders, JSONL queries, BEIR or TREC qrels, and a CACM converter.

BEIR's layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``) is the one format
everything else is converted to, because most public retrieval benchmarks ship in it
and the corpus file can then be ingested as it is by the service's JSONL loader.
Malformed input fails with the file and line, never by silently scoring fewer queries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

QrelsMap = dict[str, dict[str, int]]
# the shared data folder next to the checkout (as bench/bench_ingest.py finds it)
CACM_SOURCE = Path("cacm")  # under the eval_data_dir setting


class DatasetError(ValueError):
    """A test-collection file is missing or malformed; the message names file and line."""


@dataclass
class Dataset:
    """What an evaluation needs: where the documents are, the queries and the judgments."""

    name: str
    corpus: Path  # JSONL with _id, title (optional) and text
    queries: dict[str, str]  # query id -> text, in file order
    qrels: QrelsMap  # query id -> {doc id: grade}


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) per non-blank line; a bad line fails naming file and line."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path}:{number}: not a JSON object")
            yield number, record


def read_corpus(path: Path) -> Iterator[tuple[str, str, str]]:
    """(id, title, text) per BEIR corpus record; ids must be unique."""
    seen: set[str] = set()
    for number, record in read_jsonl(path):
        doc_id = str(record.get("_id", ""))
        if not doc_id:
            raise DatasetError(f"{path}:{number}: record without '_id'")
        if doc_id in seen:
            raise DatasetError(f"{path}:{number}: duplicate _id {doc_id!r}")
        seen.add(doc_id)
        yield doc_id, str(record.get("title") or ""), str(record.get("text") or "")


def load_queries(path: Path) -> dict[str, str]:
    """BEIR queries.jsonl: ``{"_id": ..., "text": ...}`` per line."""
    queries: dict[str, str] = {}
    for number, record in read_jsonl(path):
        query_id, text = str(record.get("_id", "")), record.get("text")
        if not query_id or not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{path}:{number}: a query needs '_id' and a non-empty 'text'")
        queries[query_id] = text
    return queries


def load_qrels(path: Path) -> QrelsMap:
    """BEIR TSV (``query-id corpus-id score``, header optional) or TREC (``qid 0 docid rel``).

    Told apart per line by the column count, so either works whatever the file is called.
    """
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    qrels: QrelsMap = {}
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            fields = line.split()
            if not fields or (number == 1 and fields[0] == "query-id"):
                continue
            if len(fields) == 3:
                query_id, doc_id, grade = fields
            elif len(fields) == 4:
                query_id, _, doc_id, grade = fields
            else:
                raise DatasetError(
                    f"{path}:{number}: expected 'query-id corpus-id score' (BEIR) or "
                    f"'qid 0 docid rel' (TREC), got {len(fields)} columns"
                )
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(float(grade))
            except ValueError:
                raise DatasetError(
                    f"{path}:{number}: relevance {grade!r} is not a number"
                ) from None
    if not qrels:
        raise DatasetError(f"{path}: no judgments")
    return qrels


def load_beir(folder: Path, split: str = "test") -> Dataset:
    folder = Path(folder)
    return Dataset(
        name=folder.resolve().name,
        corpus=folder / "corpus.jsonl",
        queries=load_queries(folder / "queries.jsonl"),
        qrels=load_qrels(folder / "qrels" / f"{split}.tsv"),
    )


def load_files(corpus: Path, queries: Path, qrels: Path) -> Dataset:
    if not Path(corpus).is_file():
        raise DatasetError(f"{corpus}: no such file")
    return Dataset(Path(corpus).stem, Path(corpus), load_queries(queries), load_qrels(qrels))


# --- CACM --------------------------------------------------------------------------------------

_TOPIC = re.compile(r"<DOC>(.*?)</DOC>", re.S)
_TOPIC_ID = re.compile(r"<DOCNO>\s*(\S+)\s*</DOCNO>")


def parse_trec_topics(text: str) -> dict[str, str]:
    """``<DOC><DOCNO> n </DOCNO> text </DOC>`` blocks (CACM's topics) -> {id: one-line text}."""
    topics: dict[str, str] = {}
    for block in _TOPIC.findall(text):
        match = _TOPIC_ID.search(block)
        if match is None:
            raise DatasetError(f"topic without <DOCNO>: {block[:60]!r}")
        topics[match[1]] = " ".join(block[match.end() :].split())
    return topics


@dataclass
class ConversionReport:
    documents: int
    queries: int
    judged_queries: int
    judgments: int


def convert_cacm(source: Path, out: Path) -> ConversionReport:
    """CACM as shipped (cacm.json, topics.cacm.txt, qrels.cacm.txt) -> a BEIR folder.

    Each document is kept whole (title, abstract and bibliographic lines in one text),
    as in the field-notes baselines, so figures stay comparable with them.
    """
    source, out = Path(source), Path(out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    documents = 0
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for number, record in read_jsonl(source / "cacm.json"):
            doc_id, text = record.get("id"), record.get("contents")
            if not doc_id or not isinstance(text, str):
                raise DatasetError(f"{source / 'cacm.json'}:{number}: needs 'id' and 'contents'")
            fh.write(json.dumps({"_id": doc_id, "title": "", "text": text.strip()}) + "\n")
            documents += 1
    topics_path = source / "topics.cacm.txt"
    if not topics_path.is_file():
        raise DatasetError(f"{topics_path}: no such file")
    topics = parse_trec_topics(topics_path.read_text(encoding="utf-8"))
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for query_id, text in topics.items():
            fh.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    qrels = load_qrels(source / "qrels.cacm.txt")
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for query_id, judged in qrels.items():
            fh.writelines(f"{query_id}\t{doc}\t{grade}\n" for doc, grade in judged.items())
    return ConversionReport(
        documents=documents,
        queries=len(topics),
        judged_queries=sum(1 for q in qrels if q in topics),
        judgments=sum(len(j) for j in qrels.values()),
    )

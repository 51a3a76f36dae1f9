"""The answer-page-removed twin of a question set: every answerable question asked of its
set's pages *without the page that holds its answer*.

Each passage the service then finds is related (the same software, the same subject,
often the same option's neighbours) and none answers, which is the case users meet
whenever their folder covers a topic but not their question. On this set any answer
labelled verified is wrong, and the right outcome is "the documents do not say".

A question is left out when its evidence sentence, or a distinctive gold answer, is also
on another page of the set (``evidence_elsewhere``): removing its page might not remove
its answer. The collection
of each removed page is ingested once, by the real ingestion pipeline, and named
``<set>-without-<page>``; a later run embeds nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from langchain_core.embeddings import Embeddings

from evaluation.datasets import read_jsonl
from evaluation.retrieval import ingest_options
from evaluation.squad import QAItem
from ingest.extract import ExtractError, discover, extract_file
from ingest.pipeline import Ingestor
from tools.config import Settings
from tools.store.collection import Collection


@dataclass(frozen=True)
class RemovedPage:
    """One page taken out of a set, and the questions it alone answered."""

    page: str  # the file name, as the questions' ``source`` names it
    collection: str
    items: tuple[QAItem, ...]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def page_texts(folder: Path) -> dict[str, str]:
    """Each page of ``folder`` (by file name) as ingestion reads it, flattened."""
    texts: dict[str, str] = {}
    for path, source in discover([folder]):
        try:
            docs = extract_file(path, source)
        except ExtractError:
            continue
        texts[path.name] = _flat(" ".join(doc.text for doc in docs))
    return texts


def _distinctive(answer: str) -> bool:
    """A gold answer whose occurrence elsewhere may be the answer itself: "port = auto",
    "/etc/killpower", "client classes"; not a bare number or a short token ("10", "-c"),
    which every page holds in other roles."""
    flat = _flat(answer)
    return len(flat) >= 4 and not re.fullmatch(r"[\d.,\s]+", flat)


def evidence_elsewhere(
    evidence: str, answers: list[str], page: str, texts: dict[str, str]
) -> list[str]:
    """The other pages that hold ``evidence`` (whitespace and case aside) or one of the
    distinctive gold ``answers`` as a whole token: removing ``page`` may leave the answer
    there ("port = auto" in another page's example), so the question is left out."""
    wanted = _flat(evidence)
    golds = [
        re.compile(r"(?<![\w.-])" + re.escape(_flat(a)) + r"(?![\w-])")
        for a in answers
        if _distinctive(a)
    ]
    return sorted(
        name
        for name, text in texts.items()
        if name != page and (wanted in text or any(g.search(text) for g in golds))
    )


def collection_name(set_name: str, page: str) -> str:
    """``kea-without-config``: the set's collection with one page left out."""
    stem = re.sub(r"[^a-z0-9]+", "-", Path(page).stem.casefold()).strip("-")
    return f"{set_name}-without-{stem}"


def removed_pages(
    questions: Path, folder: Path, split: str, set_name: str | None = None
) -> list[RemovedPage]:
    """The answerable questions of ``split``, grouped by the page that answers them, each
    group with the collection it is asked of; a question whose evidence another page also
    holds is left out (``evidence_elsewhere``)."""
    name = set_name or folder.name
    texts = page_texts(folder)
    groups: dict[str, list[QAItem]] = defaultdict(list)
    for _, record in read_jsonl(questions):
        page, answers = record.get("source", ""), record.get("answers") or []
        if record.get("split") != split or not answers or page not in texts:
            continue
        if evidence_elsewhere(record.get("evidence") or "", answers, page, texts):
            continue
        # asked of a collection that lacks its answer: unanswerable by construction
        groups[page].append(
            QAItem(str(record["id"]), str(record["question"]), (), False, page, split)
        )
    return [
        RemovedPage(page, collection_name(name, page), tuple(items))
        for page, items in sorted(groups.items())
    ]


def build_collection(
    settings: Settings, folder: Path, removed: RemovedPage, embedder: Embeddings
) -> dict[str, int]:
    """Ingest ``folder`` without ``removed.page`` into ``removed.collection`` (incremental:
    an existing, complete collection embeds nothing) and return its file and chunk counts."""
    options = replace(ingest_options(settings), exclude=(removed.page,), prune=True)
    collection = Collection(settings, removed.collection, create=True)
    try:
        report = Ingestor(settings, collection, embedder, options, progress=False).run([folder])
        stats = collection.manifest.stats()
    finally:
        collection.close()
    return {"files": report.files_seen, "chunks": int(stats["chunks"])}


def collection_sources(settings: Settings, name: str) -> list[str]:
    """The source names a collection holds (what a test checks the removed page is not)."""
    collection = Collection(settings, name)
    try:
        return sorted(collection.manifest.sources())
    finally:
        collection.close()

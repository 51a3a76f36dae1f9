"""The seeds' judgment list: an LLM writes questions from chunks, the retriever must find them.

Any collection gets a retrieval test set this way, with no human labels: each question
is stored with the id of the chunk it was written from, and retrieval precision is how
often that chunk comes back (hit@k) and how high (MRR@k). Chunk ids change when a file
changes, so a judgment whose chunk is no longer in the collection is reported as stale
and left out rather than counted as a miss.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from evaluation.datasets import DatasetError, read_jsonl
from evaluation.metrics import latency_summary
from graph.prompts import Prompt
from tools.config import Settings
from tools.errors import ModelError
from tools.retrieval.hybrid import make_retriever
from tools.store.collection import Collection
from tools.structured import invoke_structured

QUESTION = Prompt(
    "judgment_question",
    1,
    "Write {n} question(s) that a user of this documentation could ask and that the passage "
    "below answers. Each question must make sense on its own, without seeing the passage "
    "(name the subject instead of saying 'this passage'). "
    'Reply with JSON: {{"questions": ["...", ...]}}.\n\nPassage:\n{text}',
)
MIN_CHUNK_CHARS = 60  # shorter chunks (a lone heading) do not carry a question


class _Questions(BaseModel):
    questions: list[str] = Field(min_length=1, max_length=5)


def generate(
    settings: Settings,
    collection: Collection,
    model: BaseChatModel,
    *,
    per_chunk: int = 1,
    limit: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> Iterator[dict[str, Any]]:
    """Judgments for ``limit`` chunks (drawn in a seeded order) or all, one record per
    question. A reply that is not a question (a statement, or one the model ran on and
    cut short) is dropped, and with ``limit`` the next chunk takes its place: a test set
    of broken questions measures the question writer, not retrieval."""
    chunks = [
        c
        for c in collection.manifest.chunks(collection.manifest.chunk_ids()).values()
        if c.kind == "chunk" and len(c.text.strip()) >= MIN_CHUNK_CHARS
    ]
    chunks.sort(key=lambda c: (c.source, c.chunk_index))
    wanted = len(chunks) if limit is None else min(limit, len(chunks))
    if wanted < len(chunks):
        random.Random(seed).shuffle(chunks)
    done = 0
    for chunk in chunks:
        if done == wanted:
            return
        prompt = QUESTION.text.format(n=per_chunk, text=chunk.text)
        try:
            reply = invoke_structured(
                model, _Questions, [HumanMessage(prompt)], retries=settings.llm_max_retries
            )
        except ModelError as exc:
            print(f"{chunk.source}: skipped ({exc})", file=sys.stderr)
            continue
        questions = [q.strip() for q in reply.questions[:per_chunk]]
        kept = [q for q in questions if q.endswith("?")]
        if not kept:
            print(f"{chunk.source}: skipped (not a question: {questions[:1]})", file=sys.stderr)
            continue
        done += 1
        for i, question in enumerate(kept):
            yield {
                "id": f"{chunk.id}-{i}",
                "question": question,
                "chunk_id": chunk.id,
                "source": chunk.source,
                "heading": chunk.heading,
                "prompt": QUESTION.ref,
            }
        if progress:
            print(f"[{done}/{wanted}] {chunk.source}", file=sys.stderr, flush=True)


def load(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, record in read_jsonl(path):
        if not (record.get("question") and record.get("chunk_id")):
            raise DatasetError(f"{path}:{number}: expected JSON with 'question' and 'chunk_id'")
        records.append(record)
    if not records:
        raise DatasetError(f"{path}: no judgments")
    return records


def score(
    settings: Settings,
    collection: Collection,
    embedder: Embeddings,
    judgments: list[dict[str, Any]],
) -> dict[str, Any]:
    """hit@k and MRR@k of each judgment's source chunk, through the service's retriever."""
    known = collection.manifest.chunk_ids()
    live = [j for j in judgments if j["chunk_id"] in known]
    retriever = make_retriever(collection, embedder, settings)
    k = settings.k
    rows, seconds = [], []
    for j in live:
        started = time.perf_counter()
        passages, _ = retriever.retrieve([j["question"]])
        seconds.append(time.perf_counter() - started)
        rank = next(
            (r for r, p in enumerate(passages[:k], 1) if j["chunk_id"] in p.chunk_ids), None
        )
        rows.append({"id": j["id"], "question": j["question"], "source": j["source"], "rank": rank})
    hits = [r["rank"] is not None for r in rows]
    return {
        "kind": "judgments",
        "collection": collection.name,
        "k": k,
        "judgments": len(judgments),
        "stale": len(judgments) - len(live),
        "evaluated": len(rows),
        f"hit@{k}": round(sum(hits) / len(rows), 4) if rows else None,
        f"mrr@{k}": round(sum(1 / r["rank"] for r in rows if r["rank"]) / len(rows), 4)
        if rows
        else None,
        "latency": latency_summary(seconds),
        "queries": rows,
    }

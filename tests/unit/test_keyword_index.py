"""The FTS5 keyword index in the manifest: scores like the rank-bm25 index it replaced,
follows every commit in the same transaction, and is built once for an older file."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

from tests.bm25_reference import MemoryKeywordIndex
from tools.documents import Chunk
from tools.store.manifest import DocumentEntry, FileRecord, Manifest
from tools.text import tokenize

WORDS = "apple banana cherry orchard kitchen winter index vector search query model".split()


def entry(file: str, texts: list[str]) -> tuple[FileRecord, list[DocumentEntry]]:
    chunks = [Chunk(t, file, file, i, len(texts), 0, len(t)) for i, t in enumerate(texts)]
    doc = DocumentEntry(
        file, file, "h" + file, "text", file, [(c, tokenize(c.text)) for c in chunks]
    )
    return FileRecord(file, 1, 1, "cfg"), [doc]


def corpus(n_files: int, seed: int = 3) -> dict[str, list[str]]:
    """Zipf-like texts: some terms sit in most chunks (idf near 0), some in few."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return {
        f"f{n}.md": [" ".join(rng.choices(WORDS, weights, k=rng.randint(0, 12))) for _ in range(5)]
        for n in range(n_files)
    }


def filled(tmp_path, files: dict[str, list[str]]) -> Manifest:
    manifest = Manifest(tmp_path / "c.sqlite")
    for file, texts in files.items():
        manifest.replace_file(*entry(file, texts))
    return manifest


def reference(manifest: Manifest) -> MemoryKeywordIndex:
    rows = manifest.tokens_of(manifest.chunk_ids())
    return MemoryKeywordIndex([r[0] for r in rows], [r[1].split() for r in rows])


def integrity(manifest: Manifest) -> None:
    """FTS5's own check that the index holds exactly the chunks table's tokens."""
    manifest._db.execute("INSERT INTO chunk_terms(chunk_terms, rank) VALUES ('integrity-check', 1)")


QUERIES = ["apple", "apple apple cherry", "model vector query", "winter kitchen", "nothing"]


@pytest.mark.parametrize("query", QUERIES)
def test_scores_and_ranking_match_rank_bm25(tmp_path, query):
    manifest = filled(tmp_path, corpus(60))
    ref = reference(manifest)
    got, want = manifest.keywords.search(query, 10), ref.search(query, 10)
    assert [score for _, score in got] == pytest.approx([score for _, score in want])
    # ties may order differently; the scores at each rank may not
    ids = list(manifest.chunk_ids())
    rows = manifest.tokens_of(ids)
    assert manifest.keywords.score(query, rows) == pytest.approx(ref.scores(query, ids))


@pytest.mark.parametrize("query", QUERIES)
def test_rarest_words_first_finds_the_same_top_k(tmp_path, query):
    """With a budget of one posting, candidates come from the rarest word alone and the
    other words are added one by one until none could change the top k."""
    manifest = filled(tmp_path, corpus(60))
    frugal = manifest.keyword_index(postings_budget=1, max_postings=10**9)
    want = reference(manifest).search(query, 10)
    assert [s for _, s in frugal.search(query, 10)] == pytest.approx([s for _, s in want])


def test_index_follows_replace_and_remove_in_the_same_commit(tmp_path):
    manifest = filled(tmp_path, {"a.md": ["apple orchard"], "b.md": ["banana kitchen"]})
    assert [cid for cid, _ in manifest.keywords.search("apple", 5)]
    manifest.replace_file(*entry("a.md", ["cherry winter"]))
    assert manifest.keywords.search("apple", 5) == []
    assert len(manifest.keywords.search("cherry", 5)) == 1
    manifest.remove_file("b.md")
    assert manifest.keywords.search("banana", 5) == []
    integrity(manifest)
    assert manifest.chunk_count() == 1 == len(manifest.chunk_ids())


def test_a_failed_commit_leaves_the_index_as_it_was(tmp_path):
    manifest = filled(tmp_path, {"a.md": ["apple orchard"]})
    record, docs = entry("b.md", ["banana kitchen"])
    docs.append(DocumentEntry("b.md", "b.md", "x", "text", "b", [(None, [])]))  # type: ignore[list-item]
    with pytest.raises(AttributeError):
        manifest.replace_file(record, docs)
    assert manifest.keywords.search("banana", 5) == [] and manifest.chunk_count() == 1
    integrity(manifest)


def test_another_connections_commit_is_searched_without_reopening(tmp_path):
    reader = filled(tmp_path, {"a.md": ["apple orchard"]})
    writer = Manifest(tmp_path / "c.sqlite")
    writer.replace_file(*entry("b.md", ["banana kitchen"]))
    assert len(reader.keywords.search("banana", 5)) == 1


def test_kept_word_counts_follow_every_commit(tmp_path):
    """Chunk counts are kept between searches, for one generation only: after a commit,
    here or in another process, scores are rank-bm25's on the new contents again."""
    reader = filled(tmp_path, corpus(20))
    writer = Manifest(tmp_path / "c.sqlite")
    for change in (
        lambda: reader.replace_file(*entry("extra.md", ["apple apple winter", "apple"])),
        lambda: writer.replace_file(*entry("f3.md", ["cherry", "cherry orchard"])),
        lambda: writer.remove_file("extra.md"),
    ):
        reader.keywords.search("apple cherry winter", 10)  # fills the counts
        change()
        got = reader.keywords.search("apple cherry winter", 10)
        want = reference(reader).search("apple cherry winter", 10)
        assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_a_manifest_from_before_the_index_gets_it_when_opened(tmp_path):
    filled(tmp_path, corpus(5)).close()
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.executescript(
            "DROP TRIGGER chunk_added; DROP TRIGGER chunk_removed; DROP TABLE chunk_term_counts;"
            "DROP TABLE chunk_term_occurrences;"
            "DROP TABLE chunk_terms; DROP TABLE chunk_totals;"
        )
    manifest = Manifest(tmp_path / "c.sqlite")
    integrity(manifest)
    assert manifest.chunk_count() == 25
    ref = reference(manifest)
    got, want = manifest.keywords.search("apple cherry", 5), ref.search("apple cherry", 5)
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_a_word_whose_chunks_went_since_its_count_was_read_scores_nothing(tmp_path):
    """An ingestion in another process can commit between reading a word's chunk count
    and reading where it occurs (seen in test_concurrency): that word adds nothing."""
    manifest = filled(tmp_path, {"a.md": ["apple orchard"], "b.md": ["banana kitchen"]})
    index = manifest.keywords
    stale = index._query("apple banana")  # both words counted
    manifest.remove_file("b.md")  # banana's only chunk goes
    frequency = np.zeros(10, np.float32)
    frequency[1] = 1.0
    occurrences = {word: index._occurrences(word, 9) for word in stale.containing}
    pool, partial = index._pooled(stale, frequency, occurrences, np.zeros(10, np.float32))
    assert list(pool) == [1] and partial[0] > 0

"""The bounded keyword search of a PostgreSQL collection (``tools.store.pg_keywords``):
when a round says its top k is exact, it is the exhaustive top k, ids and scores, also
after the mean chunk length has grown past the one the postings were ordered by. A real
server; the embedded index's agreement is measured by bench/bench_scale.py instead."""

from __future__ import annotations

import random
from contextlib import closing

import pytest

from tests.contract.test_manifest_contract import SCHEMA, entry
from tools.store import postgres
from tools.store.pg_keywords import PgKeywordIndex
from tools.store.pg_manifest import PgManifest
from tools.text import tokenize

# stems that tokenize keeps as they are, from common to rare
WORDS = [f"w{n}x" for n in range(120)]


@pytest.fixture
def manifest(database_url):
    with closing(postgres.connect(database_url)) as conn:
        postgres.register(conn, "test")
    opened = PgManifest(database_url, SCHEMA)
    rng = random.Random(3)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    for n in range(40):
        size = 3 + n // 4  # later files' chunks are longer: the mean length grows
        texts = [" ".join(rng.choices(WORDS, weights, k=rng.randint(1, size))) for _ in range(10)]
        opened.replace_file(*entry(f"z{n}.md", texts))
    yield opened
    opened.close()


def test_the_words_are_kept_as_they_are():
    assert tokenize(" ".join(WORDS)) == WORDS


def test_a_round_that_claims_exact_is_exact(manifest):
    everything = manifest.keyword_index(postings_budget=10**9, max_postings=10**9)
    bounded = PgKeywordIndex(manifest._db, depth=1, max_depth=10**9, pool=1, exact_postings=0)
    reference = manifest._db.execute("SELECT reference_length FROM chunk_totals").fetchone()[0]
    rng = random.Random(4)
    claimed = 0
    for _ in range(60):
        query = " ".join(rng.sample(WORDS[:8], 2) + rng.sample(WORDS[30:], rng.randint(0, 2)))
        q, ref, chunks = bounded._query(tokenize(query))
        assert ref == reference and q.avg > 1.2 * ref  # the stretch is exercised
        want = everything.search(query, 3)
        for depth in (1, 4, 16, 64):
            found, exact = bounded._round(q, (ref, chunks), depth, 3, last=False)
            if exact:
                claimed += 1
                assert [c for c, _ in found] == [c for c, _ in want], (query, depth)
                assert [s for _, s in found] == pytest.approx([s for _, s in want], rel=1e-6)
        got = bounded.search(query, 3)
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6)
    assert claimed >= 20  # the bound is tight enough to stop early often


def test_a_search_held_to_one_round_never_misstates_a_score(manifest):
    everything = manifest.keyword_index(postings_budget=10**9, max_postings=10**9)
    shallow = PgKeywordIndex(manifest._db, depth=2, max_depth=2, pool=3, exact_postings=0)
    for query in ("w0x w1x", "w0x w2x w50x", "w3x w3x w90x"):
        truth = dict(everything.search(query, 10**6))
        got = shallow.search(query, 3)
        assert 0 < len(got) <= 3
        assert dict(got) == pytest.approx({cid: truth[cid] for cid, _ in got}, rel=1e-6)


def test_a_collection_made_before_impacts_gets_them_when_opened(manifest, database_url):
    """The layout of collections made before this search (no impacts, no word counts, a
    primary key on (word, chunk)) is brought up to date by the next open."""
    everything = manifest.keyword_index(postings_budget=10**9, max_postings=10**9)
    queries = ["w0x w1x w77x", "w5x", "w2x w2x w40x w41x"]
    before = [everything.search(q, 5) for q in queries]
    manifest._db.execute(
        "DROP TABLE term_chunks; DROP INDEX chunk_terms_impact; "
        "ALTER TABLE chunk_terms DROP COLUMN impact, ADD PRIMARY KEY (term, chunk_id); "
        "ALTER TABLE chunk_totals DROP COLUMN reference_length"
    )
    reopened = PgManifest(database_url, SCHEMA)
    try:
        bounded = PgKeywordIndex(reopened._db, depth=1, max_depth=10**9, exact_postings=0)
        for query, want in zip(queries, before, strict=True):
            got = bounded.search(query, 5)
            assert [c for c, _ in got] == [c for c, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-6)
        unset = reopened._db.execute("SELECT COUNT(*) FROM chunk_terms WHERE impact IS NULL")
        assert unset.fetchone()[0] == 0
    finally:
        reopened.close()

"""The contract every vector store backend must meet."""

from __future__ import annotations

import uuid

import pytest

from tests.fakes import HashEmbeddings
from tools.documents import Chunk
from tools.store.backends import backend
from tools.store.collection import Collection

EMB = HashEmbeddings()


def chunk(text: str, index: int = 0, doc: str = "d1") -> Chunk:
    return Chunk(
        text=text,
        doc_id=doc,
        source=f"{doc}.md",
        chunk_index=index,
        chunk_count=3,
        start_char=0,
        end_char=len(text),
        start_line=1,
        end_line=1,
        heading="A > B",
        file_hash="h1",
    )


@pytest.fixture
def open_store(backend_settings):
    """Opens a new collection's vectors on the backend under test, as ``Collection`` does."""
    opened = []

    def open_():
        name = f"c-{uuid.uuid4().hex[:8]}"
        store = backend(backend_settings)
        manifest = store.open_manifest(backend_settings, name, create=True)
        opened.append(manifest)
        opened.append(store.open_vectors(backend_settings, name, manifest, fresh=False))
        return opened[-1]

    yield open_
    for part in opened:
        part.close()


@pytest.fixture
def store(open_store):
    return open_store()


def test_upsert_search_roundtrip_keeps_every_field(store):
    chunks = [
        chunk("install the service with make demo", 0),
        chunk("configure models with environment variables", 1),
        chunk("bananas are yellow fruit", 2),
    ]
    store.upsert(chunks, EMB.embed_documents([c.text for c in chunks]))
    hits = store.search(EMB.embed_query("how to install the service"), k=2)
    assert hits[0][0] == chunks[0]  # every field survives the round trip, id included
    assert hits[0][0].id == chunks[0].id
    assert 0.0 <= hits[0][1] < hits[1][1] <= 2.0  # cosine distances, ascending


def test_cosine_distance_of_identical_text_is_zero(store):
    c = chunk("exactly this text")
    store.upsert([c], EMB.embed_documents([c.text]))
    ((_, dist),) = store.search(EMB.embed_query("exactly this text"), k=1)
    assert dist == pytest.approx(0.0, abs=1e-5)


def test_upsert_is_idempotent_and_delete_removes(store):
    chunks = [chunk(f"text number {i}", i) for i in range(3)]
    vectors = EMB.embed_documents([c.text for c in chunks])
    store.upsert(chunks, vectors)
    store.upsert(chunks, vectors)
    assert store.count() == 3
    assert store.ids() == {c.id for c in chunks}
    store.delete([chunks[0].id])
    assert store.ids() == {c.id for c in chunks[1:]}


def test_batches_above_the_server_maximum_are_split(store):
    if hasattr(store, "_max_batch"):  # Chroma's and PostgreSQL's; prove the split
        store._max_batch = 7  # Chroma's real limit is 5461
    chunks = [chunk(f"passage {i} about topic {i % 5}", i) for i in range(30)]
    store.upsert(chunks, EMB.embed_documents([c.text for c in chunks]))
    assert store.count() == 30
    store.delete([c.id for c in chunks])
    assert store.count() == 0


def test_vectors_are_found_by_text_hash(store):
    c = chunk("reusable text")
    vector = EMB.embed_documents([c.text])[0]
    store.upsert([c], [vector])
    found = store.vectors_for_text_hashes([c.text_hash, "unknown"])
    assert list(found) == [c.text_hash]
    assert found[c.text_hash] == pytest.approx(vector)


def test_metadata_filter(store):
    a, b = chunk("same words here", 0, "docA"), chunk("same words here too", 0, "docB")
    store.upsert([a, b], EMB.embed_documents([a.text, b.text]))
    hits = store.search(EMB.embed_query("same words"), k=5, where={"doc_id": "docB"})
    assert [h[0].doc_id for h in hits] == ["docB"]


def test_empty_store_search_returns_nothing(store):
    assert store.search(EMB.embed_query("anything"), k=5) == []


def test_collection_reads_only_committed_chunks(backend_settings):
    """Vectors written by an interrupted ingestion are invisible and removable."""
    col = Collection(backend_settings, f"c-{uuid.uuid4().hex[:8]}", create=True)
    orphan = chunk("orphaned upload from a killed run")
    col.vectors.upsert([orphan], EMB.embed_documents([orphan.text]))
    assert col.dense_search(EMB.embed_query(orphan.text), k=3) == []
    assert col.remove_orphans() == 1
    assert col.vectors.count() == 0

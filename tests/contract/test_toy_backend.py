"""The store-backend recipe of docs_corpus/architecture.md, followed as written: one
module (here a temporary one, written by this test) and one registry line
(``tools.store.backends.register``, the run-time form of a line in ``BACKENDS``), and
then the store contract suite runs on it with nothing else changed.

The toy keeps each collection's manifest in SQLite (the ``ManifestBase`` contract, as
the recipe allows: a backend may reuse the parts that exist) and its vectors, flags and
chat sessions in this process's memory, with an exact cosine search. The suite runs
in a child pytest, which registers it from ``CONTRACT_BACKEND`` (tests/contract/
conftest.py) and passes ``backend_settings`` the toy's name only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUITE = [
    "tests/contract/test_chunk_reader_contract.py",
    "tests/contract/test_collection_contract.py",
    "tests/contract/test_vector_store_contract.py",
    "tests/contract/test_session_records_contract.py",
    "tests/contract/test_flag_log_contract.py",
]

TOY_MODULE = '''
"""A toy store: SQLite manifests under data_dir/toy, vectors, flags and chat sessions in
memory (one process)."""

from __future__ import annotations

import math
import sqlite3
import threading
from contextlib import closing, contextmanager
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from tools.documents import Chunk
from tools.store.manifest import Manifest
from tools.store.protocol import CollectionBusy, SoleWriter, unknown_collection

_VECTORS: dict = {}  # (data_dir, collection) -> {chunk id: (chunk, vector)}
_SESSIONS: dict = {}  # data_dir -> {session id: exchanges}
_FLAGS: dict = {}  # data_dir -> [rows]
_LOCKS: dict = {}  # (data_dir, collection) -> lock held by its one writer
_GUARD = threading.Lock()


def _path(settings, name, version=None):
    tail = f"-v{version}" if version else ""
    return settings.data_dir / "toy" / f"{name}{tail}.sqlite"


def _cosine_distance(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norms if norms else 1.0


class MemoryVectors:
    def __init__(self, key):
        with _GUARD:
            self._items = _VECTORS.setdefault(key, {})

    def upsert(self, chunks, vectors):
        with _GUARD:
            for chunk, vector in zip(chunks, vectors, strict=True):
                self._items[chunk.id] = (chunk.text, chunk.to_metadata(), list(vector))

    def delete(self, ids):
        with _GUARD:
            for cid in ids:
                self._items.pop(cid, None)

    def ids(self):
        with _GUARD:
            return set(self._items)

    def count(self):
        return len(self.ids())

    def held(self, ids):
        return set(ids) & self.ids()

    def vectors_for_ids(self, ids):
        with _GUARD:
            return {cid: self._items[cid][2] for cid in ids if cid in self._items}

    def vectors_for_text_hashes(self, hashes):
        wanted = set(hashes)
        with _GUARD:
            items = list(self._items.values())
        return {
            meta["text_hash"]: vector
            for _, meta, vector in items
            if meta["text_hash"] in wanted
        }

    def search(self, vector, k, where=None):
        with _GUARD:
            items = list(self._items.values())
        hits = [
            (Chunk.from_metadata(text, meta), _cosine_distance(vector, stored))
            for text, meta, stored in items
            if all(meta.get(key) == value for key, value in (where or {}).items())
        ]
        return sorted(hits, key=lambda hit: hit[1])[: max(k, 0)]

    def close(self):
        pass


class MemoryFlags:
    def __init__(self, rows):
        self._rows = rows
        self.where = "the toy's memory"

    def append(self, row):
        with _GUARD:
            self._rows.append({"id": len(self._rows) + 1, **row})
            return len(self._rows)

    def rows(self, limit=None):
        with _GUARD:
            kept = self._rows if limit is None else self._rows[len(self._rows) - limit :]
            return [dict(row) for row in kept]


class MemorySessions:
    def __init__(self, saved):
        self._saved = saved

    def write(self, session_id, exchanges):
        with _GUARD:
            self._saved[session_id] = [dict(e) for e in exchanges]

    def read(self, session_id):
        with _GUARD:
            return self._saved.get(session_id)


class Toy:
    name = "toy"

    def where(self, settings):
        return "the toy store"

    def names(self, settings):
        folder = settings.data_dir / "toy"
        return sorted(p.stem for p in folder.glob("*.sqlite") if "-v" not in p.stem)

    def manifest(self, settings, name):
        return Manifest(_path(settings, name))

    def open_manifest(self, settings, name, *, create):
        if not create and not _path(settings, name).exists():
            raise unknown_collection(self, settings, name)
        _path(settings, name).parent.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(_path(settings, name), verify=create)
        if create:
            manifest.record_versions()
        return manifest

    def open_vectors(self, settings, name, manifest, *, fresh):
        return MemoryVectors((settings.data_dir, name))

    def past_manifest(self, settings, name, version, vectors):
        target = _path(settings, name, version)
        if not target.exists():
            with (
                closing(sqlite3.connect(_path(settings, name))) as source,
                closing(sqlite3.connect(target)) as copy,
            ):
                source.backup(copy)
            past = Manifest(target)
            past.rollback(version, vectors.held)
            past.close()
        return Manifest(target)

    def sees_every_commit(self, settings):
        return True

    @contextmanager
    def writer_lock(self, settings, name):
        with _GUARD:
            lock = _LOCKS.setdefault((settings.data_dir, name), threading.Lock())
        if not lock.acquire(blocking=False):
            raise CollectionBusy(f"another writer holds {name!r}")
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def ingestion(self, settings, name):
        with self.writer_lock(settings, name):
            yield SoleWriter()

    def drop(self, settings, name):
        with self.writer_lock(settings, name):
            self.drop_snapshots(settings, name)
            _path(settings, name).unlink(missing_ok=True)
            _VECTORS.pop((settings.data_dir, name), None)

    def drop_snapshots(self, settings, name):
        for past in (settings.data_dir / "toy").glob(f"{name}-v*.sqlite"):
            past.unlink()

    @contextmanager
    def checkpointer(self, settings):
        yield InMemorySaver()

    def flag_log(self, settings):
        with _GUARD:
            return MemoryFlags(_FLAGS.setdefault(settings.data_dir, []))

    def session_log(self, settings):
        with _GUARD:
            return MemorySessions(_SESSIONS.setdefault(settings.data_dir, {}))

    def check(self, settings):
        return {"store": self.name, "where": "memory", "error": None, "detail": "toy"}

    def address(self, settings):
        return None

    def thread_files(self, settings) -> Path | None:
        return None


BACKEND = Toy()
'''


def test_a_toy_backend_added_by_the_recipe_passes_the_store_contract(tmp_path):
    (tmp_path / "toy_store.py").write_text(TOY_MODULE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
        "CONTRACT_BACKEND": "toy=toy_store",  # the registry line: name = module
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *SUITE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    ran = [line for line in done.stdout.splitlines() if line.startswith("tests/contract/")]
    assert len(ran) >= 18 and all("[toy]" in line and "PASSED" in line for line in ran), ran

"""Several ingestion workers on one PostgreSQL collection (fake embedder, real database):
files another worker holds are waited for, then counted as that worker's when it
commits them, or taken up when it dies; each file is committed once."""

from __future__ import annotations

import threading
import time

from ingest.extract import discover
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.fakes import HashEmbeddings
from tests.files import write_tree
from tools.config import load_settings
from tools.store.collection import Collection
from tools.store.postgres import SharedIngestion

OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 20))
PAGES = {f"page{n:02d}.md": f"# Page {n}\n\nPage {n} says {n * 37} things.\n" for n in range(20)}


def _settings(tmp_path, database_url):
    return load_settings(
        {"data_dir": tmp_path / "data", "store": "postgres", "database_url": database_url}
    )


def _ingest(settings, root):
    collection = Collection(settings, "docs", create=True)
    try:
        return Ingestor(settings, collection, HashEmbeddings(), OPTIONS, progress=False).run([root])
    finally:
        collection.close()


def _commits(settings) -> dict[str, int]:
    collection = Collection(settings, "docs")
    try:
        rows = collection.manifest._execute(
            "SELECT file, count(*) FROM version_files GROUP BY file"
        ).fetchall()
    finally:
        collection.close()
    return {row[0]: row[1] for row in rows}


def test_files_held_by_a_worker_that_dies_are_taken_up(tmp_path, database_url):
    settings = _settings(tmp_path, database_url)
    root = write_tree(tmp_path / "docs", PAGES)
    Collection(settings, "docs", create=True).close()
    sources = [source for _, source in discover([root], (), (), [])]
    other = SharedIngestion(database_url, "docs")  # a worker that holds two files...
    assert other.join(wait_s=1) and all(other.claim(s) for s in sources[:2])
    reports = []
    worker = threading.Thread(target=lambda: reports.append(_ingest(settings, root)))
    worker.start()
    time.sleep(2)  # the worker has done the rest and waits for those two
    assert worker.is_alive()
    other.close()  # ...and dies before committing them
    worker.join(timeout=120)
    assert reports and reports[0].files_indexed == 20, reports
    commits = _commits(settings)
    assert len(commits) == 20 and set(commits.values()) == {1}


def test_two_workers_share_the_files_and_commit_each_once(tmp_path, database_url):
    settings = _settings(tmp_path, database_url)
    root = write_tree(tmp_path / "docs", PAGES)
    Collection(settings, "docs", create=True).close()
    reports = []
    workers = [threading.Thread(target=lambda: reports.append(_ingest(settings, root)))]
    workers.append(threading.Thread(target=lambda: reports.append(_ingest(settings, root))))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert len(reports) == 2
    indexed = sum(r.files_indexed for r in reports)
    assert indexed == 20, [r.as_dict() for r in reports]  # every file by exactly one worker
    counted = sum(r.files_indexed + r.files_by_other_workers + r.files_unchanged for r in reports)
    assert counted == 40  # each worker accounts for every file
    commits = _commits(settings)
    assert len(commits) == 20 and set(commits.values()) == {1}
    again = _ingest(settings, root)
    assert (again.files_indexed, again.files_unchanged) == (0, 20)

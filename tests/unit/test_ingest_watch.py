"""`rag ingest --watch`: each batch of file changes is one incremental run."""

from __future__ import annotations

import queue
import threading

from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from ingest.watch import watch
from tests.fakes import HashEmbeddings
from tests.files import write_tree
from tools.config import load_settings
from tools.store.collection import Collection

OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 0), prune=True)


def test_a_change_is_ingested_a_deletion_removed_and_stop_ends_the_watch(tmp_path):
    settings = load_settings({"data_dir": tmp_path / "data"})
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n\nAlpha text.\n"})
    col = Collection(settings, "docs", create=True)
    ingestor = Ingestor(settings, col, HashEmbeddings(), OPTIONS, progress=False)
    ingestor.run([root])
    runs: queue.Queue = queue.Queue()
    stop = threading.Event()
    watcher = threading.Thread(
        target=watch,
        args=([root], lambda: ingestor.run([root]), lambda changed, r: runs.put((changed, r))),
        kwargs={"stop": stop, "debounce_ms": 100},
        daemon=True,
    )
    watcher.start()
    try:
        threading.Event().wait(0.5)  # the watcher is set up
        (root / "b.md").write_text("# B\n\nBeta text.\n")
        changed, report = runs.get(timeout=30)
        assert any(path.endswith("b.md") for path in changed)
        assert report.files_indexed == 1 and report.files_unchanged == 1
        assert sorted(col.manifest.files()) == ["docs/a.md", "docs/b.md"]
        (root / "a.md").unlink()
        _, report = runs.get(timeout=30)
        assert report.files_removed == 1 and col.manifest.files() == ["docs/b.md"]
    finally:
        stop.set()
        watcher.join(30)
    assert not watcher.is_alive()


def test_a_failed_run_is_reported_and_the_watch_goes_on(tmp_path):
    root = write_tree(tmp_path / "docs", {"a.md": "# A\n"})
    results: queue.Queue = queue.Queue()
    stop = threading.Event()
    attempts = iter([RuntimeError("embedding service down"), None])

    def once():
        failure = next(attempts)
        if failure:
            raise failure
        return "ran"

    watcher = threading.Thread(
        target=watch,
        args=([root], once, lambda changed, r: results.put(r)),
        kwargs={"stop": stop, "debounce_ms": 100},
        daemon=True,
    )
    watcher.start()
    try:
        threading.Event().wait(0.5)
        (root / "a.md").write_text("# A\n\nchanged\n")
        assert isinstance(results.get(timeout=30), RuntimeError)
        (root / "a.md").write_text("# A\n\nchanged again\n")
        assert results.get(timeout=30) == "ran"
    finally:
        stop.set()
        watcher.join(30)

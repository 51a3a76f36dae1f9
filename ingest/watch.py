"""Watch mode: re-ingest when files change, as the seeds' data pipeline does.

Each batch of changes (debounced, so saving ten files is one batch) is one incremental
run of the same pipeline: unchanged files cost nothing, changed ones are re-embedded,
deleted ones removed, and each run commits file by file as always, so a running server
sees the new files at its next question. A run that fails is reported and the watch
goes on; Ctrl-C (or ``stop``) ends it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ingest.pipeline import IngestReport

DEBOUNCE_MS = 1600  # changes within this window are one batch


def watch(
    paths: Sequence[str | Path],
    ingest_once: Callable[[], IngestReport],
    on_run: Callable[[set[str], IngestReport | Exception], None],
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
) -> None:
    """Call ``ingest_once`` after each batch of changes under ``paths``; ``on_run`` gets
    the changed paths and the run's report, or the exception that ended the run."""
    from watchfiles import watch as batches

    for changes in batches(*paths, debounce=debounce_ms, stop_event=stop, raise_interrupt=True):
        changed = {path for _, path in changes}
        try:
            result: IngestReport | Exception = ingest_once()
        except Exception as exc:  # reported; the next change is tried again
            result = exc
        on_run(changed, result)

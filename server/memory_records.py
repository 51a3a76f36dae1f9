"""A client's threads, runs and checkpoints in the in-memory runtime of ``langgraph dev``
(``server_runtime = process``), for the quotas (server/quotas.py).

Everything is read from the runtime's store in this process. A reservation is counted
and made with no ``await`` in between, so on the server's one event loop it is atomic.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from server.quotas import ACTIVE, RESERVATION_TTL_S, Place, Usage, json_size

SIZES_KEPT = 10_000  # cached record sizes: (id, updated_at) -> bytes
Book = dict[tuple[Place, str], dict[str, float]]  # (place, client) -> key -> when reserved


class MemoryRecords:
    """The in-memory runtime's records (server/quotas.py ``Records``)."""

    def __init__(self) -> None:
        self.book: Book = {}
        self.sizes: dict[tuple[str, str], int] = {}

    async def usage(self, client: str) -> Usage:
        from langgraph_runtime_inmem.database import connect  # the server's runtime, not ours

        async with connect() as conn:
            return usage(conn.store, client, self.sizes)

    async def thread_metadata(self, thread_id: str) -> dict[str, Any] | None:
        from langgraph_runtime_inmem.database import connect

        async with connect() as conn:
            for thread in conn.store["threads"]:
                if str(thread["thread_id"]) == str(thread_id):
                    return thread.get("metadata")
        return None

    async def reserve(self, client: str, place: Place, key: str, cap: int) -> int | None:
        from langgraph_runtime_inmem.database import connect

        async with connect() as conn:
            return reserve(conn.store, self.book, client, place, key, cap, time.monotonic())


def reserve(
    store: dict[str, Any],
    book: Book,
    client: str,
    place: Place,
    key: str,
    cap: int,
    now: float,
) -> int | None:
    """``MemoryRecords.reserve`` on a given store and reservation book, at time ``now``.
    A reservation ends when its key is a recorded run (or, for a thread, a recorded
    thread), or after ``RESERVATION_TTL_S``."""
    threads = _owned_threads(store, client)
    recorded = {str(r["run_id"]) for r in store["runs"]}
    if place is Place.THREAD:
        recorded |= {str(t["thread_id"]) for t in store["threads"]}
    mine = book.setdefault((place, client), {})
    for held, since in list(mine.items()):
        if held in recorded or now - since > RESERVATION_TTL_S:
            del mine[held]
    if place is Place.THREAD:
        count = len(threads)
    else:
        count = _active(_owned_runs(store, client, {str(t["thread_id"]) for t in threads}))
    count += len(mine)
    if count >= cap:
        return count
    mine[key] = now
    return None


def _record_size(
    sizes: dict[tuple[str, str], int], kind: str, record: dict[str, Any], keys: tuple[str, ...]
) -> int:
    """A thread's or run's JSON size, cached by id and ``updated_at``: a quota check does
    not re-encode a client's unchanged records on every request."""
    key = (f"{kind}:{record.get(f'{kind}_id')}", str(record.get("updated_at")))
    if key not in sizes:
        if len(sizes) >= SIZES_KEPT:
            sizes.clear()
        sizes[key] = json_size({k: record.get(k) for k in keys})
    return sizes[key]


def _checkpoint_bytes(thread_ids: Iterable[str]) -> int:
    """The serialised checkpoint history of these threads in the in-memory checkpointer
    (bytes as stored: nothing is encoded to count them)."""
    from langgraph_runtime_inmem import checkpoint  # the server's runtime, not ours

    storage = getattr(checkpoint.MEMORY, "storage", None) or {}
    total = 0
    for thread_id in thread_ids:
        if thread_id not in storage:  # a defaultdict: never index a missing key
            continue
        for namespace in storage[thread_id].values():
            for entry in namespace.values():
                for part in entry[:2]:  # (checkpoint, metadata) as (type, bytes)
                    if isinstance(part, tuple) and isinstance(part[-1], bytes | bytearray):
                        total += len(part[-1])
    return total


def _owned_runs(store: dict[str, Any], client: str, threads: set[str]) -> list[dict[str, Any]]:
    return [
        r
        for r in store["runs"]
        if str(r["thread_id"]) in threads or (r.get("metadata") or {}).get("owner") == client
    ]


def _owned_threads(store: dict[str, Any], client: str) -> list[dict[str, Any]]:
    return [t for t in store["threads"] if (t.get("metadata") or {}).get("owner") == client]


def _active(runs: Iterable[dict[str, Any]]) -> int:
    return sum(1 for r in runs if r["status"] in ACTIVE)


def usage(store: dict[str, Any], client: str, sizes: dict[tuple[str, str], int]) -> Usage:
    """The client's threads, active runs and stored bytes in this store."""
    threads = _owned_threads(store, client)
    owned = {str(t["thread_id"]) for t in threads}
    runs = _owned_runs(store, client, owned)
    stored = sum(
        _record_size(sizes, "thread", t, ("metadata", "values", "config")) for t in threads
    )
    stored += sum(_record_size(sizes, "run", r, ("metadata", "kwargs")) for r in runs)
    stored += _checkpoint_bytes(owned)
    return Usage(len(threads), _active(runs), stored)

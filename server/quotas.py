"""What each client of a shared server holds, and the quotas that bound it.

The LangGraph server keeps threads and runs in its runtime: in memory, in this process,
or shared by every replica in PostgreSQL (server/shared_records.py reads those); every
thread carries its creator in ``metadata.owner`` (server/auth.py). A client's
usage is read from there when it asks for more: its threads, its runs pending or
running (on its threads: a run has the thread's owner), and the bytes its thread
records, its run records and its threads' checkpoint history hold. Quotas refuse with
a 429 and a ``Retry-After``; a client's cap on active runs is what keeps its backlog
from holding the one worker's queue from the others.

Two layers read the same counts. The middleware (server/app.py) refuses early and
kindly; the auth handler that LangGraph calls as it inserts a run (server/auth.py)
*reserves* the run's place with ``reserve_run``: counting and reserving happen with no
``await`` between them, so a burst of parallel requests, which all pass the
middleware seeing the same count, cannot all be queued.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tools.config import Settings

ACTIVE = ("pending", "running")
RUN_RETRY_AFTER_S = 15  # about half an answer on the 2-core machine
STORED_RETRY_AFTER_S = 600  # until the client deletes threads: not soon
# A reservation bridges the moment between the auth handler's count and the run's
# insertion (one await: the runtime logs a new thread, in an executor): it counts until
# its run is in the runtime's records, or this long at most. Short, because a run
# without a thread is deleted when it ends, so a fast one may never be seen in the
# records, and a long life counted it as active (a 60 s one refused sequential runs).
RESERVATION_TTL_S = 1.0
SIZES_KEPT = 10_000  # cached record sizes: (id, updated_at) -> bytes


@dataclass(frozen=True)
class Usage:
    threads: int
    active_runs: int
    stored_bytes: int


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str
    retry_after_s: int | None = None


def _size(record: Any) -> int:
    return len(json.dumps(record, default=str))


_sizes: dict[tuple[str, str], int] = {}


def _record_size(kind: str, record: dict[str, Any], keys: tuple[str, ...]) -> int:
    """A thread's or run's JSON size, cached by id and ``updated_at``: a quota check does
    not re-encode a client's unchanged records on every request."""
    key = (f"{kind}:{record.get(f'{kind}_id')}", str(record.get("updated_at")))
    if key not in _sizes:
        if len(_sizes) >= SIZES_KEPT:
            _sizes.clear()
        _sizes[key] = _size({k: record.get(k) for k in keys})
    return _sizes[key]


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


def _usage(store: dict[str, Any], client: str) -> Usage:
    threads = _owned_threads(store, client)
    owned = {str(t["thread_id"]) for t in threads}
    runs = _owned_runs(store, client, owned)
    active = _active(runs)
    stored = sum(_record_size("thread", t, ("metadata", "values", "config")) for t in threads)
    stored += sum(_record_size("run", r, ("metadata", "kwargs")) for r in runs)
    stored += _checkpoint_bytes(owned)
    return Usage(len(threads), active, stored)


async def usage_of(client: str, settings: Settings) -> Usage:
    """The client's share of the runtime's threads, runs and checkpoints: this process's
    in-memory runtime, or the replicas' shared one (server/shared_records.py)."""
    if settings.server_runtime == "shared":
        from server import shared_records

        return Usage(*await shared_records.owned(client))
    from langgraph_runtime_inmem.database import connect  # the server's runtime, not ours

    async with connect() as conn:
        return _usage(conn.store, client)


async def thread_metadata(thread_id: str, settings: Settings) -> dict[str, Any] | None:
    """The metadata a thread holds in the runtime, or None when there is no such thread."""
    if settings.server_runtime == "shared":
        from server import shared_records

        return await shared_records.thread_metadata(thread_id)
    from langgraph_runtime_inmem.database import connect  # the server's runtime, not ours

    async with connect() as conn:
        for thread in conn.store["threads"]:
            if str(thread["thread_id"]) == str(thread_id):
                return thread.get("metadata")
    return None


_reserved: dict[str, dict[str, float]] = {}  # client -> run id -> when reserved


async def reserve_run(client: str, run_id: str, settings: Settings) -> Refusal | None:
    """Count the client's active runs and, if one more is allowed, reserve its place:
    atomic on the server's event loop (nothing between the count and the reservation
    awaits), or across replicas in one locked transaction (shared runtime). The
    reservation ends when the run appears in the runtime's records."""
    cap = settings.client_max_active_runs
    if settings.server_runtime == "shared":
        from server import shared_records

        active = await shared_records.reserve(client, run_id, cap, RESERVATION_TTL_S)
        return None if active is None else _too_many_runs(active)
    from langgraph_runtime_inmem.database import connect  # the server's runtime, not ours

    async with connect() as conn:
        return reserve(conn.store, _reserved, client, run_id, cap, time.monotonic())


def reserve(
    store: dict[str, Any],
    reserved: dict[str, dict[str, float]],
    client: str,
    run_id: str,
    cap: int,
    now: float,
) -> Refusal | None:
    """``reserve_run`` on a given store and reservation book, at time ``now``."""
    threads = {str(t["thread_id"]) for t in _owned_threads(store, client)}
    recorded = {str(r["run_id"]) for r in store["runs"]}
    mine = reserved.setdefault(client, {})
    for held, since in list(mine.items()):
        if held in recorded or now - since > RESERVATION_TTL_S:
            del mine[held]
    active = _active(_owned_runs(store, client, threads)) + len(mine)
    if active >= cap:
        return _too_many_runs(active)
    mine[run_id] = now
    return None


def _too_many_runs(active: int) -> Refusal:
    return Refusal(
        429,
        f"you have {active} runs pending or running, the most client_max_active_runs "
        "allows: wait for one to finish",
        RUN_RETRY_AFTER_S,
    )


def metadata_total_problem(
    current: dict[str, Any] | None, patch: Any, settings: Settings
) -> Refusal | None:
    """A PATCH merges metadata: the merged whole must fit, not only the patch."""
    merged = {**(current or {}), **(patch if isinstance(patch, dict) else {})}
    return metadata_problem({"metadata": merged}, settings)


def metadata_problem(body: Any, settings: Settings) -> Refusal | None:
    """A request's ``metadata`` over ``client_max_metadata_bytes``."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    size = _size(metadata) if metadata is not None else 0
    if size > settings.client_max_metadata_bytes:
        return Refusal(
            422,
            f"'metadata' is {size} bytes of JSON, over client_max_metadata_bytes="
            f"{settings.client_max_metadata_bytes}",
        )
    return None


def quota_problem(
    usage: Usage, settings: Settings, *, new_thread: bool, run: bool
) -> Refusal | None:
    """The quota a request would break, if any. ``new_thread``: it may create a thread."""
    stored_mb = usage.stored_bytes / 1e6
    if stored_mb > settings.client_max_stored_mb:
        return Refusal(
            429,
            f"your threads hold {stored_mb:.1f} MB, over client_max_stored_mb="
            f"{settings.client_max_stored_mb:g}: delete some (DELETE /threads/ID)",
            STORED_RETRY_AFTER_S,
        )
    if new_thread and usage.threads >= settings.client_max_threads:
        return Refusal(
            429,
            f"you keep {usage.threads} threads, the most client_max_threads allows: delete "
            "some (DELETE /threads/ID) or continue one",
            STORED_RETRY_AFTER_S,
        )
    if run and usage.active_runs >= settings.client_max_active_runs:
        return _too_many_runs(usage.active_runs)
    return None

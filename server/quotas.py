"""What each client of a shared server holds, and the quotas that bound it.

The LangGraph server keeps threads and runs in its runtime: in memory, in this process
(server/memory_records.py), or shared by every replica in PostgreSQL
(server/shared_records.py). Each runtime's records are one object with the same three
questions (``Records``), chosen once from ``server_runtime``. Every thread carries its
creator in ``metadata.owner`` (server/auth.py). A client's usage is read from there
when it asks for more: its threads, its runs pending or running (on its threads: a run
has the thread's owner), and the bytes its records and checkpoints hold. Quotas refuse
with a 429 and a ``Retry-After``; a client's cap on active runs is what keeps its
backlog from holding the one worker's queue from the others.

Two layers read the same counts. The middleware (server/app.py) refuses early and
kindly; the auth handlers that LangGraph calls as it inserts a thread or a run
(server/auth.py), from whatever route, *reserve* the place with ``reserve_thread`` and
``reserve_run``: counting and reserving are atomic (no ``await`` between them in this
process; one locked transaction across replicas), so a burst of parallel requests,
which all pass the middleware seeing the same count, cannot all be admitted.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from tools.config import Settings

ACTIVE = ("pending", "running")
RUN_RETRY_AFTER_S = 15  # about half an answer on the 2-core machine
STORED_RETRY_AFTER_S = 600  # until the client deletes threads: not soon
# A reservation bridges the moment between the auth handler's count and the insertion
# of its thread or run (a few awaits): it counts until the record is in the runtime, or
# this long at most. Short, because a run without a thread is deleted when it ends, so
# a fast one may never be seen in the records, and a long life counted it as active (a
# 60 s one refused sequential runs).
RESERVATION_TTL_S = 1.0


class Place(Enum):
    """What a reservation holds a place for."""

    RUN = "run"  # an active run, against client_max_active_runs
    THREAD = "thread"  # a new thread, against client_max_threads


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


class Records(Protocol):
    """One runtime's threads and runs, as the quotas read them."""

    async def usage(self, client: str) -> Usage:
        """The client's threads, active runs and stored bytes."""

    async def thread_metadata(self, thread_id: str) -> dict[str, Any] | None:
        """The metadata a thread holds, or None when there is no such thread."""

    async def reserve(self, client: str, place: Place, key: str, cap: int) -> int | None:
        """Count the client's runs (or threads) and live reservations and, below ``cap``,
        reserve one more under ``key`` (a run's id; a thread's or its run's id) until
        that record is in the runtime or ``RESERVATION_TTL_S`` has passed: None when
        reserved, else the count that refused it."""


@functools.cache
def _records(runtime: str) -> Records:
    if runtime == "shared":
        from server.shared_records import SharedRecords

        return SharedRecords()
    from server.memory_records import MemoryRecords

    return MemoryRecords()


def records(settings: Settings) -> Records:
    """The records of the runtime this server runs (``server_runtime``), made once."""
    return _records(settings.server_runtime)


async def reserve_run(client: str, run_id: str, settings: Settings) -> Refusal | None:
    """Hold a place among the client's active runs for this run, or refuse (429)."""
    cap = settings.client_max_active_runs
    active = await records(settings).reserve(client, Place.RUN, run_id, cap)
    return None if active is None else _too_many_runs(active)


async def reserve_thread(client: str, key: str, settings: Settings) -> Refusal | None:
    """Hold a place among the client's threads for a thread about to be made, or refuse
    (429). ``key``: the new thread's id, or the id of the run that makes it."""
    cap = settings.client_max_threads
    threads = await records(settings).reserve(client, Place.THREAD, key, cap)
    return None if threads is None else _too_many_threads(threads)


def _too_many_runs(active: int) -> Refusal:
    return Refusal(
        429,
        f"you have {active} runs pending or running, the most client_max_active_runs "
        "allows: wait for one to finish",
        RUN_RETRY_AFTER_S,
    )


def _too_many_threads(threads: int) -> Refusal:
    return Refusal(
        429,
        f"you keep {threads} threads, the most client_max_threads allows: delete "
        "some (DELETE /threads/ID) or continue one",
        STORED_RETRY_AFTER_S,
    )


def json_size(record: Any) -> int:
    return len(json.dumps(record, default=str))


def metadata_total_problem(
    current: dict[str, Any] | None, patch: Any, settings: Settings
) -> Refusal | None:
    """A PATCH merges metadata: the merged whole must fit, not only the patch."""
    merged = {**(current or {}), **(patch if isinstance(patch, dict) else {})}
    return metadata_problem({"metadata": merged}, settings)


def metadata_problem(body: Any, settings: Settings) -> Refusal | None:
    """A request's ``metadata`` over ``client_max_metadata_bytes``."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    size = json_size(metadata) if metadata is not None else 0
    if size > settings.client_max_metadata_bytes:
        return Refusal(
            422,
            f"'metadata' is {size} bytes of JSON, over client_max_metadata_bytes="
            f"{settings.client_max_metadata_bytes}",
        )
    return None


def stored_problem(usage: Usage, settings: Settings) -> Refusal | None:
    """The client's records over ``client_max_stored_mb``, if they are."""
    stored_mb = usage.stored_bytes / 1e6
    if stored_mb > settings.client_max_stored_mb:
        return Refusal(
            429,
            f"your threads hold {stored_mb:.1f} MB, over client_max_stored_mb="
            f"{settings.client_max_stored_mb:g}: delete some (DELETE /threads/ID)",
            STORED_RETRY_AFTER_S,
        )
    return None


async def check_stored(client: str, settings: Settings) -> Refusal | None:
    """``stored_problem`` read where threads and runs are made (server/auth.py): a route
    or transport the middleware does not know still stores nothing past the cap."""
    return stored_problem(await records(settings).usage(client), settings)


def quota_problem(
    usage: Usage, settings: Settings, *, new_thread: bool, run: bool
) -> Refusal | None:
    """The quota a request would break, if any. ``new_thread``: it may create a thread."""
    if refusal := stored_problem(usage, settings):
        return refusal
    if new_thread and usage.threads >= settings.client_max_threads:
        return _too_many_threads(usage.threads)
    if run and usage.active_runs >= settings.client_max_active_runs:
        return _too_many_runs(usage.active_runs)
    return None

"""What each client of a shared server holds, and the quotas that bound it.

The LangGraph server keeps threads and runs in its in-memory runtime, in this process;
every thread carries its creator in ``metadata.owner`` (server/auth.py). A client's
usage is read from there when it asks for more: its threads, its runs pending or
running (on its threads: a run has the thread's owner), and the bytes its thread
records hold. Quotas refuse with a 429 and a ``Retry-After``; a client's cap on active
runs is what keeps its backlog from holding the one worker's queue from the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tools.config import Settings

ACTIVE = ("pending", "running")
RUN_RETRY_AFTER_S = 15  # about half an answer on the 2-core machine
STORED_RETRY_AFTER_S = 600  # until the client deletes threads: not soon


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


def _size(record: dict[str, Any]) -> int:
    return len(json.dumps(record, default=str))


async def usage_of(client: str) -> Usage:
    """The client's share of the in-memory runtime's threads and runs."""
    from langgraph_runtime_inmem.database import connect  # the server's runtime, not ours

    async with connect() as conn:
        threads = [
            t for t in conn.store["threads"] if (t.get("metadata") or {}).get("owner") == client
        ]
        owned = {t["thread_id"] for t in threads}
        active = sum(
            1 for r in conn.store["runs"] if r["thread_id"] in owned and r["status"] in ACTIVE
        )
        stored = sum(
            _size({k: t.get(k) for k in ("metadata", "values", "config")}) for t in threads
        )
    return Usage(len(threads), active, stored)


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
        return Refusal(
            429,
            f"you have {usage.active_runs} runs pending or running, the most "
            f"client_max_active_runs allows: wait for one to finish",
            RUN_RETRY_AFTER_S,
        )
    return None

"""A client's threads, runs and checkpoints in the shared runtime's PostgreSQL tables
(``server_runtime = shared``; server/shared_runtime.py), for the quotas.

The same counts as the in-memory runtime's (server/quotas.py), read with SQL through
the runtime's own connection pool (asynchronous: nothing blocks the event loop), so
every replica sees every replica's threads and runs. Sizes are PostgreSQL's stored
sizes of the same records, not their JSON length: near it, and what the database holds.

A run's place is reserved across replicas: a transaction takes an advisory lock on the
client, counts its active runs and live reservations, and inserts its reservation, so
two replicas given a burst of one client's requests cannot both admit the last place.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

RESERVATIONS = """
CREATE TABLE IF NOT EXISTS rag_run_reservations (
    run_id TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    reserved_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""

# the client's threads (by metadata.owner) and runs (on those threads, or stamped with it)
OWNED = """
WITH mine AS (
    SELECT thread_id, pg_column_size(metadata) + coalesce(pg_column_size("values"), 0)
        + pg_column_size(config) AS bytes
    FROM threads WHERE metadata @> jsonb_build_object('owner', CAST(:client AS TEXT))
), their_runs AS (
    SELECT status, pg_column_size(metadata) + pg_column_size(kwargs) AS bytes
    FROM runs
    WHERE thread_id IN (SELECT thread_id FROM mine)
       OR metadata @> jsonb_build_object('owner', CAST(:client AS TEXT))
), ids AS (SELECT thread_id::text AS id FROM mine)
SELECT
    (SELECT count(*) FROM mine) AS threads,
    (SELECT count(*) FROM their_runs WHERE status IN ('pending', 'running')) AS active,
    coalesce((SELECT sum(bytes) FROM mine), 0)
    + coalesce((SELECT sum(bytes) FROM their_runs), 0)
    + coalesce((SELECT sum(pg_column_size(checkpoint) + pg_column_size(metadata))
                FROM checkpoints WHERE thread_id IN (SELECT id FROM ids)), 0)
    + coalesce((SELECT sum(octet_length(blob)) FROM checkpoint_blobs
                WHERE thread_id IN (SELECT id FROM ids)), 0)
    + coalesce((SELECT sum(octet_length(blob)) FROM checkpoint_writes
                WHERE thread_id IN (SELECT id FROM ids)), 0) AS stored
"""


_made = False  # this process has seen the reservations table made


async def _reservations_table(session: Any) -> None:
    """Create the reservations table until this process has seen it committed (not on
    every run request), under a lock: IF NOT EXISTS alone fails when two replicas'
    first reservations race."""
    if not _made:
        lock = "SELECT pg_advisory_xact_lock(hashtext('rag_run_reservations'))"
        await session.execute(text(lock))
        await session.execute(text(RESERVATIONS))


def _sessions() -> Any:
    from langgraph_runtime_pg.database import get_session_factory  # the server's runtime

    return get_session_factory()


async def owned(client: str) -> tuple[int, int, int]:
    """(threads, runs pending or running, bytes stored) of ``client``."""
    async with _sessions()() as session:
        return await _owned_in(session, client)


async def reserve(client: str, run_id: str, cap: int, ttl_s: float) -> int | None:
    """Reserve one more active run for ``client`` if it has fewer than ``cap`` (runs
    pending or running, and reservations younger than ``ttl_s`` whose run is not yet in
    the records); None when reserved, else the count that refused it."""
    global _made
    refused = await _reserve(client, run_id, cap, ttl_s)
    _made = True  # committed with the table
    return refused


async def _reserve(client: str, run_id: str, cap: int, ttl_s: float) -> int | None:
    async with _sessions()() as session, session.begin():
        await _reservations_table(session)
        await session.execute(
            text("SELECT pg_advisory_xact_lock(hashtext('rag-runs:' || :client))"),
            {"client": client},
        )
        await session.execute(
            text(
                "DELETE FROM rag_run_reservations WHERE client = :client AND ("
                "reserved_at < now() - make_interval(secs => :ttl) "
                "OR run_id IN (SELECT run_id::text FROM runs))"
            ),
            {"client": client, "ttl": ttl_s},
        )
        _, active, _ = await _owned_in(session, client)
        held = (
            await session.execute(
                text("SELECT count(*) FROM rag_run_reservations WHERE client = :client"),
                {"client": client},
            )
        ).scalar_one()
        if active + held >= cap:
            return active + held
        await session.execute(
            text("INSERT INTO rag_run_reservations (run_id, client) VALUES (:run, :client)"),
            {"run": run_id, "client": client},
        )
    return None


async def _owned_in(session: Any, client: str) -> tuple[int, int, int]:
    row = (await session.execute(text(OWNED), {"client": client})).one()
    return int(row.threads), int(row.active), int(row.stored)


async def thread_metadata(thread_id: str) -> dict[str, Any] | None:
    """The metadata a thread holds, or None when there is no such thread."""
    async with _sessions()() as session:
        row = (
            await session.execute(
                text("SELECT metadata FROM threads WHERE thread_id::text = :id"),
                {"id": str(thread_id)},
            )
        ).first()
    return None if row is None else dict(row.metadata or {})

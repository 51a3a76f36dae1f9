"""A client's threads, runs and checkpoints in the shared runtime's PostgreSQL tables
(``server_runtime = shared``; server/shared_runtime.py), for the quotas
(server/quotas.py ``Records``).

The same counts as the in-memory runtime's (server/memory_records.py), read with SQL through
the runtime's own connection pool (asynchronous: nothing blocks the event loop), so
every replica sees every replica's threads and runs. Sizes are PostgreSQL's stored
sizes of the same records, not their JSON length: near it, and what the database holds.

A run's or a new thread's place is reserved across replicas: a transaction takes an
advisory lock on the client, counts its active runs (or threads) and live reservations,
and inserts its reservation, so two replicas given a burst of one client's requests
cannot both admit the last place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from server.quotas import RESERVATION_TTL_S, Place, Usage

# one table per place; a reservation ends when its id is a recorded run (or thread)
RESERVATIONS = {Place.RUN: "rag_run_reservations", Place.THREAD: "rag_thread_reservations"}
RECORDED = {
    Place.RUN: "SELECT run_id::text FROM runs",
    Place.THREAD: "SELECT run_id::text FROM runs UNION ALL SELECT thread_id::text FROM threads",
}
CREATE = """
CREATE TABLE IF NOT EXISTS {table} (
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


def _runtime_sessions() -> Any:
    from langgraph_runtime_pg.database import get_session_factory  # the server's runtime

    return get_session_factory()


class SharedRecords:
    """The shared runtime's records, read with SQL by every replica. ``sessions``: a
    SQLAlchemy async session factory (the runtime's own pool unless given)."""

    def __init__(self, sessions: Callable[[], Any] | None = None) -> None:
        self.sessions = sessions
        self.tables_made = False  # this process has seen the reservations tables made

    def _session(self) -> Any:
        return (self.sessions or _runtime_sessions())()

    async def usage(self, client: str) -> Usage:
        async with self._session() as session:
            return await _owned_in(session, client)

    async def thread_metadata(self, thread_id: str) -> dict[str, Any] | None:
        async with self._session() as session:
            row = (
                await session.execute(
                    text("SELECT metadata FROM threads WHERE thread_id::text = :id"),
                    {"id": str(thread_id)},
                )
            ).first()
        return None if row is None else dict(row.metadata or {})

    async def reserve(self, client: str, place: Place, key: str, cap: int) -> int | None:
        table = RESERVATIONS[place]
        async with self._session() as session, session.begin():
            if not self.tables_made:
                await _make_tables(session)
            await session.execute(
                text(f"SELECT pg_advisory_xact_lock(hashtext('rag-{place.value}s:' || :client))"),
                {"client": client},
            )
            await session.execute(
                text(
                    f"DELETE FROM {table} WHERE client = :client AND ("
                    "reserved_at < now() - make_interval(secs => :ttl) "
                    f"OR run_id IN ({RECORDED[place]}))"
                ),
                {"client": client, "ttl": RESERVATION_TTL_S},
            )
            usage = await _owned_in(session, client)
            held = (
                await session.execute(
                    text(f"SELECT count(*) FROM {table} WHERE client = :client"),
                    {"client": client},
                )
            ).scalar_one()
            count = (usage.threads if place is Place.THREAD else usage.active_runs) + held
            refused = count if count >= cap else None
            if refused is None:
                await session.execute(
                    text(f"INSERT INTO {table} (run_id, client) VALUES (:key, :client)"),
                    {"key": key, "client": client},
                )
        self.tables_made = True  # committed
        return refused


async def _make_tables(session: Any) -> None:
    """Create the reservations tables (until this process has seen them committed, not on
    every request), under a lock: IF NOT EXISTS alone fails when two replicas' first
    reservations race."""
    lock = "SELECT pg_advisory_xact_lock(hashtext('rag_run_reservations'))"
    await session.execute(text(lock))
    for table in RESERVATIONS.values():
        await session.execute(text(CREATE.format(table=table)))


async def _owned_in(session: Any, client: str) -> Usage:
    row = (await session.execute(text(OWNED), {"client": client})).one()
    return Usage(int(row.threads), int(row.active), int(row.stored))

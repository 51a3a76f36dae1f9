"""The shared runtime's records (server/shared_records.py) on a real PostgreSQL with the
runtime's own schema (langgraph-runtime-pg's migrations, langgraph-checkpoint-postgres's
tables): a burst of one client's
parallel reservations admits exactly what its cap leaves, for threads and for runs."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from server.quotas import Place
from server.shared_records import SharedRecords

CAP = 4


@pytest.fixture
def runtime_db(database_url):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph_runtime_pg.migrate import upgrade_head

    upgrade_head(database_url)  # threads, runs...
    with PostgresSaver.from_conn_string(database_url) as saver:
        saver.setup()  # the checkpoint tables
    return database_url.replace("postgresql://", "postgresql+psycopg://", 1)


async def _burst(url: str, place: Place, threads: int, running: int) -> list[int | None]:
    engine = create_async_engine(url)
    records = SharedRecords(async_sessionmaker(engine, expire_on_commit=False))
    try:
        async with engine.begin() as conn:
            for n in range(threads):
                thread = uuid.uuid4()
                await conn.execute(
                    text(
                        "INSERT INTO threads (thread_id, status, metadata) "
                        "VALUES (:t, 'idle', CAST(:m AS jsonb))"
                    ),
                    {"t": thread, "m": json.dumps({"owner": "alice"})},
                )
                if n < running:
                    await conn.execute(
                        text(
                            "INSERT INTO runs (run_id, thread_id, assistant_id, status, "
                            "metadata, kwargs) VALUES (:r, :t, :a, 'running', "
                            "CAST('{}' AS jsonb), CAST('{}' AS jsonb))"
                        ),
                        {"r": uuid.uuid4(), "t": thread, "a": uuid.uuid4()},
                    )
        assert await records.reserve("bob", place, "warm-up", CAP) is None  # tables made
        keys = [str(uuid.uuid4()) for _ in range(12)]
        return await asyncio.gather(*(records.reserve("alice", place, k, CAP) for k in keys))
    finally:
        await engine.dispose()


@pytest.mark.parametrize(("place", "threads", "running"), [(Place.THREAD, 3, 0), (Place.RUN, 3, 3)])
def test_twelve_parallel_reservations_at_cap_minus_one_admit_exactly_one(
    runtime_db, place, threads, running
):
    results = asyncio.run(_burst(runtime_db, place, threads, running))
    assert results.count(None) == 1 and sorted(set(results) - {None}) == [CAP], results

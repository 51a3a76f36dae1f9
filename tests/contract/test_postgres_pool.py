"""The store's pooled connections on a real PostgreSQL: bounded, reused, and back by
themselves after the database drops every connection (as a restart does)."""

from __future__ import annotations

import psycopg
import pytest

from tools.store import postgres as pg


def _backends(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchone()[0]


def test_requests_reuse_a_bounded_set_of_connections(database_url):
    for _ in range(50):  # fifty requests' worth of registry reads
        with pg.borrowed(database_url) as conn:
            pg.collection_names(conn)
    assert 1 <= _backends(database_url) <= pg.POOL_MAX


def test_borrowing_recovers_after_the_database_drops_every_connection(database_url):
    with pg.borrowed(database_url) as conn:
        conn.row_factory = psycopg.rows.dict_row  # a borrower's own setting...
        conn.execute("SET search_path TO pg_catalog")
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with pg.borrowed(database_url) as conn:  # a dead one is replaced, not handed out
        row = conn.execute("SELECT current_setting('search_path')").fetchone()
    assert row[0] == '"$user", public'  # ...is not the next borrower's


def test_an_unreachable_database_is_a_database_error_naming_what_to_check():
    url = "postgresql://rag:secret@127.0.0.1:1/rag"
    with (
        pytest.raises(pg.DatabaseError, match="RAG_DATABASE_URL") as caught,
        pg.borrowed(url, wait_s=1.0),
    ):
        pass
    assert "secret" not in str(caught.value)
    pg.close_pools()

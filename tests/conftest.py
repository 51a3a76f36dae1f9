"""Shared fixtures. Tests never read the user's rag.toml or RAG_* variables."""

from __future__ import annotations

import os

import pytest

from tools.config import Settings, load_settings


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("RAG_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def settings() -> Settings:
    return load_settings()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    from bench.local_service import LocalPostgres

    server = LocalPostgres(tmp_path_factory.mktemp("pgdata") / "pg")
    yield server
    server.stop()


@pytest.fixture
def database_url(postgres_server):
    """A fresh database on the session's real PostgreSQL, for ``store = postgres``; this
    process's pooled connections to it are closed after the test (as at a process's end),
    so a session of many databases never holds idle connections to all of them."""
    from tools.store.postgres import close_pools

    yield postgres_server.new_database()
    close_pools()

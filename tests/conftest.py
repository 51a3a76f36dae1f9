"""Shared fixtures. Tests never read the user's rag.toml or RAG_* variables."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

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
def postgres_server():
    """The session's PostgreSQL, its data outside pytest's temporary folders: a second
    pytest process starting meanwhile (a developer's, or a test's own) prunes all but
    the newest three of those, and took a running server's data folder with it (every
    later [postgres] test then failed with 'connection refused')."""
    from bench.local_service import LocalPostgres

    folder = Path(tempfile.mkdtemp(prefix="rag-test-pg-"))
    server = LocalPostgres(folder / "pg")
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def database_url(postgres_server):
    """A fresh database on the session's real PostgreSQL, for ``store = postgres``; this
    process's pooled connections to it are closed after the test (as at a process's end),
    so a session of many databases never holds idle connections to all of them."""
    from tools.store.postgres import close_pools

    yield postgres_server.new_database()
    close_pools()

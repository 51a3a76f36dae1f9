"""Where collections live, behind one protocol (``tools.store.protocol.Backend``), one
module per backend, registered by name in ``tools.store.backends.BACKENDS``:
``store = "embedded"`` keeps each collection in files under ``data_dir`` (an SQLite
manifest with its FTS5 keyword index, and Chroma's vectors; ``tools.store.embedded``);
``store = "postgres"`` keeps all of it in one PostgreSQL + pgvector database
(``tools.store.pg_backend``), so several servers and ingestion workers share it.

``UNREACHABLE`` is what any store raises while it cannot be reached (a database down or
restarting): the servers answer it with a 503 and ``Retry-After``, and name no driver.
``STORAGE_FAILED`` is what a write to the embedded store's files raises when the disk or
the data directory refuses it (a full disk, a read-only folder)."""

import sqlite3

from tools.store.postgres import UNREACHABLE

STORAGE_FAILED: tuple[type[BaseException], ...] = (OSError, sqlite3.Error)

__all__ = ["STORAGE_FAILED", "UNREACHABLE"]

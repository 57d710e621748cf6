"""A PostgresStore that cannot write, for tools that inspect a database.

Every transaction of its connections is read-only
(``default_transaction_read_only``), so even a bug further on could not
change what is inspected. The schema is checked first through one direct
connection, whose error says why a server cannot be reached (a pool's would
only time out); a schema without a store is refused untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from swarmstate._checks import hide_password
from swarmstate._errors import StorageError
from swarmstate.backends.postgres.driver import ConnectionPool, psycopg, sql
from swarmstate.backends.postgres.store import PostgresStore

__all__ = ["check_schema", "open_readonly"]


def _read_only(conn: Any) -> None:
    """Make every later transaction of ``conn`` (autocommit: every statement) read-only."""
    conn.execute("SET default_transaction_read_only = on")


def check_schema(conninfo: str, schema: str, *, timeout: int) -> None:
    """Refuse, through one read-only connection, a server we cannot reach or an empty schema.

    ``timeout`` is in seconds (libpq takes an integer).
    """
    failed: str | None = None
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout) as conn:
            _read_only(conn)
            meta = sql.SQL("{}.meta").format(sql.Identifier(schema)).as_string(conn)
            row = conn.execute("SELECT to_regclass(%s)", (meta,)).fetchone()
    except psycopg.Error as exc:
        # libpq may quote the connection string, password and all: our own
        # message, without it, raised outside the except block (no chain).
        failed = hide_password(str(exc), conninfo)
    if failed is not None:
        raise StorageError(f"cannot read from PostgreSQL: {failed}")
    if row is None or row[0] is None:
        raise StorageError(
            f"no swarmstate store in schema {schema!r} of that database; "
            "pass the schema it uses with --schema"
        )


@contextmanager
def open_readonly(
    conninfo: str, *, schema: str, timeout: int, name: str
) -> Iterator[PostgresStore]:
    """The store in ``schema`` at ``conninfo``, read-only for the ``with`` block.

    ``name`` names the pool; ``timeout`` (seconds) bounds connecting and waiting for one.
    """
    check_schema(conninfo, schema, timeout=timeout)
    pool: ConnectionPool[Any] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=2,
        kwargs={"autocommit": True, "connect_timeout": timeout},
        configure=_read_only,
        timeout=timeout,
        open=True,
        name=name,
    )
    try:
        with PostgresStore(pool=pool, schema=schema) as store:
            yield store
    finally:
        pool.close()

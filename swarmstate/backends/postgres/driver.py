"""psycopg plumbing for PostgresStore: the imports, pooled connections, results kept, a probe.

The only module that imports psycopg and psycopg_pool: without them, importing
the PostgreSQL backend raises :class:`~swarmstate.MissingDependencyError`.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from swarmstate._checks import hide_password
from swarmstate._errors import InvalidArgumentError, MissingDependencyError, StorageError

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import pq, sql
    from psycopg.rows import tuple_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"PostgresStore needs psycopg 3 and psycopg_pool ({exc.name} is missing): "
        'pip install "pyswarmstate[postgres]"'
    ) from exc

__all__ = [
    "AsyncConnectionPool",
    "AsyncPooledConnection",
    "ConnectionPool",
    "PoolTimeout",
    "PooledConnection",
    "keep",
    "pg_errors",
    "probe",
    "psycopg",
    "rollback_quietly",
    "rollback_quietly_async",
    "safe_conninfo",
    "sql",
    "tuple_row",
]


class PooledConnection(psycopg.Connection[Any]):
    """A connection of a pool the store owns, keeping one cursor for its statements.

    A cursor caches the adapters it looked up, so reusing one saves about a
    tenth of a small call's client time. The pool hands a connection to one
    thread at a time. The cursor keeps its last result until the next
    statement, so a large one is dropped with the cursor (see keep).
    """

    hot_cursor: psycopg.Cursor[tuple[Any, ...]] | None = None


class AsyncPooledConnection(psycopg.AsyncConnection[Any]):
    """A connection of an async pool the store owns, keeping a cursor as :class:`PooledConnection`.

    The pool hands a connection to one task at a time.
    """

    hot_cursor: psycopg.AsyncCursor[tuple[Any, ...]] | None = None


# A result at most this big may stay with a pooled connection's cursor.
_KEEP_ROWS = 64
_KEEP_BYTES = 1 << 20


def keep(rows: list[tuple[Any, ...]]) -> bool:
    """Whether a result is small enough to leave referenced by the hot cursor."""
    if len(rows) > _KEEP_ROWS:
        return False
    size = 0
    for row in rows:
        for value in row:
            if type(value) is bytes:
                size += len(value)
    return size <= _KEEP_BYTES


def safe_conninfo(conninfo: str) -> str:
    """``conninfo`` without its password, for repr and messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "<unparsable conninfo>"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()) if k != "passfile")


def rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    """End a failed transaction before the connection goes back to the pool.

    Autocommit connections are already idle after an error; the pool closes
    one that is still busy (interrupted mid-query) or broken.
    """
    if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        with suppress(psycopg.Error):
            conn.rollback()


async def rollback_quietly_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`rollback_quietly` for an async connection."""
    if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        with suppress(psycopg.Error):
            await conn.rollback()


PROBE_TIMEOUT = 5
"""Seconds the first connection of a new store may take (unless the conninfo sets its own)."""


def probe(conninfo: str | None) -> None:
    """Connect once, so that a bad conninfo or an unreachable database fails now, by its cause.

    A pool connects in the background and reports a failure only as a
    timeout of the first call that needs a connection (30 seconds later),
    the cause left in its log lines.
    """
    assert conninfo is not None
    # libpq's errors may quote the connection string, password and all: each
    # is raised as our own message with the password hidden, outside the
    # except block, so that no exception in the chain holds it.
    refused: str | None = None
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        refused = cause_of(exc, conninfo)
    if refused is not None:
        raise InvalidArgumentError(
            f"conninfo {safe_conninfo(conninfo)!r} is not a PostgreSQL connection string: "
            f"{refused} (use a postgresql:// URL or libpq key=value text)"
        )
    timeout = params.get("connect_timeout") or PROBE_TIMEOUT
    try:
        dsn = psycopg.conninfo.make_conninfo(conninfo, connect_timeout=timeout)
        psycopg.connect(dsn, autocommit=True).close()
    except psycopg.Error as exc:
        refused = cause_of(exc, conninfo)
    if refused is not None:
        raise StorageError(
            f"cannot connect to PostgreSQL with {safe_conninfo(conninfo)!r}: {refused}"
        )


def cause_of(exc: psycopg.Error, conninfo: str) -> str:
    """libpq's error text on one line, without the password ``conninfo`` holds."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return hide_password(" ".join(lines), conninfo) or type(exc).__name__

"""psycopg plumbing for PostgresStore: the imports, pooled connections, results kept.

The only module that imports psycopg and psycopg_pool: without them, importing
the PostgreSQL backend raises :class:`~swarmstate.MissingDependencyError`.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from swarmstate._errors import MissingDependencyError

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import pq, sql
    from psycopg.rows import tuple_row
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"PostgresStore needs psycopg 3 and psycopg_pool ({exc.name} is missing): "
        'pip install "pyswarmstate[postgres]"'
    ) from exc

__all__ = [
    "ConnectionPool",
    "PoolTimeout",
    "PooledConnection",
    "keep",
    "pg_errors",
    "psycopg",
    "rollback_quietly",
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

"""Open what a command names: a DiskStore file or a PostgreSQL database, read-only but for prune.

:func:`open_store` cannot write: the file is opened with
``DiskStore(readonly=True)``, and a PostgreSQL connection runs every
transaction read-only (``default_transaction_read_only``), so even a bug
further on could not change what is inspected. :func:`open_writable`, for
``prune`` alone, first checks the target the same read-only way (a missing,
empty or foreign file, or a schema without a store, is refused untouched),
then opens it read-write.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._checks import hide_password
from swarmstate._errors import StorageError

__all__ = ["READ_WAIT", "InputError", "is_dsn", "open_store", "open_writable", "raw_entries"]

READ_WAIT = 1.0
"""Seconds a read may wait for a lock (a WAL reader waits only for brief steps
such as crash recovery by another process, never for a write transaction)."""

_PAGE = 256
_CONNECT_TIMEOUT = 10  # seconds; libpq takes an integer
_DSN_SCHEMES = ("postgresql://", "postgres://")


class InputError(Exception):
    """The input does not hold what the command asked for (a thread, a checkpoint)."""


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a file.

    A URL (``postgresql://...``) always does; a libpq ``key=value`` string
    does when no file of that name exists.
    """
    if target.startswith(_DSN_SCHEMES):
        return True
    return "=" in target and not os.path.lexists(target)


@contextmanager
def open_store(target: str, *, schema: str = "swarmstate") -> Iterator[BaseStore]:
    """The store at ``target``, opened read-only for the ``with`` block."""
    if is_dsn(target):
        with _postgres(target, schema) as store:
            yield store
        return
    from swarmstate.backends.disk import DiskStore

    with DiskStore(target, readonly=True, busy_timeout=READ_WAIT) as disk:
        yield disk


@contextmanager
def open_writable(target: str, *, schema: str = "swarmstate") -> Iterator[BaseStore]:
    """The store at ``target``, checked as :func:`open_store` does, then opened read-write."""
    if is_dsn(target):
        backend = importlib.import_module("swarmstate.backends.postgres")
        _check_schema(target, schema)
        with backend.PostgresStore(target, schema=schema) as store:
            yield store
        return
    from swarmstate.backends.disk import DiskStore

    DiskStore(target, readonly=True, busy_timeout=READ_WAIT).close()  # refuses, untouched
    with DiskStore(target) as disk:
        yield disk


def _read_only(conn: Any) -> None:
    """Make every later transaction of ``conn`` (autocommit: every statement) read-only."""
    conn.execute("SET default_transaction_read_only = on")


def _check_schema(conninfo: str, schema: str) -> None:
    """Refuse, through one read-only connection, a server we cannot reach or an empty schema.

    A direct connection's error says why (a pool's would only time out).
    """
    import psycopg
    from psycopg import sql

    failed: str | None = None
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=_CONNECT_TIMEOUT) as conn:
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
def _postgres(conninfo: str, schema: str) -> Iterator[BaseStore]:
    # The backend first: without the postgres extra its error names the extra.
    backend = importlib.import_module("swarmstate.backends.postgres")
    from psycopg_pool import ConnectionPool

    _check_schema(conninfo, schema)
    pool: ConnectionPool[Any] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=2,
        kwargs={"autocommit": True, "connect_timeout": _CONNECT_TIMEOUT},
        configure=_read_only,
        timeout=_CONNECT_TIMEOUT,
        open=True,
        name="swarmstate-cli",
    )
    try:
        with backend.PostgresStore(pool=pool, schema=schema) as store:
            yield store
    finally:
        pool.close()


def raw_entries(store: BaseStore, namespace: str) -> Iterator[tuple[str, bytes]]:
    """Every ``(key, stored bytes)`` of ``namespace``, a page at a time (never all in memory)."""
    start: str | None = None
    while True:
        # One entry more than a page: the first key of the next one (bounds are inclusive).
        page = store.items(namespace, start=start, limit=_PAGE + 1, raw=True)
        yield from page[:_PAGE]
        if len(page) <= _PAGE:
            return
        start = page[_PAGE][0]

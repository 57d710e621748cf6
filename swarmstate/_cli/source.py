"""Open what a command names: a DiskStore file or a PostgreSQL database, read-only but for prune.

A target means what it means to the saver (:func:`swarmstate.backends.open_store`
tells them apart). :func:`open_store` cannot write: the file is opened with
``DiskStore(readonly=True)``, and a PostgreSQL connection runs every
transaction read-only (``swarmstate.backends.postgres.readonly``), so even a
bug further on could not change what is inspected. :func:`open_writable`, for
``prune`` alone, first checks the target the same read-only way (a missing,
empty or foreign file, or a schema without a store, is refused untouched),
then opens it read-write.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from swarmstate import backends
from swarmstate._base import BaseStore

__all__ = ["READ_WAIT", "InputError", "is_dsn", "open_store", "open_writable", "raw_entries"]

READ_WAIT = 1.0
"""Seconds a read may wait for a lock (a WAL reader waits only for brief steps
such as crash recovery by another process, never for a write transaction)."""

_PAGE = 256
_CONNECT_TIMEOUT = 10  # seconds; libpq takes an integer


class InputError(Exception):
    """The input does not hold what the command asked for (a thread, a checkpoint)."""


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a file.

    The rule of :func:`swarmstate.backends.is_postgres`, which the saver's
    ``from_conn_string`` uses too.
    """
    return backends.is_postgres(target)


@contextmanager
def open_store(target: str, *, schema: str = "swarmstate") -> Iterator[BaseStore]:
    """The store at ``target``, opened read-only for the ``with`` block."""
    if is_dsn(target):
        # The backend first: without the postgres extra its error names the extra.
        from swarmstate.backends.postgres import readonly

        with readonly.open_readonly(
            target, schema=schema, timeout=_CONNECT_TIMEOUT, name="swarmstate-cli"
        ) as store:
            yield store
        return
    with backends.open_store(_file(target), readonly=True, busy_timeout=READ_WAIT) as disk:
        yield disk


@contextmanager
def open_writable(target: str, *, schema: str = "swarmstate") -> Iterator[BaseStore]:
    """The store at ``target``, checked as :func:`open_store` does, then opened read-write."""
    if is_dsn(target):
        from swarmstate.backends.postgres import readonly

        readonly.check_schema(target, schema, timeout=_CONNECT_TIMEOUT)
        with backends.open_store(target, schema=schema) as store:
            yield store
        return
    # Refused, untouched, as the read-only open refuses it.
    backends.open_store(_file(target), readonly=True, busy_timeout=READ_WAIT).close()
    with backends.open_store(_file(target)) as disk:
        yield disk


def _file(target: str) -> str:
    """``target`` as a file's path: the command reads what exists, not a new in-memory store."""
    if target == backends.MEMORY:
        return f"./{target}"
    return target


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

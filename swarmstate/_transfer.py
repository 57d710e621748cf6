"""Copy a store's current state into another store, whatever their backends.

This is how a DiskStore file moves into PostgreSQL (and back)::

    with DiskStore("state.db") as disk, PostgresStore.from_conn_string(url) as pg:
        pg.setup()
        swarmstate.transfer(disk, pg)
"""

from __future__ import annotations

from swarmstate._base import BaseStore
from swarmstate._errors import InvalidArgumentError

__all__ = ["transfer"]


def transfer(source: BaseStore, target: BaseStore, *, batch_size: int = 1000) -> int:
    """Copy every entry of ``source`` into ``target``; returns how many were copied.

    Copies the current state only, not snapshots. Namespaces are read in
    pages of ``batch_size`` keys, each page written with one atomic
    ``target.set_many``, so memory stays bounded however large the store.
    Entries already in ``target`` under the same ``(namespace, key)`` are
    replaced; others are left alone (start from an empty target for an exact
    copy).

    The copy as a whole is not one transaction: stop writers to ``source``
    while it runs if you need a consistent cut, or copy from a store
    restored to a snapshot.

    Raises:
        InvalidArgumentError: ``batch_size`` is not a positive int, or
            ``source`` and ``target`` are the same object.
    """
    if type(batch_size) is not int or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    if source is target:
        raise InvalidArgumentError("source and target are the same store; nothing to transfer")
    copied = 0
    for namespace in source.namespaces():
        start: str | None = None
        while True:
            # The stored bytes move as they are: no decode, no re-encode.
            page = source.items(namespace, start=start, limit=batch_size, raw=True)
            if not page:
                break
            copied += target.set_many([(namespace, key, value) for key, value in page], raw=True)
            if len(page) < batch_size:
                break
            # The smallest string after the last key: resume right past it.
            start = page[-1][0] + "\x00"
    return copied

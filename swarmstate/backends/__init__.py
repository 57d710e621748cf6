"""The stores: ``memory`` (``Store``), ``disk`` (one SQLite file) and ``postgres``.

:func:`open_store` is the one place a connection string or path becomes a
store; the saver's ``from_conn_string`` and the ``swarmstate`` command both
call it, so a target means the same thing to each. Its rule is
:func:`is_postgres`. A backend is imported only when a target names it, so a
missing extra costs nothing until then.
"""

from __future__ import annotations

import os
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._errors import InvalidArgumentError

__all__ = ["MEMORY", "is_postgres", "open_store"]

MEMORY = ":memory:"
"""The target of a new, empty in-memory ``Store``."""

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than a file.

    A ``postgresql://`` or ``postgres://`` URL always does; libpq
    ``key=value`` text (any ``=``) does when no file of that name exists, so
    a file whose name holds ``=`` still opens as the file.
    """
    if target.startswith(_POSTGRES_SCHEMES):
        return True
    return "=" in target and not os.path.lexists(target)


def open_store(target: str, **options: Any) -> BaseStore:
    """The store ``target`` names, opened with ``options``; the caller closes it.

    ``":memory:"`` is a new in-memory ``Store``; a PostgreSQL URL or libpq
    text (:func:`is_postgres`) a ``PostgresStore``; anything else the path of
    a ``DiskStore`` file. ``options`` go to that store's constructor
    (``schema=``, ``synchronous=``, ``readonly=``, ...).
    """
    if type(target) is not str or not target:
        raise InvalidArgumentError(
            f"a store's target must be a non-empty str (a file path, {MEMORY!r} or a "
            f"PostgreSQL URL), got {target!r}"
        )
    if target == MEMORY:
        from swarmstate.backends.memory import Store

        return Store(**options)
    if is_postgres(target):
        from swarmstate.backends.postgres import PostgresStore

        return PostgresStore(target, **options)
    from swarmstate.backends.disk import DiskStore

    return DiskStore(target, **options)

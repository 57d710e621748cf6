"""PostgresStore's writes off the one-statement path: long names, and schemas not yet migrated.

Nearly every write is one statement (:meth:`PostgresStore._put_many`,
:meth:`PostgresStore._put_required`). These are the others: a batch holding
a name longer than the index keeps (schema version 6 on), and the forms a
schema needs until ``setup()`` brings it to the current version (before 5,
``ensure`` as two calls; before 7, conditions read first in the same
transaction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarmstate._base import check_conditions
from swarmstate._checks import Requirement, Row
from swarmstate._errors import StorageError
from swarmstate.backends.postgres.driver import psycopg, tuple_row
from swarmstate.backends.postgres.names import Arrays, with_long_forms

if TYPE_CHECKING:
    from swarmstate.backends.postgres import PostgresStore

__all__ = ["ensure_before_v5", "long_names", "required"]


def required(
    store: PostgresStore,
    rows: list[Row],
    if_absent: bool,
    ensure: list[Row],
    require: list[Requirement],
) -> int:
    """The conditions, then the write, in one transaction of several round trips.

    For batches with long names, and for schemas setup() has not yet
    brought to version 7.
    """
    found_as = store._found_as
    pairs = {
        "ns": [found_as(ns) for (ns, _), _ in require],
        "key": [found_as(key) for (_, key), _ in require],
    }
    lock, get_many = store._sql["LOCK"], store._sql["GET_MANY"]

    def work(conn: psycopg.Connection[Any]) -> int:
        with conn.transaction():
            # The store lock first, as every writer takes it: nothing can
            # change between the check and the write.
            with conn.pipeline():
                conn.cursor().execute(lock)
                cur = conn.cursor(row_factory=tuple_row, binary=True)
                cur.execute(get_many, pairs)
            found: list[bytes | None] = [None] * len(require)
            for ordinal, data in cur.fetchall():
                found[ordinal - 1] = bytes(data)
            check_conditions(require, found)  # raises: the transaction rolls back
            if not rows and not ensure:
                return 0
            store._held.conn = conn
            try:
                return store._put_many(rows, if_absent, ensure)
            finally:
                store._held.conn = None

    return store._run(work)


def long_names(
    store: PostgresStore,
    defaults: Arrays | None,
    params: Arrays | None,
    if_absent: bool,
    items: int,
) -> int:
    """A batch holding a name longer than the index holds (schema version 6)."""
    p_args = with_long_forms(params)
    if defaults is None:
        ns, key, value, long_ns, long_key = p_args
        written = int(
            store._scalar("PUT_MANY_LONG", (ns, key, value, if_absent, long_ns, long_key))
        )
        return written if if_absent else items
    e_args = with_long_forms(defaults)
    written = int(store._scalar("PUT_ENSURE_LONG", (*e_args, *p_args[:3], if_absent, *p_args[3:])))
    if if_absent:
        return written
    return written - len(p_args[0]) + items


def ensure_before_v5(
    store: PostgresStore,
    defaults: Arrays,
    params: Arrays | None,
    if_absent: bool,
    items: int,
) -> int:
    """``set_many(ensure=)`` on a schema not yet migrated to version 5.

    Until ``setup()`` runs, the two ``put_many`` calls go in one
    transaction (one round trip): the ensured entries, then the items.
    """
    text = store._sql["PUT_MANY"]

    def work(conn: psycopg.Connection[Any]) -> int:
        with conn.pipeline():
            first = conn.cursor(row_factory=tuple_row, binary=True)
            first.execute(text, defaults)
            if params is not None:
                second = conn.cursor(row_factory=tuple_row, binary=True)
                second.execute(text, params)
        total = int(_one(first.fetchone()))
        if params is not None:
            total += int(_one(second.fetchone())) if if_absent else items
        return total

    return store._run(work)


def _one(row: tuple[Any, ...] | None) -> Any:
    if row is None:  # a SELECT of one function call always returns one row
        raise StorageError("PostgreSQL returned no row for put_many")
    return row[0]

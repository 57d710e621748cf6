"""How DiskStore writes: the path each write takes, and what each path runs.

A write takes the first of these paths that fits it; each later path is the
fallback of the ones before, and tells apart what made them fall through.

1. **One statement**, its own transaction (:meth:`.Connections.one_statement`),
   the cheapest write, all or nothing:

   * ``set()``: ``PUT_FAST`` (insert, or overwrite a row no snapshot needs);
   * ``set_many`` whose conditions are each "this key has no value" or "this
     key has a value", with nothing to ensure (the LangGraph saver's every
     write to a thread nobody claimed, which also requires that the
     checkpoints it took stored bytes from exist; :func:`unless`): one row
     under one "no value", ``PUT_FAST_UNLESS``; up to 8 rows under up to 8
     conditions, :func:`.statements.put_fast_when`; ``if_absent`` with 1 to 32
     rows under one "no value" (pending writes), ``PUT_IF_ABSENT_UNLESS[n]``;
   * ``write`` of one set under up to 8 conditions, each that a key has no
     value, has one, or that a key range is empty (a checkpoint under its
     thread's guard): :func:`one_row`, :func:`.statements.put_one_when`.

   Nothing is written when the condition fails, when a row a snapshot still
   needs would be overwritten, or when the file is busy: path 2 (no
   condition) or 3 then runs.
2. **One write transaction** (:meth:`.Connections.write`, ``BEGIN IMMEDIATE``),
   row by row (:func:`batch`): every other ``set_many`` without conditions,
   and ``set()`` when ``PUT_FAST`` changed nothing. The ensured rows first
   (:func:`ensure_absent`), then each row with :func:`put` or
   :func:`put_if_absent`.
3. **The checked transaction** (:func:`checked`): ``set_many(require=...)``
   that path 1 did not write. Each condition's key is read inside the
   transaction and checked (:class:`~swarmstate.ConflictError` when one
   breaks), then path 2's statements run in the same transaction. Every
   ``write`` that path 1 did not write runs :func:`transaction` likewise: its
   conditions (the first that breaks is named; many on one namespace are
   answered by one range read, :func:`first_unmet`), then :func:`delete_prefix`,
   :func:`delete`, :func:`delete_tagged` and path 2's statements (for sets
   with tags, :func:`put_tagged`).

``delete_many`` and ``delete_prefix`` are such transactions with nothing but
deletes. The statements are in :mod:`.statements`, in the same order.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from swarmstate._base import check_conditions, prefix_upper_bound
from swarmstate._checks import (
    ABSENT,
    PRESENT,
    Absent,
    Checked,
    Condition,
    Empty,
    Holds,
    Pair,
    Present,
    Requirement,
    Row,
    TagRange,
    WriteResult,
    conflict,
)
from swarmstate.backends.disk import statements
from swarmstate.backends.disk.connections import Connections
from swarmstate.backends.disk.driver import Connection

__all__ = [
    "Params",
    "batch",
    "checked",
    "delete",
    "delete_prefix",
    "delete_tagged",
    "ensure_absent",
    "one_row",
    "put",
    "put_if_absent",
    "put_tagged",
    "transaction",
    "unless",
]

Params = tuple[str, str, int, bytes]
"""A row as the statements bind it: namespace, key, size, value."""

Body = Callable[[Connection], int]
"""What a write transaction runs; returns what the write returns."""


# -- path 1 --------------------------------------------------------------------


def unless(
    db: Connections, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
) -> int:
    """Path 1 of ``set_many(require=...)``: the rows written by one statement, or 0.

    0 when the batch has no one-statement shape (a condition on a value's
    bytes, rows to ensure, too many rows or conditions; for ``if_absent``, a
    condition other than one ``ABSENT``) or the statement wrote nothing: the
    caller then runs path 3 (:func:`checked`).
    """
    if ensure or not all(expected is ABSENT or expected is PRESENT for _, expected in require):
        return 0
    if if_absent:
        if len(require) != 1 or require[0][1] is not ABSENT:
            return 0
        if not 0 < len(rows) <= statements.PUT_IF_ABSENT_UNLESS_MAX:
            return 0
        bound: list[object] = [*require[0][0]]
        for pair, data in rows:
            bound += (pair[0], pair[1], len(data), data)
        # The condition held when any row is written; any other key had a value.
        return db.one_statement(
            statements.PUT_IF_ABSENT_UNLESS[len(rows)], tuple(bound), count=True
        )
    if len(require) == 1 and len(rows) == 1 and require[0][1] is ABSENT:  # the hot path
        (ns, key), data = rows[0]
        condition = require[0][0]
        one = (ns, key, len(data), data, condition[0], condition[1])
        return 1 if db.one_statement(statements.PUT_FAST_UNLESS, one) else 0
    if (
        not 0 < len(rows) <= statements.PUT_FAST_WHEN_MAX
        or len(require) > statements.PUT_FAST_WHEN_MAX
    ):
        return 0
    bound = []
    for pair, _ in require:
        bound += pair
    for pair, data in rows:
        bound += (pair[0], pair[1], len(data), data)
    statement = statements.put_fast_when(
        len(rows), tuple(expected is ABSENT for _, expected in require)
    )
    written = db.one_statement(statement, tuple(bound), count=True)
    return written if written == len(rows) else 0


def one_row(db: Connections, txn: Checked) -> int:
    """Path 1 of ``write``: a transaction of one set on its conditions, as one statement; or 0.

    0 when the transaction has another shape (deletes, several rows, a
    :class:`~swarmstate.Holds` condition, more than
    :data:`.statements.PUT_ONE_WHEN_MAX` conditions) or the statement wrote
    nothing: the caller then runs :func:`transaction`. The row's tags, if
    any, are written in the same statement.
    """
    conditions = txn.conditions
    if (
        len(txn.rows) != 1
        or txn.deletes
        or txn.prefixes
        or txn.tag_deletes
        or len(conditions) > statements.PUT_ONE_WHEN_MAX
    ):
        return 0
    (ns, key), data = txn.rows[0]
    bound: list[object] = [ns, key, len(data), data]
    if txn.tags is not None:
        bound += txn.tags[0]
    shape: list[tuple[str, bool, bool]] = []
    for condition in conditions:
        kind = type(condition)
        if kind is Empty:
            assert isinstance(condition, Empty)
            start, stop = condition.start, condition.stop
            shape.append(("empty", start is not None, stop is not None))
            bound.append(condition.namespace)
            if start is not None:
                bound.append(start)
            if stop is not None:
                bound.append(stop)
        elif kind is Absent or kind is Present:
            assert isinstance(condition, Absent | Present)
            shape.append(("absent" if kind is Absent else "present", False, False))
            bound += (condition.namespace, condition.key)
        else:
            return 0
    statement = statements.put_one_when(tuple(shape), txn.if_absent, txn.tags is not None)
    return 1 if db.one_statement(statement, tuple(bound)) else 0


# -- paths 2 and 3 -------------------------------------------------------------


def transaction(txn: Checked) -> Callable[[Connection], WriteResult]:
    """``write``'s transaction body: the conditions, then prefix, key and tag deletes, then sets."""
    conditions, rows, pairs, prefixes, if_absent, tags, ranges = txn
    params = _params(rows)
    write: Callable[[Connection, list[Params]], int] = put_if_absent if if_absent else put
    if tags is not None:
        tagged = [(*row, *pair) for row, pair in zip(params, tags, strict=True)]

        def write(conn: Connection, _: list[Params]) -> int:
            return put_tagged(conn, tagged, if_absent)

    def body(conn: Connection) -> WriteResult:
        # Inside the write transaction: nothing can change between check and write.
        unmet = first_unmet(conn, conditions)
        if unmet is not None:
            raise conflict(unmet)
        deleted = 0
        for prefix in prefixes:
            deleted += delete_prefix(conn, prefix)
        if pairs:
            deleted += delete(conn, pairs)
        for tag, start, stop in ranges:
            deleted += delete_tagged(conn, (tag, start, stop))
        return WriteResult(write(conn, params) if params else 0, deleted)

    return body


BATCHED_FROM = 16
"""Conditions on one namespace from which :func:`first_unmet` answers them by one range read."""

_Span = tuple[list[str], dict[str, bytes]]
"""The live rows of a key range: its keys in order, and each key's value."""


def first_unmet(conn: Connection, conditions: list[Condition]) -> Condition | None:
    """The first of ``conditions`` that does not hold, read inside the caller's transaction.

    Where one namespace has many conditions (a copy of a thread keeps its
    source as read by one for each entry and one for each gap between them),
    one range read answers them all: the live rows from their lowest bound to
    their highest, at most one more than the keys they name. A range holding
    more keys than that (keys no condition names) is checked condition by
    condition, as are namespaces with few conditions.
    """
    spans = _spans(conn, conditions) if len(conditions) >= BATCHED_FROM else {}
    for condition in conditions:
        span = spans.get(condition.namespace)
        if not (holds(conn, condition) if span is None else _holds_in(span, condition)):
            return condition
    return None


def _spans(conn: Connection, conditions: list[Condition]) -> dict[str, _Span]:
    """The whole key range of each namespace with many of ``conditions``, where it is small."""
    by_namespace: dict[str, list[Condition]] = {}
    for condition in conditions:
        by_namespace.setdefault(condition.namespace, []).append(condition)
    spans: dict[str, _Span] = {}
    for namespace, group in by_namespace.items():
        if len(group) < BATCHED_FROM:
            continue
        named: set[str] = set()
        lows: list[str | None] = []
        highs: list[str | None] = []
        for condition in group:
            if type(condition) is Empty:
                lows.append(condition.start)
                highs.append(condition.stop)
            else:
                assert isinstance(condition, Absent | Present | Holds)
                named.add(condition.key)
                lows.append(condition.key)
                highs.append(condition.key + "\x00")  # the least key above it
        low = None if None in lows else min(low for low in lows if low is not None)
        high = None if None in highs else max(high for high in highs if high is not None)
        query = statements.RANGE_SQL[("key, value", low is not None, high is not None, False)]
        rows: list[Any] = conn.execute(query, (namespace, low, high, len(named) + 1)).fetchall()
        if len(rows) <= len(named):  # the whole range, and no more keys than named
            spans[namespace] = ([key for key, _ in rows], dict(rows))
    return spans


def _holds_in(span: _Span, condition: Condition) -> bool:
    """Whether ``condition`` holds, given every live row of a range that covers it."""
    found, values = span
    if type(condition) is Empty:
        start, stop = condition.start, condition.stop
        at = 0 if start is None else bisect.bisect_left(found, start)
        return at == len(found) or (stop is not None and found[at] >= stop)
    assert isinstance(condition, Absent | Present | Holds)
    if type(condition) is Holds:
        return values.get(condition.key) == condition.data
    present = condition.key in values
    return present if type(condition) is Present else not present


def holds(conn: Connection, condition: Condition) -> bool:
    """Whether ``condition`` holds, read inside the caller's transaction."""
    if type(condition) is Empty:
        start, stop = condition.start, condition.stop
        query = statements.EMPTY_SQL[(start is not None, stop is not None)]
        bounds = tuple(bound for bound in (start, stop) if bound is not None)
        return conn.execute(query, (condition.namespace, *bounds)).fetchone() is None
    assert isinstance(condition, Absent | Present | Holds)
    pair = (condition.namespace, condition.key)
    if type(condition) is Holds:
        row = conn.execute(statements.GET, pair).fetchone()
        return row is not None and row[0] == condition.data
    found = conn.execute(statements.EXISTS, pair).fetchone() is not None
    return found if type(condition) is Present else not found


def batch(rows: list[Row], if_absent: bool, ensure: list[Row]) -> Body:
    """Path 2: the transaction body writing ``ensure`` (where absent), then ``rows``."""
    params = _params(rows)
    write = put_if_absent if if_absent else put
    if ensure:
        defaults = _params(ensure)
        return lambda conn: ensure_absent(conn, defaults) + write(conn, params)
    return lambda conn: write(conn, params)


def checked(
    rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
) -> Body:
    """Path 3: the body checking ``require`` inside the transaction, then writing as path 2."""
    params = _params(rows)
    defaults = _params(ensure)
    write = put_if_absent if if_absent else put

    def body(conn: Connection) -> int:
        # Inside the write transaction: nothing can change between check and write.
        found: list[bytes | None] = []
        for pair, expected in require:
            # "absent" and "present" need no value: a lookup of the key alone.
            if expected is ABSENT or expected is PRESENT:
                row = conn.execute(statements.EXISTS, pair).fetchone()
                found.append(None if row is None else b"")
            else:
                row = conn.execute(statements.GET, pair).fetchone()
                found.append(None if row is None else row[0])
        check_conditions(require, found)
        return (ensure_absent(conn, defaults) if defaults else 0) + (
            write(conn, params) if params else 0
        )

    return body


def put(conn: Connection, rows: list[Params]) -> int:
    """Write rows, keeping any current row a snapshot still needs as a past row.

    Most rows are new keys or keys written since the latest snapshot: one
    PUT_FAST each. Only a row whose current version a snapshot needs (PUT_FAST
    changed nothing) pays for ending that version and inserting anew.
    """
    execute, changes = conn.execute, conn.changes
    for row in rows:
        execute(statements.PUT_FAST, row)
        if not changes():
            execute(statements.END_OLD, (row[0], row[1]))
            execute(statements.PUT, row)
    return len(rows)


def put_tagged(
    conn: Connection,
    rows: list[tuple[str, str, int, bytes, str | None, str | None]],
    if_absent: bool,
) -> int:
    """:func:`put` or :func:`put_if_absent` of rows bound with their tags (order, group)."""
    execute, changes = conn.execute, conn.changes
    written = 0
    for row in rows:
        if if_absent:
            execute(statements.PUT_IF_ABSENT_TAGGED, row)
            written += changes()
            continue
        execute(statements.PUT_FAST_TAGGED, row)
        if not changes():
            execute(statements.END_OLD, (row[0], row[1]))
            execute(statements.PUT_TAGGED, row)
        written += 1
    return written


def put_if_absent(conn: Connection, rows: list[Params]) -> int:
    """Insert the rows whose key has no live value; how many were inserted."""
    written = 0
    for row in rows:
        conn.execute(statements.PUT_IF_ABSENT, row)
        written += conn.changes()
    return written


def ensure_absent(conn: Connection, rows: list[Params]) -> int:
    """Insert the rows whose key has no live value.

    Ensured rows usually exist already (an index entry written once): a
    lookup says so, cheaper than an INSERT that finds the conflict, and
    changes no page.
    """
    written = 0
    for row in rows:
        if conn.execute(statements.EXISTS, (row[0], row[1])).fetchone() is None:
            conn.execute(statements.PUT_IF_ABSENT, row)
            written += conn.changes()
    return written


def delete(conn: Connection, pairs: list[Pair]) -> int:
    """Remove the live values of ``pairs``; how many there were."""
    removed = 0
    for pair in pairs:
        conn.execute(statements.DELETE_NEW, pair)
        gone = conn.changes()
        if not gone:
            conn.execute(statements.END_LIVE, pair)
            gone = conn.changes()
        removed += gone
    return removed


def delete_prefix(conn: Connection, prefix: str) -> int:
    """Remove the live values of every namespace under ``prefix``; how many there were."""
    high = prefix_upper_bound(prefix)
    flag = high is not None
    bounds = (prefix,) if high is None else (prefix, high)
    conn.execute(statements.PREFIX_DELETE_NEW_SQL[flag], bounds)
    removed = conn.changes()
    conn.execute(statements.PREFIX_END_SQL[flag], bounds)
    return int(removed + conn.changes())


def delete_tagged(conn: Connection, tag_range: TagRange) -> int:
    """Remove the live entries whose tag is in the range; how many there were."""
    tag, start, stop = tag_range
    shape = (tag, start is not None, stop is not None)
    bounds = tuple(bound for bound in (start, stop) if bound is not None)
    conn.execute(statements.TAG_DELETE_NEW_SQL[shape], bounds)
    removed = conn.changes()
    conn.execute(statements.TAG_END_SQL[shape], bounds)
    return int(removed + conn.changes())


def _params(rows: list[Row]) -> list[Params]:
    return [(k[0], k[1], len(data), data) for k, data in rows]

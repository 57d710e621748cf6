"""How PostgresStore writes a batch: the statement each write takes, and the ways around it.

Nearly every write is one statement, one round trip (the functions it calls
are in :mod:`..schema`); which one, by what the batch holds:

1. ``set_many`` (:func:`put_many`): ``PUT_MANY`` (``put_many``), or with
   ``ensure`` entries ``PUT_ENSURE`` (``put_ensure``); a batch of at most
   eight entries binds one parameter per value (``PUT_ENSURE_<e>_<n>``,
   arrays built by the server: cheaper to send than arrays).
2. ``set_many(require=...)`` (:func:`put_required`): ``PUT_CHECKED``
   (``put_checked``: the conditions, then ``put_ensure``), likewise
   ``PUT_CHECKED_<c>_<e>_<n>`` for a small batch; a broken condition raises
   in the server and nothing is written.
3. ``write(Transaction(...))`` (:func:`write`): ``WRITE_ALL`` (``write_all``:
   the conditions, then ``remove_range``, ``remove_many`` and ``put_many``),
   long names included; a broken condition raises in the server, naming its
   number, and nothing is written. With tags or tag deletes (version 10):
   ``WRITE_TAGGED`` (``write_tagged``), the same with the tag ranges and
   each entry's tags.

The other ways, each for what the one statement cannot take:

* a batch holding a name longer than the index keeps (schema version 6 on):
  the long-name overloads of ``put_many`` and ``put_ensure``
  (:func:`long_names`);
* a schema ``setup()`` has not yet migrated: before version 5, ``ensure``
  as two ``put_many`` calls in one round trip (:func:`ensure_before_v5`);
  before version 7 (and for long names), conditions read under the store's
  lock and checked here, then the write, in one transaction of several
  round trips (:func:`required`); before version 9, ``write`` likewise
  (:func:`write_in_steps`). Before version 10 a write with tags or tag
  deletes is refused (:func:`before_tags`): the schema has nowhere to keep them.

Each write is a plan (:mod:`..plans`): it yields its statements and the
session's blocking runner, or the async one, runs them; neither has a copy
of what is written here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from swarmstate._base import check_conditions
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
    TagPair,
    WriteResult,
    conflict,
)
from swarmstate._errors import ConflictError, IncompatibleStoreError, StorageError
from swarmstate.backends.postgres import migrations, statements
from swarmstate.backends.postgres.driver import psycopg
from swarmstate.backends.postgres.names import (
    Arrays,
    any_long,
    enc,
    has_long_names,
    put_many_params,
    with_long_forms,
)
from swarmstate.backends.postgres.plans import READY, Atomic, Batch, Fetch, Plan
from swarmstate.backends.postgres.schema import REQUIRE_SQLSTATE
from swarmstate.backends.postgres.session import Session

__all__ = [
    "before_tags",
    "ensure_before_v5",
    "long_names",
    "put_many",
    "put_required",
    "required",
    "set_many",
    "set_required",
    "write",
    "write_in_steps",
]

_TOP = b"\xff"  # greater than every UTF-8 encoding: the open upper bound
_KIND = {Absent: 0, Present: 1, Holds: 2, Empty: 3}  # write_all's condition kinds

_SMALL_BATCH = 8  # entries up to which a statement takes one parameter per value


def set_many(session: Session, rows: list[Row], if_absent: bool, ensure: list[Row]) -> Plan[int]:
    """``set_many`` without conditions (:func:`put_many`), at a fixed version for long names."""
    if not session.settled() and any_long(_names(rows, ensure)):
        return (
            yield from session.fixed_version(lambda: set_many(session, rows, if_absent, ensure))
        )
    return (yield from put_many(session, rows, if_absent, ensure))


def set_required(
    session: Session,
    rows: list[Row],
    if_absent: bool,
    ensure: list[Row],
    require: list[Requirement],
) -> Plan[int]:
    """``set_many(require=...)`` (:func:`put_required`), at a fixed version for long names."""
    if not session.settled() and any_long(_names(rows, ensure, require)):
        return (
            yield from session.fixed_version(
                lambda: set_required(session, rows, if_absent, ensure, require)
            )
        )
    return (yield from put_required(session, rows, if_absent, ensure, require))


def _names(*batches: list[Row] | list[Requirement]) -> Iterator[str]:
    """The namespaces and keys of a write's batches."""
    for batch in batches:
        for (ns, key), _ in batch:
            yield ns
            yield key


def put_many(session: Session, rows: list[Row], if_absent: bool, ensure: list[Row]) -> Plan[int]:
    """``set_many`` without conditions: ``ensure`` (where absent), then ``rows``; the count."""
    defaults = put_many_params(ensure, True) if ensure else None
    params = put_many_params(rows, if_absent)
    if has_long_names(defaults, params):
        yield READY
        if session.version >= migrations.TOKENS_SINCE:
            return (yield from long_names(session, defaults, params, if_absent, len(rows)))
        # Before version 6 the server refuses a name its index cannot hold.
    if defaults is not None:
        yield READY
        if session.version < migrations.PUT_ENSURE_SINCE:
            return (yield from ensure_before_v5(session, defaults, params, if_absent, len(rows)))
    name, args, count = _put_statement(session, defaults, params, if_absent, len(rows))
    found = yield Fetch(name, args)
    return count(int(found[0][0]))


def _put_statement(
    session: Session, defaults: Arrays | None, params: Arrays | None, if_absent: bool, items: int
) -> tuple[str, tuple[Any, ...], Callable[[int], int]]:
    """The one statement writing a batch of short names, and how to count its result."""
    if defaults is None:
        assert params is not None  # rows and ensure are never both empty
        return "PUT_MANY", params, (lambda n: n) if if_absent else (lambda n: items)
    e_ns, e_key, e_value, _ = defaults
    p_ns, p_key, p_value = params[:3] if params is not None else ([], [], [])
    ensured, count = len(e_ns), len(p_ns)
    if ensured + count <= _SMALL_BATCH:
        # Few entries: one bytes parameter each, arrays built by the server.
        name = f"PUT_ENSURE_{ensured}_{count}"
        session.statement(name, lambda: statements.put_ensure_sql(ensured, count))
        args: tuple[Any, ...] = (*e_ns, *e_key, *e_value, *p_ns, *p_key, *p_value, if_absent)
    else:
        name = "PUT_ENSURE"
        args = (e_ns, e_key, e_value, p_ns, p_key, p_value, if_absent)
    if if_absent:
        return name, args, lambda n: n
    # Every distinct item is written; count duplicates as the other stores do.
    return name, args, lambda n: n - count + items


def put_required(
    session: Session,
    rows: list[Row],
    if_absent: bool,
    ensure: list[Row],
    require: list[Requirement],
) -> Plan[int]:
    """``set_many(require=...)``: the conditions and the write in one statement; the count.

    Raises:
        ConflictError: A condition did not hold (nothing was written).
    """
    yield READY
    defaults = put_many_params(ensure, True) if ensure else None
    params = put_many_params(rows, if_absent)
    if session.version < migrations.REQUIRE_SINCE or has_long_names(defaults, params):
        return (yield from required(session, rows, if_absent, ensure, require))
    found_as = session.stored_as
    e_ns, e_key, e_value = defaults[:3] if defaults is not None else ([], [], [])
    p_ns, p_key, p_value = params[:3] if params is not None else ([], [], [])
    c_ns = [found_as(ns) for (ns, _), _ in require]
    c_key = [found_as(key) for (_, key), _ in require]
    c_state = [0 if e is ABSENT else 1 if e is PRESENT else 2 for _, e in require]
    c_value = [e if type(e) is bytes else b"" for _, e in require]
    conditions, ensured, count = len(require), len(e_ns), len(p_ns)
    if conditions + ensured + count <= _SMALL_BATCH:
        # Few entries (every checkpoint): one parameter each, arrays built by the server.
        name = f"PUT_CHECKED_{conditions}_{ensured}_{count}"
        session.statement(name, lambda: statements.put_checked_sql(conditions, ensured, count))
        args: tuple[Any, ...] = (*c_ns, *c_key, *c_state, *c_value)
        args += (*e_ns, *e_key, *e_value, *p_ns, *p_key, *p_value, if_absent)
    else:
        name = "PUT_CHECKED"
        args = (c_ns, c_key, c_state, c_value, e_ns, e_key, e_value)
        args += (p_ns, p_key, p_value, if_absent)
    try:
        written = int((yield Fetch(name, args))[0][0])
    except StorageError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, psycopg.Error) and cause.sqlstate == REQUIRE_SQLSTATE):
            raise
        # Say which condition broke (as the other stores do), from a fresh read.
        check_conditions(require, (yield from _live(session, [pair for pair, _ in require])))
        raise ConflictError(
            "set_many required a condition that did not hold when it was written; "
            "the store changed since it was read: read again and retry"
        ) from None
    if if_absent:
        return written
    return written - len(p_ns) + len(rows)


def _live(session: Session, pairs: list[Pair]) -> Plan[list[bytes | None]]:
    """The values ``pairs`` hold now, as ``get_many(raw=True)`` reads them."""
    found_as = session.stored_as
    rows = yield Fetch(
        "GET_MANY",
        {"ns": [found_as(ns) for ns, _ in pairs], "key": [found_as(k) for _, k in pairs]},
    )
    out: list[bytes | None] = [None] * len(pairs)
    for ordinal, data in rows:
        out[ordinal - 1] = data if type(data) is bytes else bytes(data)
    return out


def write(session: Session, txn: Checked) -> Plan[WriteResult]:
    """``store.write``: the conditions, then the writes, in one statement (``write_all``).

    Raises:
        ConflictError: A condition did not hold (nothing was written).
    """
    yield READY
    conditions, rows, pairs, prefixes, if_absent, tags, ranges = txn
    tagged = tags is not None or bool(ranges)
    if tagged and session.version < migrations.TAGS_SINCE:
        raise before_tags(session)
    if session.version < migrations.WRITE_ALL_SINCE:
        return (yield from write_in_steps(session, txn))
    found_as = session.stored_as
    c_kind: list[int] = []
    c_ns: list[bytes] = []
    c_key: list[bytes] = []
    c_value: list[bytes] = []
    for condition in conditions:
        c_kind.append(_KIND[type(condition)])
        c_ns.append(found_as(condition.namespace))
        if type(condition) is Empty:
            c_key.append(b"" if condition.start is None else enc(condition.start))
            c_value.append(_TOP if condition.stop is None else enc(condition.stop))
        else:
            assert isinstance(condition, Absent | Present | Holds)
            c_key.append(found_as(condition.key))
            c_value.append(condition.data if type(condition) is Holds else b"")
    lows = [enc(prefix) for prefix in prefixes]
    doomed = dict.fromkeys((found_as(ns), found_as(key)) for ns, key in pairs)
    if tags is not None:
        params, orders, groups = _tagged_params(rows, tags, if_absent)
    else:
        params = put_many_params(rows, if_absent)
        orders = groups = []  # write_tagged reads them as NULL: no tags
    p_ns, p_key, p_value, ns_long, key_long = with_long_forms(params)
    if not has_long_names(params):
        ns_long = key_long = []  # write_all reads them as NULL: no long name
    args: tuple[Any, ...] = (c_kind, c_ns, c_key, c_value, lows, [low + _TOP for low in lows])
    args += ([ns for ns, _ in doomed], [key for _, key in doomed])
    if tagged:
        t_tag = [0 if tag == "order" else 1 for tag, _, _ in ranges]
        t_lo = [b"" if start is None else enc(start) for _, start, _ in ranges]
        t_hi = [_TOP if stop is None else enc(stop) for _, _, stop in ranges]
        args += (t_tag, t_lo, t_hi)
    args += (p_ns, p_key, p_value, if_absent, ns_long, key_long)
    if tagged:
        args += (orders, groups)
    try:
        written, deleted = (yield Fetch("WRITE_TAGGED" if tagged else "WRITE_ALL", args))[0][0]
    except StorageError as exc:
        cause = exc.__cause__
        if not (isinstance(cause, psycopg.Error) and cause.sqlstate == REQUIRE_SQLSTATE):
            raise
        detail = cause.diag.message_detail or ""
        if not detail.isdigit() or not 0 < int(detail) <= len(conditions):
            raise
        raise conflict(conditions[int(detail) - 1]) from None
    return WriteResult(int(written) if if_absent else len(rows), int(deleted))


def _tagged_params(
    rows: list[Row], tags: list[TagPair], if_absent: bool
) -> tuple[Arrays | None, list[bytes | None], list[bytes | None]]:
    """``put_many``'s arguments with each entry's tags, keys made distinct as it makes them."""
    encoded: dict[tuple[bytes, bytes], tuple[bytes, TagPair]] = {}
    for ((ns, key), data), pair in zip(rows, tags, strict=True):
        names = (enc(ns), enc(key))
        if if_absent:
            encoded.setdefault(names, (data, pair))  # the first of duplicates is inserted
        else:
            encoded[names] = (data, pair)  # later items win
    if not encoded:
        return None, [], []
    kept = list(encoded.values())
    params: Arrays = (
        [ns for ns, _ in encoded],
        [key for _, key in encoded],
        [data for data, _ in kept],
        if_absent,
    )
    orders = [None if order is None else enc(order) for _, (order, _) in kept]
    groups = [None if group is None else enc(group) for _, (_, group) in kept]
    return params, orders, groups


def before_tags(session: Session) -> IncompatibleStoreError:
    """The error of a write with tags on a schema ``setup()`` has not brought to version 10."""
    return IncompatibleStoreError(
        f"schema {session.schema!r} is at version {session.version}, before tags "
        f"(version {migrations.TAGS_SINCE}): call PostgresStore.setup() once to migrate it; "
        "until then a write with tags or tag_deletes is refused and tagged() finds none"
    )


# -- off the one-statement path ---------------------------------------------------


def write_in_steps(session: Session, txn: Checked) -> Plan[WriteResult]:
    """``store.write`` on a schema ``setup()`` has not yet brought to version 9.

    One transaction of several round trips: the store's lock, each condition
    read and checked here, then the existing write functions.
    """
    result: WriteResult = yield Atomic(lambda: _in_steps(session, txn))
    return result


def _in_steps(session: Session, txn: Checked) -> Plan[WriteResult]:
    conditions, rows, pairs, prefixes, if_absent, _, _ = txn  # no tags: see write()
    yield Fetch("LOCK")  # as every writer: nothing changes from here on
    for condition in conditions:
        if not (yield from _holds(session, condition)):
            raise conflict(condition)  # the transaction rolls back
    deleted = 0
    for prefix in prefixes:
        low = enc(prefix)
        deleted += int((yield Fetch("REMOVE_RANGE", {"lo": low, "hi": low + _TOP}))[0][0])
    if pairs:
        found_as = session.stored_as
        doomed = dict.fromkeys((found_as(ns), found_as(key)) for ns, key in pairs)
        named = {"ns": [ns for ns, _ in doomed], "key": [key for _, key in doomed]}
        deleted += int((yield Fetch("REMOVE_MANY", named))[0][0])
    written = (yield from put_many(session, rows, if_absent, [])) if rows else 0
    return WriteResult(written, deleted)


def _holds(session: Session, condition: Condition) -> Plan[bool]:
    """Whether ``condition`` holds, read on the connection of the plan's transaction."""
    ns = session.stored_as(condition.namespace)
    if type(condition) is Empty:
        low = b"" if condition.start is None else enc(condition.start)
        high = _TOP if condition.stop is None else enc(condition.stop)
        if session.version < migrations.READ_RANGE_SINCE:  # no read_range() before version 3
            named = {"ns": ns, "start": low, "stop": high, "limit": 1, "values": False}
            return not (yield Fetch("RANGE_BEFORE_V3_ASC", named))
        return not (yield Fetch("READ_RANGE", (ns, low, high, 1, False, False)))
    assert isinstance(condition, Absent | Present | Holds)
    rows = yield Fetch("GET", (ns, session.stored_as(condition.key)))
    if type(condition) is Absent:
        return not rows
    if type(condition) is Present:
        return bool(rows)
    assert isinstance(condition, Holds)
    return bool(rows) and bytes(rows[0][0]) == condition.data


def required(
    session: Session,
    rows: list[Row],
    if_absent: bool,
    ensure: list[Row],
    require: list[Requirement],
) -> Plan[int]:
    """The conditions, then the write, in one transaction of several round trips.

    For batches with long names, and for schemas setup() has not yet
    brought to version 7.
    """
    written: int = yield Atomic(lambda: _required(session, rows, if_absent, ensure, require))
    return written


def _required(
    session: Session,
    rows: list[Row],
    if_absent: bool,
    ensure: list[Row],
    require: list[Requirement],
) -> Plan[int]:
    found_as = session.stored_as
    pairs = {
        "ns": [found_as(ns) for (ns, _), _ in require],
        "key": [found_as(key) for (_, key), _ in require],
    }
    # The store lock first, as every writer takes it: nothing can change
    # between the check and the write.
    _, current = yield Batch((("LOCK", None), ("GET_MANY", pairs)))
    found: list[bytes | None] = [None] * len(require)
    for ordinal, data in current:
        found[ordinal - 1] = bytes(data)
    check_conditions(require, found)  # raises: the transaction rolls back
    if not rows and not ensure:
        return 0
    return (yield from put_many(session, rows, if_absent, ensure))


def long_names(
    session: Session,
    defaults: Arrays | None,
    params: Arrays | None,
    if_absent: bool,
    items: int,
) -> Plan[int]:
    """A batch holding a name longer than the index holds (schema version 6)."""
    p_args = with_long_forms(params)
    if defaults is None:
        ns, key, value, long_ns, long_key = p_args
        found = yield Fetch("PUT_MANY_LONG", (ns, key, value, if_absent, long_ns, long_key))
        return int(found[0][0]) if if_absent else items
    e_args = with_long_forms(defaults)
    found = yield Fetch("PUT_ENSURE_LONG", (*e_args, *p_args[:3], if_absent, *p_args[3:]))
    written = int(found[0][0])
    if if_absent:
        return written
    return written - len(p_args[0]) + items


def ensure_before_v5(
    session: Session,
    defaults: Arrays,
    params: Arrays | None,
    if_absent: bool,
    items: int,
) -> Plan[int]:
    """``set_many(ensure=)`` on a schema not yet migrated to version 5.

    Until ``setup()`` runs, the two ``put_many`` calls go in one
    transaction (one round trip): the ensured entries, then the items.
    """
    calls: list[tuple[str, Any]] = [("PUT_MANY", defaults)]
    if params is not None:
        calls.append(("PUT_MANY", params))
    found = yield Batch(calls)
    total = int(_one(found[0]))
    if params is not None:
        total += int(_one(found[1])) if if_absent else items
    return total


def _one(rows: list[tuple[Any, ...]]) -> Any:
    if not rows:  # a SELECT of one function call always returns one row
        raise StorageError("PostgreSQL returned no row for put_many")
    return rows[0][0]

"""How PostgresStore reads: each read a plan (:mod:`..plans`), for either runner, blocking or async.

Point reads, ranges, namespaces, counts and tags: the statement each takes,
its parameters, the ways around a schema ``setup()`` has not yet migrated,
and what the rows mean. Every read that passes or reads back a name longer
than :data:`~..schema.HEAD_BYTES` first asks whether the session knows how
the schema stores it (from version 6 on it does); if not, it runs again at a
version fixed for the call (:meth:`..session.Session.fixed_version`): another
process's ``setup()`` may have moved long names to their index form since.
"""

from __future__ import annotations

from typing import Any

from swarmstate._checks import Bound, Limit, Pair
from swarmstate._codec import loads
from swarmstate.backends.postgres import migrations
from swarmstate.backends.postgres.names import any_long, dec, enc
from swarmstate.backends.postgres.plans import READY, Fetch, Plan, Rows
from swarmstate.backends.postgres.schema import HEAD_BYTES
from swarmstate.backends.postgres.session import Session

__all__ = ["count", "get", "get_many", "items", "namespaces", "rows", "tagged"]

TOP = b"\xff"  # greater than every UTF-8 encoding: the open upper bound


def get(session: Session, pair: Pair) -> Plan[bytes | None]:
    """The stored bytes under ``pair``, or None."""
    if not session.settled() and any_long(pair):
        return (yield from session.fixed_version(lambda: get(session, pair)))
    stored_as = session.stored_as
    found = yield Fetch("GET", (stored_as(pair[0]), stored_as(pair[1])))
    return found[0][0] if found else None


def get_many(session: Session, pairs: list[Pair]) -> Plan[list[bytes | None]]:
    """The stored bytes under each pair (at least one), in order, read at one moment."""
    if not session.settled() and any_long(name for pair in pairs for name in pair):
        return (yield from session.fixed_version(lambda: get_many(session, pairs)))
    stored_as = session.stored_as
    params = {"ns": [stored_as(ns) for ns, _ in pairs], "key": [stored_as(k) for _, k in pairs]}
    found = yield Fetch("GET_MANY", params)
    out: list[bytes | None] = [None] * len(pairs)
    for ordinal, data in found:
        # psycopg's pure-Python loader gives a buffer; get_many(raw=True) promises bytes.
        out[ordinal - 1] = data if type(data) is bytes else bytes(data)
    return out


def rows(
    session: Session,
    values: bool,
    namespace: str,
    start: Bound,
    stop: Bound,
    reverse: bool,
    limit: Limit,
) -> Plan[Rows]:
    """``(key bytes, value bytes or None)`` of a key range, ordered, at most ``limit``."""
    if limit == 0:
        return []
    if not session.settled() and any_long((namespace, start, stop)):
        return (
            yield from session.fixed_version(
                lambda: rows(session, values, namespace, start, stop, reverse, limit)
            )
        )
    ns = session.stored_as(namespace)
    lo = b"" if start is None else enc(start)
    hi = TOP if stop is None else enc(stop)
    yield READY
    if session.version < migrations.READ_RANGE_SINCE:
        named = {"ns": ns, "start": lo, "stop": hi, "limit": limit, "values": values}
        found = yield Fetch("RANGE_BEFORE_V3_" + ("DESC" if reverse else "ASC"), named)
    else:
        found = yield Fetch("READ_RANGE", (ns, lo, hi, limit, reverse, values))
    if not session.settled() and any_long(k for k, _ in found):
        return (
            yield from session.fixed_version(
                lambda: rows(session, values, namespace, start, stop, reverse, limit)
            )
        )
    if (
        found
        and max(len(k) for k, _ in found) > HEAD_BYTES
        and max(len(lo), len(hi)) <= HEAD_BYTES  # else read_range sorted already
        and session.version >= migrations.TOKENS_SINCE
    ):
        # Index order is key order except between two keys longer than
        # the head that share it: only a page holding such a key is read again.
        named = {"ns": ns, "start": lo, "stop": hi, "limit": limit, "values": values}
        found = yield Fetch("READ_RANGE_SORTED_" + ("DESC" if reverse else "ASC"), named)
    return found  # type: ignore[no-any-return]


def items(found: Rows, raw: bool) -> list[tuple[str, Any]]:
    """``(key, value)`` of a range's rows: values decoded, or their stored bytes when ``raw``."""
    if raw:
        return [(dec(k), bytes(v)) for k, v in found]
    return [(dec(k), loads(v)) for k, v in found]


def namespaces(session: Session, prefix: str) -> Plan[list[str]]:
    """Namespaces starting with ``prefix``, sorted."""
    lo = enc(prefix)
    found = yield Fetch("NAMESPACES", {"lo": lo, "hi": lo + TOP})
    if not session.settled() and any_long([lo, *(ns for (ns,) in found)]):
        return (yield from session.fixed_version(lambda: namespaces(session, prefix)))
    return [dec(ns) for (ns,) in found]


def count(session: Session, namespace: str) -> Plan[int]:
    """Number of keys in ``namespace``."""
    if not session.settled() and any_long((namespace,)):
        return (yield from session.fixed_version(lambda: count(session, namespace)))
    found = yield Fetch("COUNT", {"ns": session.stored_as(namespace)})
    return int(found[0][0])


def tagged(
    session: Session, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
) -> Plan[list[tuple[str, str, str]]]:
    """``(tag value, namespace, key)`` of live entries by one tag's value (see ``store.tagged``)."""
    yield READY
    if limit == 0 or session.version < migrations.TAGS_SINCE:
        return []  # before version 10 no entry has tags
    name = f"TAGGED_{tag.upper()}_{'DESC' if reverse else 'ASC'}"
    bounds = (b"" if start is None else enc(start), TOP if stop is None else enc(stop), limit)
    found = yield Fetch(name, bounds)
    if any(row[3] for row in found):
        # Index order is name order except between two names longer than
        # the head that share it: such a page is read again, sorted in full.
        found = yield Fetch(name + "_SORTED", bounds)
    return [(dec(value), dec(ns), dec(key)) for value, ns, key, _ in found]

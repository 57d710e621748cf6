"""PostgresStore's snapshots: take, restore, list, and read one through its row versions.

A snapshot is one row of ``snapshots`` naming the store version it saw;
rows are stamped with the version that created and deleted them, so reading
a snapshot selects the row versions live at its version, and a diff reads
only the rows changed between two versions (the SQL is in
:mod:`swarmstate.backends.postgres.statements`). A handle also carries a random token
(schema version 6 on): a copy of the schema keeps the uid but not the
tokens of snapshots taken after the copy, so a handle of one never reads
the other.
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol

from swarmstate._codec import loads
from swarmstate._snapshot import Diff, Snapshot, Source, evicted, foreign, sorted_diff
from swarmstate.backends.postgres import migrations
from swarmstate.backends.postgres.driver import psycopg, tuple_row
from swarmstate.backends.postgres.names import any_long, dec
from swarmstate.backends.postgres.session import Session

__all__ = ["Owner", "diff", "get", "keys", "listed", "restore", "take"]


class Owner(Source, Protocol):
    """The store whose snapshots these are: what their handles read through."""

    max_history: int | None


def take(session: Session, owner: Owner) -> Snapshot:
    """Take a snapshot, evicting the oldest past ``max_history``, under the store lock."""
    session.ready()
    lock, text = session.statement("LOCK"), session.statement("SNAPSHOT")
    evict = session.statement("EVICT")
    keep = owner.max_history
    token = secrets.randbits(63) if session.version >= migrations.TOKENS_SINCE else None

    def work(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
        # All three in one implicit transaction: eviction runs under the lock.
        with conn.pipeline():
            conn.cursor().execute(lock)
            cur = conn.cursor(row_factory=tuple_row, binary=True)
            cur.execute(text, {"token": token})
            if keep is not None:
                conn.cursor().execute(evict, {"keep": keep})
        return cur.fetchone()

    row = session.run(work)
    assert row is not None
    return _from_row(owner, (*row, token))


def restore(session: Session, owner: Owner, snapshot: Snapshot) -> None:
    """Make ``snapshot``'s entries the current ones."""
    rows = session.fetch("RESTORE", _params(snapshot))
    if not rows:  # from version 6: not a snapshot this schema took
        _check_live(session, owner, snapshot)
    if rows[0][0] is None:
        raise evicted(snapshot, owner.max_history)


def listed(session: Session, owner: Owner) -> list[Snapshot]:
    """Every retained snapshot, oldest first."""
    return [_from_row(owner, row) for row in session.fetch("SNAPSHOTS")]


def get(
    session: Session, owner: Owner, snapshot: Snapshot, namespace: str, key: str, default: Any
) -> Any:
    """The value ``snapshot`` saw under ``(namespace, key)``, or ``default``."""
    found_as = session.found_as
    params = {"ns": found_as(namespace), "key": found_as(key), **_params(snapshot)}
    rows = session.fetch("SNAPSHOT_GET", params)
    if rows:
        return loads(rows[0][0])
    # Nothing came back: either absent, or the snapshot is gone (the query
    # reads nothing for an evicted one). Evicted ones never return.
    _check_live(session, owner, snapshot)
    return default


def keys(session: Session, owner: Owner, snapshot: Snapshot) -> list[tuple[str, str]]:
    """Every ``(namespace, key)`` ``snapshot`` saw, sorted."""
    rows = session.fetch("SNAPSHOT_KEYS", _params(snapshot))
    if not session.settled() and any_long(name for row in rows for name in row):
        # Index forms, or long names of a schema not yet migrated: see Session.settled.
        return session.at_fixed_version(lambda: keys(session, owner, snapshot))
    if not rows:
        _check_live(session, owner, snapshot)
    return [(dec(ns), dec(key)) for ns, key in rows]


def diff(session: Session, owner: Owner, base: Snapshot, later: Snapshot) -> Diff:
    """What turns ``base`` into ``later``, read from the rows changed between them."""
    if base.id == later.id:
        _check_live(session, owner, base)
        return sorted_diff([], [], [])
    v_base, v_later = int(base._payload), int(later._payload)
    params = {
        "id1": base.id, "v1": v_base, "t1": base._token,
        "id2": later.id, "v2": v_later, "t2": later._token,
        "need": 2, "lo": min(v_base, v_later), "hi": max(v_base, v_later),
    }  # fmt: skip
    rows = session.fetch("SNAPSHOT_DIFF", params)
    if not session.settled() and any_long(name for row in rows for name in row[:2]):
        return session.at_fixed_version(lambda: diff(session, owner, base, later))
    if not rows:
        _check_live(session, owner, base, later)
    added: list[tuple[str, str]] = []
    removed: list[tuple[str, str]] = []
    changed: list[tuple[str, str]] = []
    forward = v_base < v_later
    for ns, key, at_lo, at_hi in rows:
        pair = (dec(ns), dec(key))
        if at_lo and at_hi:
            changed.append(pair)
        elif at_hi:
            (added if forward else removed).append(pair)
        else:
            (removed if forward else added).append(pair)
    return sorted_diff(added, removed, changed)


def _from_row(owner: Owner, row: tuple[Any, ...]) -> Snapshot:
    snap_id, parent, taken_at, size_bytes, count, version, token = (*row, None)[:7]
    return Snapshot(
        id=int(snap_id),
        parent=None if parent is None else int(parent),
        timestamp=float(taken_at),
        size_bytes=int(size_bytes),
        count=int(count),
        _store=owner,
        _payload=int(version),
        _token=token,
    )


def _params(snapshot: Snapshot) -> dict[str, Any]:
    return {"id": snapshot.id, "v": snapshot._payload, "t": snapshot._token}


def _check_live(session: Session, owner: Owner, *snaps: Snapshot) -> None:
    """Raise for the first snapshot the schema no longer has, or never took."""
    for snap in snaps:
        retained, same_token = session.fetch("IS_LIVE", _params(snap))[0]
        if not retained:
            raise evicted(snap, owner.max_history)
        if not same_token:
            raise foreign(snap)

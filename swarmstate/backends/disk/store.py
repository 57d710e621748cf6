"""DiskStore: the store contract in one SQLite file (apsw, WAL), durable snapshots.

Values and every row version a retained snapshot needs live in one table
(see :mod:`swarmstate.backends.disk.schema` for the layout). A snapshot is one
row recording a version, never a copy; restore and diff read only the rows
written since. Several threads and processes may share the file: threads
read on connections of their own and a process writes through one
(:mod:`swarmstate.backends.disk.connections` says why); fork and closing from
other threads: see :mod:`swarmstate.backends.disk.process`.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from swarmstate._base import BaseStore, prefix_upper_bound
from swarmstate._checks import Bound, Checked, Limit, Pair, Requirement, Row, WriteResult
from swarmstate._codec import loads
from swarmstate._errors import InvalidArgumentError
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot, evicted, foreign, sorted_diff
from swarmstate.backends.disk import opening, statements, writes
from swarmstate.backends.disk import reclaim as reclaiming
from swarmstate.backends.disk.connections import Connections
from swarmstate.backends.disk.driver import Connection, apsw
from swarmstate.backends.disk.readonly import identify_readonly
from swarmstate.backends.disk.schema import SYNCHRONOUS_LEVELS, TAGS_SINCE

__all__ = ["DiskStore"]

_NO_LIMIT = -1  # SQLite's LIMIT for "all rows"


class DiskStore(BaseStore):
    """State keyed by ``(namespace, key)`` in one SQLite file, snapshots included.

    Args:
        path: The database file; created (mode 0600) if missing. Its
            directory must exist.
        synchronous: ``"NORMAL"`` (default: a committed write survives a
            crash of the process; the last commits may be lost if the machine
            loses power) or ``"FULL"`` (a committed write survives power loss,
            at the cost of an fsync per commit).
        max_history: How many snapshots to keep (oldest evicted first, and
            the row versions only they needed are deleted); None keeps all.
            It applies when this handle takes a snapshot.
        busy_timeout: Seconds to wait for another writer's lock before
            raising :class:`~swarmstate.StorageError`; also how long
            :meth:`close` and ``fork()`` wait for calls in flight.
        readonly: Open an existing store for reading only: nothing is
            created or written (the file may be read-only, on read-only
            media), reads never wait behind a writer's transaction, and every
            write raises :class:`~swarmstate.ReadOnlyStoreError`.

    Raises:
        StorageError: The directory is missing, the path is not a regular
            file, or the file cannot be opened (with ``readonly``: the file
            does not exist, or has a ``-wal`` log without the ``-shm`` file
            needed to read it).
        IncompatibleStoreError: The file is not SQLite, was made by something
            else, or by a newer swarmstate (with ``readonly``: also an empty
            file). The file (and its ``-wal``) is left byte for byte as it was.

    Thread-safe and safe for several processes on one host. After ``fork``
    the child opens its own connections on first use.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        max_history: int | None = None,
        busy_timeout: float = 30.0,
        readonly: bool = False,
    ) -> None:
        super().__init__(max_history=max_history)
        level = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if level not in SYNCHRONOUS_LEVELS:
            raise InvalidArgumentError(
                f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}"
            )
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not busy_timeout > 0
        ):
            raise InvalidArgumentError(
                f"busy_timeout must be a positive number of seconds, got {busy_timeout!r}"
            )
        if type(readonly) is not bool:
            raise InvalidArgumentError(f"readonly must be True or False, got {readonly!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"DiskStore takes a file path (str or os.PathLike), got {type(path).__name__}; "
                "it opens the file itself (a sqlite3 or apsw connection cannot be passed in)"
            )
        self.path = Path(os.path.abspath(os.fspath(path)))
        self.synchronous: str = level
        self.busy_timeout = float(busy_timeout)
        self.readonly = readonly
        self._file = str(self.path)
        self._page_size: int | None = None
        self._has_tags = True  # False for an older file opened read-only
        self._db = Connections(
            self._file, readonly=readonly, synchronous=level, busy_timeout=self.busy_timeout
        )
        existed = False if self.readonly else opening.prepare_file(self._file)
        try:
            if self.readonly:
                self._uid, version = identify_readonly(self._db.conn(), self._file)
                self._has_tags = version >= TAGS_SINCE
            else:
                if existed:
                    self._db.retry_busy(
                        lambda: opening.probe(self._file, self.busy_timeout),
                        (apsw.BusyError, apsw.LockedError),
                    )
                self._uid = self._open_file()
        except apsw.Error as exc:
            self.close()
            raise opening.translate(exc, self._file, "open the store") from exc
        except BaseException:
            self.close()
            raise

    def _open_file(self) -> str:
        """Identify the file again, switch it to WAL, set up the schema; the store's uid.

        Processes opening a new file at the same moment contend for it while
        one of them switches the journal mode, and SQLite reports that as
        busy at once, without waiting in its busy handler: the whole sequence
        is retried.
        """
        conn = self._db.new_connection()

        def open_file() -> str:
            opening.identify(conn, self._file)  # as probe() did, should the file have changed since
            opening.use_incremental_vacuum(conn)
            opening.use_wal(conn, self._file)
            return opening.setup(conn, self._file)

        with self._db.write_lock:
            return self._db.retry_busy(open_file, (apsw.BusyError, apsw.LockedError))

    def setup(self) -> None:
        """Create or migrate the schema; idempotent, and already run by the constructor."""
        self._db.check_writable()
        conn = self._db.conn()
        with self._db.write_lock:
            try:
                opening.setup(conn, self._file)
            except apsw.Error as exc:
                raise self._db.fail(exc, "set up the schema") from exc

    # -- reads -----------------------------------------------------------

    def _read(self, pair: Pair) -> bytes | None:
        conn = self._db.conn()
        try:
            row = conn.execute(statements.GET, pair).fetchone()
        except (apsw.Error, UnicodeEncodeError) as exc:
            raise self._db.fail(exc, "read") from exc
        data: bytes | None = None if row is None else row[0]
        return data

    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        def body(conn: Connection) -> list[bytes | None]:
            found = []
            for pair in pairs:
                row = conn.execute(statements.GET, pair).fetchone()
                found.append(None if row is None else row[0])
            return found

        return self._db.read_in("read", body)

    def _range_keys(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[str]:
        return [row[0] for row in self._range("key", namespace, start, stop, reverse, limit)]

    def _range_items(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit, raw: bool
    ) -> list[tuple[str, Any]]:
        rows = self._range("key, value", namespace, start, stop, reverse, limit)
        return rows if raw else [(key, loads(value)) for key, value in rows]

    def _range(
        self,
        columns: str,
        namespace: str,
        start: str | None,
        stop: str | None,
        reverse: bool,
        limit: int | None,
    ) -> list[Any]:
        query = statements.RANGE_SQL[(columns, start is not None, stop is not None, reverse)]
        return self._db.query(
            query, (namespace, start, stop, _NO_LIMIT if limit is None else limit)
        )

    def _namespaces(self, prefix: str) -> list[str]:
        high = prefix_upper_bound(prefix)
        rows = self._db.query(statements.NAMESPACES_SQL[high is not None], _bounds(prefix, high))
        return [row[0] for row in rows]

    def _count(self, namespace: str) -> int:
        return int(self._db.query(statements.COUNT, (namespace,))[0][0])

    def __len__(self) -> int:
        """Entries now; costs the writes since the latest snapshot (O(n) before any)."""
        return int(self._db.query(statements.TOTALS)[0][4])

    # -- writes: which path each takes is in writes.py -------------------

    def _put(self, pair: Pair, data: bytes) -> None:
        if self.readonly:  # tested inline: set is the hot path
            self._db.check_writable()
        params = (pair[0], pair[1], len(data), data)
        # Path 1 covers inserts and overwrites of rows no snapshot needs.
        if not self._db.one_statement(statements.PUT_FAST, params):
            self._db.write("write", lambda conn: writes.put(conn, [params]))

    def _put_many(self, rows: list[Row], if_absent: bool, ensure: list[Row]) -> int:
        return self._db.write("write", writes.batch(rows, if_absent, ensure))

    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        written = writes.unless(self._db, rows, if_absent, ensure, require)
        if written:
            return written
        return self._db.write("write", writes.checked(rows, if_absent, ensure, require))

    def _delete_many(self, pairs: list[Pair]) -> int:
        return self._db.write("delete", lambda conn: writes.delete(conn, pairs))

    def _write(self, transaction: Checked) -> WriteResult:
        self._db.check_writable()
        if writes.one_row(self._db, transaction):
            return WriteResult(1, 0)
        return self._db.write("write", writes.transaction(transaction))

    def _tagged(
        self, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[tuple[str, str, str]]:
        if not self._has_tags:
            return []
        query = statements.TAGGED_SQL[(tag, start is not None, stop is not None, reverse)]
        bounds = tuple(bound for bound in (start, stop) if bound is not None)
        rows = self._db.query(query, (*bounds, _NO_LIMIT if limit is None else limit))
        return [(value, ns, key) for value, ns, key in rows]

    def _delete_prefix(self, prefix: str) -> int:
        deletes = Checked([], [], [], [prefix], False)
        return self._db.write("delete", writes.transaction(deletes)).deleted

    def _copy_prefix(self, source: str, target: str) -> int:
        high = prefix_upper_bound(source)
        cut = len(source)

        def body(conn: Connection) -> int:
            query = statements.PREFIX_ROWS_SQL[high is not None]
            found: list[Any] = conn.execute(query, _bounds(source, high)).fetchall()
            rows = [
                (target + ns[cut:], key, size, value, order, group)
                for ns, key, size, value, order, group in found
            ]
            return writes.put_tagged(conn, rows, False)

        return self._db.write("copy", body)

    def clear(self) -> None:
        def body(conn: Connection) -> None:
            conn.execute(statements.CLEAR_DELETE_NEW)
            conn.execute(statements.CLEAR_END)

        self._db.write("clear", body)

    def _footprint(self, namespace: str, key: str, size: int) -> int:
        """Its table and index cells and overflow pages (see :func:`.reclaim.footprint`)."""
        if self._page_size is None:
            self._page_size = reclaiming.page_size(self._db.conn())
        return reclaiming.footprint(self._page_size, namespace, key, size)

    def _reclaim(self, full: bool) -> ReclaimReport:
        """Free pages back to the file system in short steps (see :mod:`.reclaim`).

        Each step holds the write lock about ``STEP_SECONDS`` (5 ms), then
        lets writers in for at least as long; the final log truncation holds
        new writers back at most ``CHECKPOINT_WAIT`` (20 ms) per try.
        ``full=True`` runs one ``VACUUM`` instead, which blocks writers while
        it rewrites the file.
        """
        self._db.check_writable()
        return reclaiming.reclaim(self._db, full)

    # -- snapshots -------------------------------------------------------

    def snapshot(self) -> Snapshot:
        def body(conn: Connection) -> Snapshot:
            totals: Any = conn.execute(statements.TOTALS).fetchone()
            epoch, _, head, next_id, count, nbytes = totals
            snap = Snapshot(
                id=epoch,
                parent=head,
                timestamp=time.time(),
                size_bytes=nbytes,
                count=count,
                _store=self,
                _token=secrets.randbits(63),
            )
            conn.execute(
                statements.SNAPSHOT_INSERT,
                (snap.id, next_id, snap.parent, snap.timestamp, nbytes, count, snap._token),
            )
            conn.execute(statements.SNAPSHOT_ADVANCE, (snap.id, next_id, count, nbytes))
            if self.max_history is not None:
                _evict(conn, self.max_history)
            return snap

        return self._db.write("take a snapshot", body)

    def _restore(self, snapshot: Snapshot) -> None:
        def body(conn: Connection) -> None:
            mark = self._mark(conn, snapshot)
            epoch_floor: Any = conn.execute(statements.EPOCH_FLOOR).fetchone()
            epoch, floor = epoch_floor
            params = {"m": mark, "v": snapshot.id}
            plan: list[Any] = conn.execute(statements.RESTORE_PLAN, params).fetchall()
            for then, now, then_ended, same in plan:
                if same:
                    continue  # already holds the snapshot's bytes
                if now is not None:
                    conn.execute(
                        statements.DELETE_ROW if now >= floor else statements.END_ROW, (now,)
                    )
                if then is None:
                    continue
                if then_ended == epoch:
                    conn.execute(statements.REVIVE_ROW, (then,))
                else:
                    conn.execute(statements.COPY_ROW, (then,))
            conn.execute(statements.SET_HEAD, (snapshot.id,))

        self._db.write("restore a snapshot", body)

    def snapshots(self) -> list[Snapshot]:
        rows = self._db.query(statements.SNAPSHOT_LIST)
        return [
            Snapshot(sid, parent, timestamp, size_bytes, count, self, _token=token)
            for sid, _, parent, timestamp, size_bytes, count, token in rows
        ]

    def _mark(self, conn: Connection, snapshot: Snapshot) -> int:
        """The snapshot's mark, read inside the caller's transaction; raises if evicted.

        The token tells this file's snapshot from another's with the same id
        (this file is a copy of the one that took it, or was copied from it).
        """
        row = conn.execute(statements.SNAPSHOT_MARK, (snapshot.id,)).fetchone()
        if row is None:
            raise evicted(snapshot, self.max_history)
        if row[1] != snapshot._token:
            raise foreign(snapshot)
        return int(row[0])

    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        self._check_own(snapshot)

        def body(conn: Connection) -> Any:
            mark = self._mark(conn, snapshot)
            row = conn.execute(
                statements.SNAPSHOT_GET, (namespace, key, mark, snapshot.id)
            ).fetchone()
            return default if row is None else loads(row[0])

        return self._db.read_in("read a snapshot", body)

    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        self._check_own(snapshot)

        def body(conn: Connection) -> list[tuple[str, str]]:
            mark = self._mark(conn, snapshot)
            rows: list[Any] = conn.execute(statements.SNAPSHOT_KEYS, (mark, snapshot.id)).fetchall()
            return [(ns, key) for ns, key in rows]

        return self._db.read_in("read a snapshot", body)

    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        def body(conn: Connection) -> Diff:
            a_m, b_m = self._mark(conn, base), self._mark(conn, later)
            (lo, lo_m), (hi, hi_m) = sorted([(base.id, a_m), (later.id, b_m)])
            params = {
                "lo": lo, "lo_m": lo_m, "hi": hi, "hi_m": hi_m,
                "a": base.id, "a_m": a_m, "b": later.id, "b_m": b_m,
            }  # fmt: skip
            added, removed, changed = [], [], []
            for ns, key, a, b, differs in conn.execute(statements.DIFF, params):
                if a is None and b is not None:
                    added.append((ns, key))
                elif b is None and a is not None:
                    removed.append((ns, key))
                elif differs:
                    changed.append((ns, key))
            return sorted_diff(added, removed, changed)

        return self._db.read_in("diff snapshots", body)

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Close every connection this store opened in this process; idempotent.

        Safe while other threads are inside calls: a write in flight is
        allowed to finish, then every connection is closed (a read in flight
        is waited for), all within ``busy_timeout``; those calls, and any
        call made after, raise :class:`~swarmstate.StoreClosedError`.

        Raises:
            StorageError: A connection was still in use by another thread
                after ``busy_timeout``; calling ``close()`` again retries it.
        """
        self._db.close()

    def __repr__(self) -> str:
        closed = self._db.closed
        state = "closed" if closed else f"synchronous={self.synchronous}"
        if self.readonly and not closed:
            state = "readonly"
        return f"DiskStore({self._file!r}, {state})"


# -- helpers ---------------------------------------------------------------------


def _evict(conn: Connection, max_history: int) -> None:
    """Drop snapshots beyond ``max_history`` and the row versions only they needed."""
    row = conn.execute(statements.SNAPSHOT_KEEP_FROM, (max_history - 1,)).fetchone()
    if row is None:
        return
    keep_from = row[0]
    conn.execute(statements.SNAPSHOT_EVICT, (keep_from,))
    if conn.changes():
        conn.execute(statements.COLLECT_GARBAGE, (keep_from,))


def _bounds(low: str, high: str | None) -> tuple[str, ...]:
    """Parameters of a prefix query: the statement has ``?2`` only when bounded."""
    return (low,) if high is None else (low, high)

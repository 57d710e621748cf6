"""PostgresStore: the Store contract on PostgreSQL, for many processes on many machines.

Every process (on any machine) that opens the same server and schema sees
one store: the same entries, the same snapshots, the same uid. Nothing is
cached per process except the schema's uid, which never changes.

How it works (the statements are in :mod:`swarmstate.backends.postgres.statements`):

* Rows are versioned (``created_v``/``deleted_v``), so a snapshot is one
  row insert (O(1)), and restore and diff read only rows changed between the
  two versions.
* Each write is two statements sent in one pipeline (one round trip, one
  implicit transaction): lock the store's ``meta`` row, then do the whole
  batch in one statement. The lock serializes writers (no lost writes) and
  fixes the version the batch is stamped with; reads take no lock and see
  the latest committed write of any process.
* Keys are stored as UTF-8 ``bytea`` so the order is Python's ``str`` order
  and U+0000 is allowed; ``b"\\xff"`` never occurs in UTF-8, so
  ``[enc(prefix), enc(prefix) + b"\\xff")`` is exactly the prefix range.

The store's calls go through its :class:`~.session.Session` (the pool,
retries, the schema's version); writes are chosen and sent by
:mod:`swarmstate.backends.postgres.writes`, snapshots taken and read by
:mod:`swarmstate.backends.postgres.snapshots`; the schema in force is
:mod:`swarmstate.backends.postgres.schema` (its layout is described there),
and :mod:`swarmstate.backends.postgres.migrations` brings older ones to it.

psycopg 3 and psycopg_pool are imported only by this backend's modules
(through :mod:`swarmstate.backends.postgres.driver`): ``pip install
"pyswarmstate[postgres]"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from swarmstate._base import BaseStore
from swarmstate._checks import Bound, Checked, Limit, Pair, Requirement, Row, WriteResult
from swarmstate._codec import loads
from swarmstate._errors import InvalidArgumentError
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot
from swarmstate.backends.postgres import migrations, snapshots, writes
from swarmstate.backends.postgres import reclaim as reclaiming
from swarmstate.backends.postgres.driver import ConnectionPool, psycopg
from swarmstate.backends.postgres.names import any_long, dec, enc
from swarmstate.backends.postgres.schema import HEAD_BYTES
from swarmstate.backends.postgres.session import Session

__all__ = ["PostgresStore"]

_TOP = b"\xff"  # greater than every UTF-8 encoding: the open upper bound


class PostgresStore(BaseStore):
    """State keyed by ``(namespace, key)`` in PostgreSQL, shared by every process.

    Args:
        conninfo: A libpq connection string or URL. The store then owns a
            ``psycopg_pool.ConnectionPool`` (autocommit connections) and
            closes it in :meth:`close`.
        pool: A pool you own instead of ``conninfo``. Its connections should
            be autocommit (one round trip per operation); the store never
            closes it.
        schema: The schema holding this store's tables. Stores in different
            schemas of one database are independent (one per tenant).
        max_history: How many snapshots to retain, oldest evicted first, when
            this process takes a snapshot; None keeps every snapshot.

    Call :meth:`setup` once (any process, any number of times) before use.
    Thread-safe: threads share the pool.
    """

    _compress_large_values: ClassVar[bool] = True  # rows under ~2 kB are stored as they are

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        schema: str = "swarmstate",
        max_history: int | None = None,
    ) -> None:
        if (conninfo is None) == (pool is None):
            raise InvalidArgumentError("PostgresStore takes either conninfo or pool=, not both")
        if conninfo is not None and type(conninfo) is not str:
            raise InvalidArgumentError(f"conninfo must be a str, got {type(conninfo).__name__}")
        if type(schema) is not str or not schema or "\x00" in schema:
            raise InvalidArgumentError(f"schema must be a non-empty str, got {schema!r}")
        super().__init__(max_history=max_history)
        self.schema = schema
        self._session = Session(schema, conninfo, pool)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conninfo: str,
        *,
        schema: str = "swarmstate",
        max_history: int | None = None,
    ) -> Iterator[PostgresStore]:
        """Open a store on ``conninfo`` for the ``with`` block, then close its pool."""
        store = cls(conninfo, schema=schema, max_history=max_history)
        try:
            yield store
        finally:
            store.close()

    # -- identity --------------------------------------------------------

    @property
    def _uid(self) -> str:
        return self._session.uid

    @_uid.setter
    def _uid(self, value: str) -> None:
        self._session.uid = value

    # -- setup -----------------------------------------------------------

    def setup(self, conn: psycopg.Connection[Any] | None = None) -> None:
        """Create or migrate this store's schema; idempotent and safe to race.

        Concurrent callers (any process) wait on one advisory lock, so each
        migration runs once. Everything runs in one transaction, or in a
        savepoint of ``conn``'s transaction when you pass a connection that
        is already in one (your own migration, say): then it commits or rolls
        back with yours.

        Raises:
            IncompatibleStoreError: The schema was written by a newer swarmstate.
        """
        self._session.setup(conn)

    # -- reads -----------------------------------------------------------

    # Every call that passes or reads back a name longer than HEAD_BYTES
    # first asks whether the handle knows how the schema stores it (from
    # version 6 on it does); if not, it runs again at a version fixed for
    # the call (Session.at_fixed_version): another process's setup() may
    # have moved long names to their index form since this handle looked.

    def _read(self, pair: Pair) -> bytes | None:
        session = self._session
        if not session.settled() and any_long(pair):
            return session.at_fixed_version(lambda: self._read(pair))
        found_as = session.found_as
        rows = session.fetch("GET", (found_as(pair[0]), found_as(pair[1])))
        return rows[0][0] if rows else None

    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        if not self._session.settled() and any_long(name for pair in pairs for name in pair):
            return self._session.at_fixed_version(lambda: self._read_many(pairs))
        found_as = self._session.found_as
        rows = self._session.fetch(
            "GET_MANY",
            {"ns": [found_as(ns) for ns, _ in pairs], "key": [found_as(k) for _, k in pairs]},
        )
        out: list[bytes | None] = [None] * len(pairs)
        for ordinal, data in rows:
            # psycopg's pure-Python loader gives a buffer; get_many(raw=True) promises bytes.
            out[ordinal - 1] = data if type(data) is bytes else bytes(data)
        return out

    def _range(
        self,
        values: bool,
        namespace: str,
        start: str | None,
        stop: str | None,
        reverse: bool,
        limit: int | None,
    ) -> list[tuple[Any, ...]]:
        if limit == 0:
            return []
        session = self._session
        if not session.settled() and any_long((namespace, start, stop)):
            return session.at_fixed_version(
                lambda: self._range(values, namespace, start, stop, reverse, limit)
            )
        ns = session.found_as(namespace)
        lo = b"" if start is None else enc(start)
        hi = _TOP if stop is None else enc(stop)
        session.ready()
        if session.version < migrations.READ_RANGE_SINCE:
            named = {"ns": ns, "start": lo, "stop": hi, "limit": limit, "values": values}
            rows = session.fetch("RANGE_BEFORE_V3_" + ("DESC" if reverse else "ASC"), named)
        else:
            rows = session.fetch("READ_RANGE", (ns, lo, hi, limit, reverse, values))
        if not session.settled() and any_long(k for k, _ in rows):
            return session.at_fixed_version(
                lambda: self._range(values, namespace, start, stop, reverse, limit)
            )
        if (
            rows
            and max(len(k) for k, _ in rows) > HEAD_BYTES
            and max(len(lo), len(hi)) <= HEAD_BYTES  # else read_range sorted already
            and session.version >= migrations.TOKENS_SINCE
        ):
            # Index order is key order except between two keys longer than
            # the head that share it: only a page holding such a key is read again.
            named = {"ns": ns, "start": lo, "stop": hi, "limit": limit, "values": values}
            rows = session.fetch("READ_RANGE_SORTED_" + ("DESC" if reverse else "ASC"), named)
        return rows

    def _range_keys(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[str]:
        return [dec(k) for k, _ in self._range(False, namespace, start, stop, reverse, limit)]

    def _range_items(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit, raw: bool
    ) -> list[tuple[str, Any]]:
        rows = self._range(True, namespace, start, stop, reverse, limit)
        if raw:
            return [(dec(k), bytes(v)) for k, v in rows]
        return [(dec(k), loads(v)) for k, v in rows]

    def _namespaces(self, prefix: str) -> list[str]:
        session = self._session
        lo = enc(prefix)
        rows = session.fetch("NAMESPACES", {"lo": lo, "hi": lo + _TOP})
        if not session.settled() and any_long([lo, *(ns for (ns,) in rows)]):
            return session.at_fixed_version(lambda: self._namespaces(prefix))
        return [dec(ns) for (ns,) in rows]

    def _count(self, namespace: str) -> int:
        session = self._session
        if not session.settled() and any_long((namespace,)):
            return session.at_fixed_version(lambda: self._count(namespace))
        return int(session.scalar("COUNT", {"ns": session.found_as(namespace)}))

    def __len__(self) -> int:
        return int(self._session.scalar("LENGTH", ()))

    # -- writes: which statement each takes is in writes.py ---------------

    def _put(self, pair: Pair, data: bytes) -> None:
        ns, key = enc(pair[0]), enc(pair[1])
        if len(ns) > HEAD_BYTES or len(key) > HEAD_BYTES:
            self._put_many([(pair, data)], False, [])
            return
        self._session.fetch("PUT_ONE", (ns, key, data))

    def _put_many(self, rows: list[Row], if_absent: bool, ensure: list[Row]) -> int:
        session = self._session
        if not session.settled() and any_long(_names(rows, ensure)):
            return session.at_fixed_version(lambda: self._put_many(rows, if_absent, ensure))
        return writes.put_many(session, rows, if_absent, ensure)

    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        session = self._session
        if not session.settled() and any_long(_names(rows, ensure, require)):
            return session.at_fixed_version(
                lambda: self._put_required(rows, if_absent, ensure, require)
            )
        return writes.put_required(session, rows, if_absent, ensure, require)

    def _write(self, transaction: Checked) -> WriteResult:
        return writes.write(self._session, transaction)

    def _tagged(
        self, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[tuple[str, str, str]]:
        session = self._session
        session.ready()
        if limit == 0 or session.version < migrations.TAGS_SINCE:
            return []  # before version 10 no entry has tags
        name = f"TAGGED_{tag.upper()}_{'DESC' if reverse else 'ASC'}"
        bounds = (b"" if start is None else enc(start), _TOP if stop is None else enc(stop), limit)
        rows = session.fetch(name, bounds)
        if any(row[3] for row in rows):
            # Index order is name order except between two names longer than
            # the head that share it: such a page is read again, sorted in full.
            rows = session.fetch(name + "_SORTED", bounds)
        return [(dec(value), dec(ns), dec(key)) for value, ns, key, _ in rows]

    def _delete_many(self, pairs: list[Pair]) -> int:
        if not self._session.settled() and any_long(name for pair in pairs for name in pair):
            return self._session.at_fixed_version(lambda: self._delete_many(pairs))
        found_as = self._session.found_as
        unique = dict.fromkeys((found_as(ns), found_as(k)) for ns, k in pairs)
        params = {"ns": [ns for ns, _ in unique], "key": [k for _, k in unique]}
        return int(self._session.scalar("REMOVE_MANY", params))

    def _delete_prefix(self, prefix: str) -> int:
        lo = enc(prefix)
        return int(self._session.scalar("REMOVE_RANGE", {"lo": lo, "hi": lo + _TOP}))

    def _copy_prefix(self, source: str, target: str) -> int:
        lo = enc(source)
        params = {"lo": lo, "hi": lo + _TOP, "target": enc(target), "cut": len(lo) + 1}
        return int(self._session.scalar("COPY_RANGE", params))

    def clear(self) -> None:
        self._session.write("CLEAR", {})

    # -- snapshots (the queries and their answers: snapshots.py) -------------

    def snapshot(self) -> Snapshot:
        return snapshots.take(self._session, self)

    def _restore(self, snapshot: Snapshot) -> None:
        snapshots.restore(self._session, self, snapshot)

    def snapshots(self) -> list[Snapshot]:
        return snapshots.listed(self._session, self)

    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        self._check_own(snapshot)
        session = self._session
        if not session.settled() and any_long((namespace, key)):
            return session.at_fixed_version(
                lambda: snapshots.get(session, self, snapshot, namespace, key, default)
            )
        return snapshots.get(self._session, self, snapshot, namespace, key, default)

    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        self._check_own(snapshot)
        return snapshots.keys(self._session, self, snapshot)

    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        return snapshots.diff(self._session, self, base, later)

    def _reclaim(self, full: bool) -> ReclaimReport:
        """``VACUUM (ANALYZE)`` on each table, never FULL (see :mod:`.reclaim`)."""
        return reclaiming.reclaim(self._session, full)

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Close the pool if this store created it; idempotent, and safe from any thread.

        Calls already running in other threads finish on the connection they
        hold, which the closed pool then closes as they hand it back; every
        call that starts later, on any thread, raises
        :class:`~swarmstate.StoreClosedError`. A pool passed in is left open.

        Raises:
            StorageError: Closing the pool failed.
        """
        self._session.close()

    def __repr__(self) -> str:
        state = "closed" if self._session.closed else "open"
        return f"PostgresStore({self._session.describe()!r}, schema={self.schema!r}, {state})"


def _names(*batches: list[Row] | list[Requirement]) -> Iterator[str]:
    """The namespaces and keys of a write's batches."""
    for batch in batches:
        for (ns, key), _ in batch:
            yield ns
            yield key

"""PostgresStore: the Store contract on PostgreSQL, for many processes on many machines.

Every process (on any machine) that opens the same server and schema sees
one store: the same entries, the same snapshots, the same uid. Nothing is
cached per process except the schema's uid, which never changes.

How it works (the SQL lives in :mod:`swarmstate.backends.postgres.statements`):

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

Snapshots are read and taken in :mod:`swarmstate.backends.postgres.snapshots`;
the writes off the one-statement path (long names, a schema ``setup()``
has not migrated yet) in :mod:`swarmstate.backends.postgres.writes`.

psycopg 3 and psycopg_pool are imported only by this backend's modules
(through :mod:`swarmstate.backends.postgres.driver`): ``pip install
"swarmstate[postgres]"``.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from swarmstate._base import BaseStore, check_conditions
from swarmstate._checks import ABSENT, PRESENT, Bound, Limit, Pair, Requirement, Row
from swarmstate._codec import loads
from swarmstate._errors import (
    ConflictError,
    IncompatibleStoreError,
    InvalidArgumentError,
    StorageError,
    StoreClosedError,
)
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot
from swarmstate.backends.postgres import migrations as m
from swarmstate.backends.postgres import reclaim as reclaiming
from swarmstate.backends.postgres import snapshots
from swarmstate.backends.postgres import statements as q
from swarmstate.backends.postgres import writes as apart
from swarmstate.backends.postgres.driver import (
    ConnectionPool,
    PooledConnection,
    PoolTimeout,
    keep,
    pg_errors,
    psycopg,
    rollback_quietly,
    safe_conninfo,
    sql,
    tuple_row,
)
from swarmstate.backends.postgres.names import (
    Arrays,
    dec,
    enc,
    has_long_names,
    index_form,
    put_many_params,
)

__all__ = ["PostgresStore"]

T = TypeVar("T")

_TOP = b"\xff"  # greater than every UTF-8 encoding: the open upper bound
_RETRIES = 8
# Only what the isolation level or a lock cycle can cause; retrying the whole
# transaction is then correct because nothing of it was committed.
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_MISSING_TABLES = (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName)


_SMALL_BATCH = 8  # entries up to which put_ensure takes one parameter per value
_RECHECK_SECONDS = 30.0


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
        self._conninfo = conninfo
        self._owns_pool = pool is None
        self._pool: ConnectionPool[Any] | None = pool
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()
        self._held = threading.local()  # the connection of a _put_required transaction
        self._uid_value: str | None = None
        self._version = 0  # the schema's migration version, read with the uid
        self._recheck_at = 0.0  # when to read a version below this code's again
        self._ident = sql.Identifier(schema)
        self._sql: dict[str, str] = {
            name: self._format(text)
            for name, text in vars(q).items()
            if name.isupper() and isinstance(text, str) and not name.startswith("_")
        }
        self._sql_v6 = {name: self._format(text) for name, text in q.SINCE_V6.items()}
        self._migrations = [[self._format(s) for s in step] for step in m.MIGRATIONS]
        if self._owns_pool:
            self._pool = self._new_pool()

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

    def _format(self, text: str) -> str:
        return sql.SQL(text).format(schema=self._ident).as_string(None)

    def _new_pool(self) -> ConnectionPool[Any]:
        assert self._conninfo is not None
        return ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=8,
            kwargs={"autocommit": True},
            connection_class=PooledConnection,
            open=True,
            name=f"swarmstate-{self.schema}",
        )

    # -- plumbing --------------------------------------------------------

    def _get_pool(self) -> ConnectionPool[Any]:
        if self._closed:
            raise self._closed_error()
        if self._owns_pool and self._pid != os.getpid():
            # After fork the parent's sockets must not be used or closed here.
            with self._lock:
                if self._pid != os.getpid():
                    self._pool = self._new_pool()
                    self._pid = os.getpid()
        assert self._pool is not None
        return self._pool

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a pooled connection, retrying serialization failures.

        Inside :meth:`_put_required`'s transaction, on that transaction's
        connection instead (its caller commits, or rolls back).
        """
        held = getattr(self._held, "conn", None)
        if held is not None:
            return work(held)
        pool = self._get_pool()
        for attempt in range(_RETRIES):
            try:
                # getconn/putconn, not pool.connection(): that one also runs a
                # commit check and usage statistics, measurable on a small write.
                conn = pool.getconn()
                try:
                    result = work(conn)
                    if not conn.autocommit:
                        conn.commit()
                except BaseException:
                    rollback_quietly(conn)
                    raise
                finally:
                    pool.putconn(conn)
                return result
            except psycopg.Error as exc:  # PoolTimeout and PoolClosed are psycopg errors too
                if isinstance(exc, _RETRYABLE) and attempt < _RETRIES - 1 and not self._closed:
                    time.sleep(random.uniform(0, 0.002 * 2**attempt))
                    continue
                if self._closed:  # the pool was closed under this call
                    raise self._closed_error() from exc
                raise self._translate(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _translate(self, exc: psycopg.Error) -> Exception:
        """The swarmstate error for a failed call of an open store."""
        if isinstance(exc, _RETRYABLE):
            return StorageError(
                f"PostgreSQL kept aborting the transaction ({exc.sqlstate}) after "
                f"{_RETRIES} attempts; retry later"
            )
        if isinstance(exc, _MISSING_TABLES):
            return StorageError(
                f"swarmstate tables not found in schema {self.schema!r}: "
                "call PostgresStore.setup() once before using the store"
            )
        if isinstance(exc, PoolTimeout):
            return StorageError(
                f"no PostgreSQL connection available ({exc}); check that the server "
                "is reachable and the pool is large enough"
            )
        return StorageError(f"PostgreSQL operation failed: {exc}")

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError("this PostgresStore is closed; open a new one")

    def _fetch(
        self, name: str, params: Mapping[str, Any] | tuple[Any, ...] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement (one round trip) and return its rows."""
        self._ready()
        text = self._sql[name]

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            if not isinstance(conn, PooledConnection):
                with conn.cursor(row_factory=tuple_row, binary=True) as fresh:
                    return fresh.execute(text, params).fetchall()
            cur = conn.hot_cursor
            if cur is None or cur.closed:
                cur = conn.hot_cursor = conn.cursor(row_factory=tuple_row, binary=True)
            rows = cur.execute(text, params).fetchall()
            if not keep(rows):
                conn.hot_cursor = None
                cur.close()  # frees the result; the next call makes a new cursor
            return rows

        return self._run(work)

    def _scalar(self, name: str, params: Mapping[str, Any] | tuple[Any, ...]) -> Any:
        """Run one statement returning one value (one round trip) and return it."""
        return self._fetch(name, params)[0][0]

    def _write(self, name: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Lock the store and run one write statement, in one round trip."""
        self._ready()
        lock, text = self._sql["LOCK"], self._sql[name]

        def work(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
            # Separate cursors: each statement's result stays with its cursor.
            with conn.pipeline():
                conn.cursor().execute(lock)
                cur = conn.cursor(row_factory=tuple_row, binary=True)
                cur.execute(text, params)
            return cur.fetchone()

        return self._run(work)

    def _ready(self) -> None:
        """Check that the schema exists and is not newer than this code; pick its statements.

        Read once per store, and again every :data:`_RECHECK_SECONDS` while the
        schema is older than this code: another process's ``setup()`` may
        migrate it, and the statements for the new version are then the ones
        its indexes serve.
        """
        if self._uid_value is not None and (
            self._version >= m.SCHEMA_VERSION or time.monotonic() < self._recheck_at
        ):
            return

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            with conn.cursor(row_factory=tuple_row) as cur:
                return cur.execute(self._sql["OPEN"]).fetchall()

        rows = self._run(work)
        if not rows:
            raise IncompatibleStoreError(
                f"schema {self.schema!r} has no swarmstate meta row; it was damaged "
                "or written by something else"
            )
        uid, version = rows[0]
        _check_version(self.schema, version)
        self._version = int(version or 0)
        if self._version >= m.TOKENS_SINCE:
            self._sql.update(self._sql_v6)
        self._recheck_at = time.monotonic() + _RECHECK_SECONDS
        self._uid_value = uid

    @property
    def _uid(self) -> str:
        self._ready()
        assert self._uid_value is not None
        return self._uid_value

    @_uid.setter
    def _uid(self, value: str) -> None:
        self._uid_value = value

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
        if conn is not None:
            self._setup_on(conn)
        else:
            self._run(self._setup_on)
        self._recheck_at = 0.0  # read the version it left on the next call

    def _setup_on(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(self._sql["SETUP_LOCK"], (f"swarmstate.setup:{self.schema}",))
            cur.execute(self._sql["CREATE_SCHEMA"])
            cur.execute(self._sql["SCHEMA_VERSION_TABLE"])
            row = cur.execute(self._sql["APPLIED_VERSION"]).fetchone()
            applied = int(row[0]) if row else 0
            _check_version(self.schema, applied)
            for version in range(applied + 1, m.SCHEMA_VERSION + 1):
                for statement in self._migrations[version - 1]:
                    cur.execute(statement)
                cur.execute(self._sql["RECORD_VERSION"], (version,))

    # -- reads -----------------------------------------------------------

    def _found_as(self, name: str) -> bytes:
        """``name`` as lookups compare it: its index form (the name itself unless long)."""
        data = enc(name)
        if len(data) <= m.HEAD_BYTES:
            return data
        self._ready()
        # Before version 6 a long name is looked up as it is (and never found).
        return index_form(data) if self._version >= m.TOKENS_SINCE else data

    def _read(self, pair: Pair) -> bytes | None:
        rows = self._fetch("GET", (self._found_as(pair[0]), self._found_as(pair[1])))
        return rows[0][0] if rows else None

    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        found_as = self._found_as
        rows = self._fetch(
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
        ns = self._found_as(namespace)
        lo = b"" if start is None else enc(start)
        hi = _TOP if stop is None else enc(stop)
        rows = self._fetch("READ_RANGE", (ns, lo, hi, limit, reverse, values))
        if (
            rows
            and max(len(k) for k, _ in rows) > m.HEAD_BYTES
            and max(len(lo), len(hi)) <= m.HEAD_BYTES  # else read_range sorted already
            and self._version >= m.TOKENS_SINCE
        ):
            # Index order is key order except between two keys longer than
            # the head that share it: only a page holding such a key is read again.
            named = {"ns": ns, "start": lo, "stop": hi, "limit": limit, "values": values}
            rows = self._fetch("READ_RANGE_SORTED_" + ("DESC" if reverse else "ASC"), named)
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
        lo = enc(prefix)
        rows = self._fetch("NAMESPACES", {"lo": lo, "hi": lo + _TOP})
        return [dec(ns) for (ns,) in rows]

    def _count(self, namespace: str) -> int:
        return int(self._scalar("COUNT", {"ns": self._found_as(namespace)}))

    def __len__(self) -> int:
        return int(self._scalar("LENGTH", ()))

    # -- writes ----------------------------------------------------------

    def _put(self, pair: Pair, data: bytes) -> None:
        ns, key = enc(pair[0]), enc(pair[1])
        if len(ns) > m.HEAD_BYTES or len(key) > m.HEAD_BYTES:
            self._put_many([(pair, data)], False, [])
            return
        self._fetch("PUT_ONE", (ns, key, data))

    def _put_many(self, rows: list[Row], if_absent: bool, ensure: list[Row]) -> int:
        defaults = put_many_params(ensure, True) if ensure else None
        params = put_many_params(rows, if_absent)
        if has_long_names(defaults, params):
            self._ready()
            if self._version >= m.TOKENS_SINCE:
                return apart.long_names(self, defaults, params, if_absent, len(rows))
            # Before version 6 the server refuses a name its index cannot hold.
        if defaults is not None:
            self._ready()
            if self._version < m.PUT_ENSURE_SINCE:
                return apart.ensure_before_v5(self, defaults, params, if_absent, len(rows))
        name, args, count = self._put_statement(defaults, params, if_absent, len(rows))
        return count(int(self._scalar(name, args)))

    def _put_statement(
        self, defaults: Arrays | None, params: Arrays | None, if_absent: bool, items: int
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
            if name not in self._sql:
                text = q.put_ensure_sql(ensured, count)
                self._sql[name] = sql.SQL(text).format(schema=self._ident).as_string(None)
            args: tuple[Any, ...] = (*e_ns, *e_key, *e_value, *p_ns, *p_key, *p_value, if_absent)
        else:
            name = "PUT_ENSURE"
            args = (e_ns, e_key, e_value, p_ns, p_key, p_value, if_absent)
        if if_absent:
            return name, args, lambda n: n
        # Every distinct item is written; count duplicates as the other stores do.
        return name, args, lambda n: n - count + items

    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        self._ready()
        defaults = put_many_params(ensure, True) if ensure else None
        params = put_many_params(rows, if_absent)
        if self._version < m.REQUIRE_SINCE or has_long_names(defaults, params):
            return apart.required(self, rows, if_absent, ensure, require)
        found_as = self._found_as
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
            if name not in self._sql:
                text = q.put_checked_sql(conditions, ensured, count)
                self._sql[name] = sql.SQL(text).format(schema=self._ident).as_string(None)
            args: tuple[Any, ...] = (*c_ns, *c_key, *c_state, *c_value)
            args += (*e_ns, *e_key, *e_value, *p_ns, *p_key, *p_value, if_absent)
        else:
            name = "PUT_CHECKED"
            args = (c_ns, c_key, c_state, c_value, e_ns, e_key, e_value)
            args += (p_ns, p_key, p_value, if_absent)
        try:
            written = int(self._scalar(name, args))
        except StorageError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, psycopg.Error) and cause.sqlstate == m.REQUIRE_SQLSTATE):
                raise
            # Say which condition broke (as the other stores do), from a fresh read.
            check_conditions(require, self._read_many([pair for pair, _ in require]))
            raise ConflictError(
                "set_many required a condition that did not hold when it was written; "
                "the store changed since it was read: read again and retry"
            ) from None
        if if_absent:
            return written
        return written - len(p_ns) + len(rows)

    def _delete_many(self, pairs: list[Pair]) -> int:
        found_as = self._found_as
        unique = dict.fromkeys((found_as(ns), found_as(k)) for ns, k in pairs)
        params = {"ns": [ns for ns, _ in unique], "key": [k for _, k in unique]}
        return int(self._scalar("REMOVE_MANY", params))

    def _delete_prefix(self, prefix: str) -> int:
        lo = enc(prefix)
        return int(self._scalar("REMOVE_RANGE", {"lo": lo, "hi": lo + _TOP}))

    def _copy_prefix(self, source: str, target: str) -> int:
        lo = enc(source)
        params = {"lo": lo, "hi": lo + _TOP, "target": enc(target), "cut": len(lo) + 1}
        return int(self._scalar("COPY_RANGE", params))

    def clear(self) -> None:
        self._write("CLEAR", {})

    # -- snapshots (the queries and their answers: snapshots.py) -------------

    def snapshot(self) -> Snapshot:
        return snapshots.take(self)

    def _restore(self, snapshot: Snapshot) -> None:
        snapshots.restore(self, snapshot)

    def snapshots(self) -> list[Snapshot]:
        return snapshots.listed(self)

    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        self._check_own(snapshot)
        return snapshots.get(self, snapshot, namespace, key, default)

    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        self._check_own(snapshot)
        return snapshots.keys(self, snapshot)

    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        return snapshots.diff(self, base, later)

    def _reclaim(self, full: bool) -> ReclaimReport:
        """``VACUUM (ANALYZE)`` on each table, never FULL (see :mod:`.reclaim`)."""
        return reclaiming.reclaim(self, full)

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
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_pool and self._pool is not None and self._pid == os.getpid():
            try:
                self._pool.close()
            except psycopg.Error as exc:
                raise StorageError(f"closing the PostgreSQL pool failed: {exc}") from exc

    def __repr__(self) -> str:
        where = safe_conninfo(self._conninfo) if self._conninfo else "pool"
        state = "closed" if self._closed else "open"
        return f"PostgresStore({where!r}, schema={self.schema!r}, {state})"


def _check_version(schema: str, version: int | None) -> None:
    if version is not None and int(version) > m.SCHEMA_VERSION:
        raise IncompatibleStoreError(
            f"schema {schema!r} is at swarmstate schema version {version}, newer than "
            f"this code's {m.SCHEMA_VERSION}; upgrade swarmstate"
        )

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
:mod:`swarmstate.backends.postgres.calls.writes`, snapshots taken and read by
:mod:`swarmstate.backends.postgres.calls.snapshots`; the schema in force is
:mod:`swarmstate.backends.postgres.schema` (its layout is described there),
and :mod:`swarmstate.backends.postgres.migrations` brings older ones to it.

Async: the ``a``-prefixed methods (:meth:`PostgresStore.aitems`,
:meth:`PostgresStore.awrite`, ...) run the same plans (:mod:`.plans`) on
psycopg's async connections through :class:`~.async_session.AsyncSession`:
the same checks first, the same statements, the same errors.

psycopg 3 and psycopg_pool are imported only by this backend's modules
(through :mod:`swarmstate.backends.postgres.driver`): ``pip install
"pyswarmstate[postgres]"``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any, ClassVar

from swarmstate._base import BaseStore
from swarmstate._checks import (
    Bound,
    Checked,
    Limit,
    Pair,
    Requirement,
    Row,
    Transaction,
    WriteResult,
    check_flag,
    check_key,
    check_name,
    check_range,
    checked_pairs,
    checked_requirements,
    checked_tagged,
    checked_transaction,
    encoded_rows,
)
from swarmstate._codec import loads
from swarmstate._errors import InvalidArgumentError
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot
from swarmstate.backends.postgres.async_session import AsyncSession
from swarmstate.backends.postgres.calls import reads, snapshots, writes
from swarmstate.backends.postgres.calls import reclaim as reclaiming
from swarmstate.backends.postgres.driver import AsyncConnectionPool, ConnectionPool, psycopg
from swarmstate.backends.postgres.names import any_long, dec, enc
from swarmstate.backends.postgres.schema import HEAD_BYTES
from swarmstate.backends.postgres.session import (
    DEFAULT_MAX_SIZE,
    DEFAULT_MIN_SIZE,
    DEFAULT_TIMEOUT,
    Session,
)

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
        async_pool: A ``psycopg_pool.AsyncConnectionPool`` you own (opened,
            autocommit connections) for the async methods; the store never
            closes it. Alone (no ``conninfo`` nor ``pool``), the store has
            async methods only. Without it, a store opened with ``conninfo``
            opens its own on the first awaited call, on that call's event loop.
        min_size: Connections each pool the store opens keeps (default 1).
        max_size: Connections each pool the store opens holds at most (default 8).
        timeout: Seconds a call waits for a free connection of a pool the
            store opens before it fails (default 30).

    Call :meth:`setup` once (any process, any number of times) before use.
    Thread-safe: threads share the pool; the tasks of one event loop share
    the async pool. Close a store you awaited with :meth:`aclose`.
    """

    _compress_large_values: ClassVar[bool] = True  # rows under ~2 kB are stored as they are

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        schema: str = "swarmstate",
        max_history: int | None = None,
        async_pool: AsyncConnectionPool[Any] | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        timeout: float | None = None,
    ) -> None:
        if conninfo is not None and pool is not None:
            raise InvalidArgumentError("PostgresStore takes either conninfo or pool=, not both")
        if conninfo is None and pool is None and async_pool is None:
            raise InvalidArgumentError(
                "PostgresStore takes either conninfo or pool= (or async_pool= alone); none given"
            )
        if conninfo is not None and type(conninfo) is not str:
            raise InvalidArgumentError(f"conninfo must be a str, got {type(conninfo).__name__}")
        if type(schema) is not str or not schema or "\x00" in schema:
            raise InvalidArgumentError(f"schema must be a non-empty str, got {schema!r}")
        sized = _pool_sizes(min_size, max_size, timeout)
        if conninfo is None and (min_size, max_size, timeout) != (None, None, None):
            raise InvalidArgumentError(
                "min_size, max_size and timeout size the pools PostgresStore opens from a "
                "conninfo; set them on the pool you pass instead"
            )
        super().__init__(max_history=max_history)
        self.schema = schema
        self._session = Session(
            schema, conninfo, pool, sized, sync=conninfo is not None or pool is not None
        )
        self._async = AsyncSession(self._session, async_pool)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conninfo: str,
        *,
        schema: str = "swarmstate",
        max_history: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[PostgresStore]:
        """Open a store on ``conninfo`` for the ``with`` block, then close its pool."""
        store = cls(
            conninfo,
            schema=schema,
            max_history=max_history,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        try:
            yield store
        finally:
            store.close()

    @classmethod
    @asynccontextmanager
    async def afrom_conn_string(
        cls,
        conninfo: str,
        *,
        schema: str = "swarmstate",
        max_history: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[PostgresStore]:
        """Open a store on ``conninfo`` and its async pool for the ``async with`` block.

        The pool is opened and the schema checked (:meth:`aopen`) before the
        block runs; both pools are closed after it (:meth:`aclose`).
        """
        store = cls(
            conninfo,
            schema=schema,
            max_history=max_history,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        try:
            await store.aopen()
            yield store
        finally:
            await store.aclose()

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

    # Each read is a plan of reads.py, run here on this thread; the async
    # methods below run the same plans on the event loop.

    def _read(self, pair: Pair) -> bytes | None:
        return self._session.drive(reads.get(self._session, pair))

    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        return self._session.drive(reads.get_many(self._session, pairs))

    def _range_keys(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[str]:
        plan = reads.rows(self._session, False, namespace, start, stop, reverse, limit)
        return [dec(k) for k, _ in self._session.drive(plan)]

    def _range_items(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit, raw: bool
    ) -> list[tuple[str, Any]]:
        plan = reads.rows(self._session, True, namespace, start, stop, reverse, limit)
        return reads.items(self._session.drive(plan), raw)

    def _namespaces(self, prefix: str) -> list[str]:
        return self._session.drive(reads.namespaces(self._session, prefix))

    def _count(self, namespace: str) -> int:
        return self._session.drive(reads.count(self._session, namespace))

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
        return self._session.drive(writes.set_many(self._session, rows, if_absent, ensure))

    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        plan = writes.set_required(self._session, rows, if_absent, ensure, require)
        return self._session.drive(plan)

    def _write(self, transaction: Checked) -> WriteResult:
        return self._session.drive(writes.write(self._session, transaction))

    def _tagged(
        self, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[tuple[str, str, str]]:
        return self._session.drive(reads.tagged(self._session, tag, start, stop, reverse, limit))

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
        """``VACUUM (ANALYZE)`` on each table, never FULL (see :mod:`.calls.reclaim`)."""
        return reclaiming.reclaim(self._session, full)

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Close the pool if this store created it; idempotent, and safe from any thread.

        Calls already running in other threads finish on the connection they
        hold, which the closed pool then closes as they hand it back; every
        call that starts later, on any thread, raises
        :class:`~swarmstate.StoreClosedError`. A pool passed in is left open.
        An async pool the store opened is closed on its event loop, which
        must still run (else a ``ResourceWarning``): prefer :meth:`aclose`.

        Raises:
            StorageError: Closing the pool failed.
        """
        self._session.close()
        self._async.close_soon()

    def __repr__(self) -> str:
        state = "closed" if self._session.closed else "open"
        return f"PostgresStore({self._session.describe()!r}, schema={self.schema!r}, {state})"

    # -- async: the same checks, then the same plans, awaited ---------------

    def awaitable(self) -> bool:
        """True on the event loop this store's async pool is open on (``aopen``,
        ``afrom_conn_string``, or an ``async_pool=`` passed in)."""
        return self._async.usable_here()

    async def aopen(self, *, check_schema: bool = True) -> None:
        """Open the async pool now and check the schema (else the first awaited call does).

        For an application's startup (a server's lifespan): a bad schema
        fails there, not in the first request. ``check_schema=False`` opens
        the pool only, for a schema that ``setup()`` creates next.
        """
        await self._async.connections()
        if check_schema:
            await self._async.ready()

    async def aget(self, namespace: str, key: str, default: Any = None) -> Any:
        """:meth:`get`, awaited."""
        check_key(namespace, key)
        data = await self._async.drive(reads.get(self._session, (namespace, key)))
        return default if data is None else loads(data)

    async def aget_many(self, pairs: Iterable[tuple[str, str]], *, raw: bool = False) -> list[Any]:
        """:meth:`get_many`, awaited."""
        checked = checked_pairs(pairs)
        if type(raw) is not bool:
            check_flag(raw, "raw")
        if not checked:
            return []
        found = await self._async.drive(reads.get_many(self._session, checked))
        return found if raw else [None if data is None else loads(data) for data in found]

    async def akeys(
        self,
        namespace: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[str]:
        """:meth:`keys`, awaited."""
        check_range(namespace, start, stop, reverse, limit)
        plan = reads.rows(self._session, False, namespace, start, stop, reverse, limit)
        return [dec(k) for k, _ in await self._async.drive(plan)]

    async def aitems(
        self,
        namespace: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
        raw: bool = False,
    ) -> list[tuple[str, Any]]:
        """:meth:`items`, awaited."""
        check_range(namespace, start, stop, reverse, limit)
        check_flag(raw, "raw")
        plan = reads.rows(self._session, True, namespace, start, stop, reverse, limit)
        return reads.items(await self._async.drive(plan), raw)

    async def atagged(
        self,
        tag: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[str, str, str]]:
        """:meth:`tagged`, awaited."""
        checked_tagged(tag, start, stop, reverse, limit)
        plan = reads.tagged(self._session, tag, start, stop, reverse, limit)
        return await self._async.drive(plan)

    async def anamespaces(self, prefix: str | None = None) -> list[str]:
        """:meth:`namespaces`, awaited."""
        if prefix is not None:
            check_name(prefix, "prefix")
        return await self._async.drive(reads.namespaces(self._session, prefix or ""))

    async def aset_many(
        self,
        items: Iterable[tuple[str, str, Any]],
        *,
        if_absent: bool = False,
        ensure: Iterable[tuple[str, str, Any]] = (),
        raw: bool = False,
        require: Iterable[tuple[str, str, Any]] = (),
    ) -> int:
        """:meth:`set_many`, awaited: all or nothing, a cancelled call included."""
        if type(if_absent) is not bool or type(raw) is not bool:
            check_flag(if_absent, "if_absent")
            check_flag(raw, "raw")
        conditions = checked_requirements(require) if require else None
        defaults = encoded_rows(ensure, raw, "ensure") if ensure else []
        rows = encoded_rows(items, raw)
        session = self._session
        if conditions:
            plan = writes.set_required(session, rows, if_absent, defaults, conditions)
            return await self._async.drive(plan)
        if not rows and not defaults:
            return 0
        return await self._async.drive(writes.set_many(session, rows, if_absent, defaults))

    async def awrite(self, transaction: Transaction) -> WriteResult:
        """:meth:`write`, awaited: all or nothing, a cancelled call included."""
        checked = checked_transaction(transaction)
        if not (
            checked.conditions
            or checked.rows
            or checked.deletes
            or checked.prefixes
            or checked.tag_deletes
        ):
            return WriteResult(0, 0)
        return await self._async.drive(writes.write(self._session, checked))

    async def aclose(self) -> None:
        """Close the pools this store opened, awaiting the async one; idempotent.

        Calls in flight finish first on their connections; every call that
        starts later raises :class:`~swarmstate.StoreClosedError`. Pools
        passed in are left open.

        Raises:
            StorageError: Closing a pool failed.
        """
        try:
            # Blocking: its worker threads are joined. Every later call refuses.
            await asyncio.to_thread(self._session.close)
        finally:
            await self._async.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _pool_sizes(
    min_size: int | None, max_size: int | None, timeout: float | None
) -> tuple[int, int, float]:
    """``(min_size, max_size, timeout)`` of the pools a store opens, defaults filled in, checked."""
    low = DEFAULT_MIN_SIZE if min_size is None else min_size
    high = max(DEFAULT_MAX_SIZE, low) if max_size is None else max_size
    wait = DEFAULT_TIMEOUT if timeout is None else timeout
    if type(low) is not int or low < 0:
        raise InvalidArgumentError(f"min_size must be an int >= 0, got {min_size!r}")
    if type(high) is not int or high < max(low, 1):
        raise InvalidArgumentError(
            f"max_size must be an int >= 1 and >= min_size ({low}), got {max_size!r}"
        )
    if type(wait) not in (int, float) or not (math.isfinite(wait) and wait > 0):
        raise InvalidArgumentError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return low, high, float(wait)

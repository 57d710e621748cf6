"""PostgresStore's session: its pool, each call's connection and retries, the schema's version.

Everything a :class:`~swarmstate.backends.postgres.PostgresStore` runs, and
what its calls (:mod:`.calls`: reads, writes, snapshots, reclaim) run,
goes through one :class:`Session`: it borrows a connection for each call
(one round trip for most), retries what PostgreSQL aborts for a reason the
retry removes, translates the driver's errors into swarmstate's, and knows
the schema's uid and migration version, which decide the statements used
(a schema set up by an older swarmstate keeps working until ``setup()``
migrates it). The invariant: a name is passed as the schema stores it when
the statement runs; the one encoding a migration changed (long names,
version 6) is settled per call where it matters (:meth:`Session.settled`).
Nothing else is cached per process: every process on any machine that opens
the same schema sees the same store.

A call written as a plan (:mod:`.plans`) runs here through :meth:`Session.drive`;
:class:`~.async_session.AsyncSession` runs the same plans on an event loop,
sharing this session's schema state (version, uid, statements).
"""

from __future__ import annotations

import contextvars
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from swarmstate._checks import hide_password
from swarmstate._errors import (
    IncompatibleStoreError,
    InvalidArgumentError,
    StorageError,
    StoreClosedError,
)
from swarmstate.backends.postgres import migrations, schema, statements
from swarmstate.backends.postgres.driver import (
    ConnectionPool,
    PooledConnection,
    PoolTimeout,
    keep,
    pg_errors,
    probe,
    psycopg,
    rollback_quietly,
    safe_conninfo,
    sql,
    tuple_row,
)
from swarmstate.backends.postgres.names import enc, index_form
from swarmstate.backends.postgres.plans import Atomic, Batch, Fetch, Params, Plan, Ready
from swarmstate.backends.postgres.schema import HEAD_BYTES, SCHEMA_VERSION

__all__ = [
    "DEFAULT_MAX_SIZE",
    "DEFAULT_MIN_SIZE",
    "DEFAULT_TIMEOUT",
    "RETRIES",
    "Params",
    "Session",
]

T = TypeVar("T")

DEFAULT_MIN_SIZE = 1
"""Connections each pool the store opens keeps open."""
DEFAULT_MAX_SIZE = 8
"""Connections each pool the store opens may hold at most."""
DEFAULT_TIMEOUT = 30.0
"""Seconds a call waits for a free connection of a pool the store opens."""

RETRIES = 8
"""How many times a call the server aborted (a deadlock, a serialization failure) is tried."""
# Only what the isolation level or a lock cycle can cause; retrying the whole
# transaction is then correct because nothing of it was committed.
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_MISSING_TABLES = (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName)
_RECHECK_SECONDS = 30.0

# The sessions whose calls in this thread or task run at a fixed version
# (inside at_fixed_version): a context variable, so that the tasks of one
# event loop, which share a thread, do not see each other's.
_FIXED: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "swarmstate_postgres_fixed", default=()
)


class Session:
    """The connections and statements of one PostgresStore handle.

    Args:
        schema: The schema holding the store's tables.
        conninfo: A libpq connection string: the session then owns a pool
            (autocommit connections) and closes it in :meth:`close`.
        pool: A pool the caller owns instead; never closed here.
        sized: ``(min_size, max_size, timeout)`` of a pool the session opens.
        sync: False for a store opened with an async pool alone: every
            blocking call then refuses (the session keeps the schema state
            its :class:`~.async_session.AsyncSession` shares).

    Thread-safe: threads share the pool. After :meth:`close`, every call
    that starts raises :class:`~swarmstate.StoreClosedError`.
    """

    version: int
    """The schema's migration version, as last read (0 until :meth:`ready` reads it)."""

    def __init__(
        self,
        schema: str,
        conninfo: str | None,
        pool: ConnectionPool[Any] | None,
        sized: tuple[int, int, float] = (DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE, DEFAULT_TIMEOUT),
        *,
        sync: bool = True,
    ) -> None:
        self.schema = schema
        self.closed = False
        self.version = 0
        self.sized = sized
        self.sync = sync
        self._conninfo = conninfo
        self._owns_pool = pool is None and sync
        self._pool: ConnectionPool[Any] | None = pool
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._held = threading.local()  # the connection of a transaction in progress
        self._uid: str | None = None
        self._recheck_at = 0.0  # when to read a version below this code's again
        self._ident = sql.Identifier(schema)
        self._sql: dict[str, str] = {
            name: self.format(text)
            for name, text in vars(statements).items()
            if name.isupper() and isinstance(text, str) and not name.startswith("_")
        }
        self._sql_v6 = {name: self.format(text) for name, text in statements.SINCE_V6.items()}
        if self._owns_pool:
            probe(conninfo)
            self._pool = self._new_pool()

    def format(self, text: str) -> str:
        """``text`` with ``{schema}`` filled in, quoted as an identifier."""
        return sql.SQL(text).format(schema=self._ident).as_string(None)

    def statement(self, name: str, build: Callable[[], str] | None = None) -> str:
        """The statement ``name``, for this schema and its version.

        ``build`` makes the text (``{schema}`` still to fill) of a statement
        named the first time it is asked for, such as one for a batch size.
        """
        text = self._sql.get(name)
        if text is None:
            if build is None:
                raise KeyError(name)
            text = self._sql[name] = self.format(build())
        return text

    @property
    def conninfo(self) -> str | None:
        """The connection string the session was opened with (password and all), or None."""
        return self._conninfo

    def _new_pool(self) -> ConnectionPool[Any]:
        assert self._conninfo is not None
        min_size, max_size, timeout = self.sized
        return ConnectionPool(
            self._conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
            connection_class=PooledConnection,
            open=True,
            name=f"swarmstate-{self.schema}",
        )

    # -- calls -------------------------------------------------------------

    def _get_pool(self) -> ConnectionPool[Any]:
        if self.closed:
            raise self.closed_error()
        if not self.sync:
            raise InvalidArgumentError(
                "this PostgresStore was opened with async_pool= alone and has no blocking "
                "pool: await its async methods (aitems, awrite, ...), or pass conninfo or "
                "pool= too"
            )
        if self._owns_pool and self._pid != os.getpid():
            # After fork the parent's sockets must not be used or closed here.
            with self._lock:
                if self._pid != os.getpid():
                    self._pool = self._new_pool()
                    self._pid = os.getpid()
        assert self._pool is not None
        return self._pool

    def run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a pooled connection, retrying serialization failures.

        Inside a transaction of :meth:`holding`, on that transaction's
        connection instead (its caller commits, or rolls back).
        """
        held = getattr(self._held, "conn", None)
        if held is not None:
            return work(held)
        pool = self._get_pool()
        for attempt in range(RETRIES):
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
                pause = self.backoff(exc, attempt)
                if pause is not None:
                    time.sleep(pause)
                    continue
                failure = exc
                break
        else:  # pragma: no cover
            raise AssertionError("unreachable")
        error, chained = self.failed(failure)
        if not chained:
            # Raised outside the except block: no exception in the chain holds the password.
            raise error
        raise error from failure

    def backoff(self, exc: psycopg.Error, attempt: int) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` of a call ``exc`` aborted; None: give up.

        Only what the isolation level or a lock cycle causes is retried,
        :data:`RETRIES` times in all, and never once the session is closed.
        """
        if isinstance(exc, _RETRYABLE) and attempt < RETRIES - 1 and not self.closed:
            return random.uniform(0, 0.002 * 2**attempt)
        return None

    def failed(self, exc: psycopg.Error) -> tuple[Exception, bool]:
        """The error a call that failed with ``exc`` raises, and whether ``exc`` may be its cause.

        Not when ``exc`` holds the password: no exception in the chain may.
        """
        if self.closed:  # the pool was closed under this call
            return self.closed_error(), True
        return self.translate(exc), self.hide(str(exc)) == str(exc)

    @contextmanager
    def holding(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Within the block, this thread's calls run on ``conn`` (inside its transaction)."""
        outer = getattr(self._held, "conn", None)
        self._held.conn = conn
        try:
            yield
        finally:
            self._held.conn = outer

    def translate(self, exc: psycopg.Error) -> Exception:
        """The swarmstate error for a failed call of an open store."""
        if isinstance(exc, _RETRYABLE):
            return StorageError(
                f"PostgreSQL kept aborting the transaction ({exc.sqlstate}) after "
                f"{RETRIES} attempts; retry later"
            )
        if isinstance(exc, _MISSING_TABLES):
            return StorageError(
                f"swarmstate tables not found in schema {self.schema!r}: "
                "call PostgresStore.setup() once before using the store"
            )
        if isinstance(exc, PoolTimeout):
            return StorageError(
                f"no PostgreSQL connection available ({self.hide(str(exc))}); check that the "
                "server is reachable and the pool is large enough"
            )
        return StorageError(f"PostgreSQL operation failed: {self.hide(str(exc))}")

    def hide(self, text: str) -> str:
        """``text`` without the password of the conninfo this session was opened with."""
        return hide_password(text, self._conninfo) if self._conninfo else text

    def closed_error(self) -> StoreClosedError:
        return StoreClosedError("this PostgresStore is closed; open a new one")

    def fetch(self, name: str, params: Params = None) -> list[tuple[Any, ...]]:
        """Run the statement ``name`` (one round trip) and return its rows."""
        self.ready()
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

        return self.run(work)

    def scalar(self, name: str, params: Params) -> Any:
        """Run a statement returning one value (one round trip) and return it."""
        return self.fetch(name, params)[0][0]

    def fetch_all(self, batch: Batch) -> list[list[tuple[Any, ...]]]:
        """Run ``batch``'s statements in one pipeline (one round trip); each one's rows."""
        self.ready()
        texts = [(self._sql[name], params) for name, params in batch.statements]

        def work(conn: psycopg.Connection[Any]) -> list[list[tuple[Any, ...]]]:
            # Separate cursors: each statement's result stays with its cursor.
            with conn.pipeline():
                cursors = []
                for text, params in texts:
                    cur = conn.cursor(row_factory=tuple_row, binary=True)
                    cur.execute(text, params)
                    cursors.append(cur)
            return [cur.fetchall() for cur in cursors]

        return self.run(work)

    def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` (see :mod:`.plans`) to its end on this thread; its result.

        Each step's error is thrown into the plan, which may handle it.
        """
        try:
            step = next(plan)
            while True:
                try:
                    result = self._perform(step)
                except BaseException as exc:
                    step = plan.throw(exc)
                else:
                    step = plan.send(result)
        except StopIteration as done:
            result = done.value
        return result  # type: ignore[no-any-return]

    def _perform(self, step: object) -> Any:
        kind = type(step)
        if kind is Fetch:
            assert isinstance(step, Fetch)
            return self.fetch(step.name, step.params)
        if kind is Ready:
            self.ready()
            return None
        if kind is Batch:
            assert isinstance(step, Batch)
            return self.fetch_all(step)
        if kind is Atomic:
            assert isinstance(step, Atomic)
            return self._atomic(step)
        raise TypeError(f"not a plan's step: {step!r}")

    def _atomic(self, step: Atomic) -> Any:
        def work(conn: psycopg.Connection[Any]) -> Any:
            with conn.transaction(), self.holding(conn):
                return self.drive(step.make())

        return self.run(work)

    def write(self, name: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Lock the store and run one write statement, in one round trip."""
        self.ready()
        lock, text = self._sql["LOCK"], self._sql[name]

        def work(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
            # Separate cursors: each statement's result stays with its cursor.
            with conn.pipeline():
                conn.cursor().execute(lock)
                cur = conn.cursor(row_factory=tuple_row, binary=True)
                cur.execute(text, params)
            return cur.fetchone()

        return self.run(work)

    # -- the schema --------------------------------------------------------

    def ready(self) -> None:
        """Check that the schema exists and is not newer than this code; pick its statements.

        Read once per session, and again every :data:`_RECHECK_SECONDS`
        while the schema is older than this code: another process's
        ``setup()`` may migrate it, and the statements for the new version
        are then the ones its indexes serve.
        """
        if self.known():
            return

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            with conn.cursor(row_factory=tuple_row) as cur:
                return cur.execute(self._sql["OPEN"]).fetchall()

        self.opened(self.run(work))

    def known(self) -> bool:
        """Whether the schema's version as last read is current enough to use without a read."""
        return self._uid is not None and (
            self.version >= SCHEMA_VERSION or time.monotonic() < self._recheck_at
        )

    def opened(self, rows: list[tuple[Any, ...]]) -> None:
        """Take the rows of the ``OPEN`` statement: the store's uid and the schema's version."""
        if not rows:
            raise IncompatibleStoreError(
                f"schema {self.schema!r} has no swarmstate meta row; it was damaged "
                "or written by something else"
            )
        uid, version = rows[0]
        self.moved_to(version)
        self._recheck_at = time.monotonic() + _RECHECK_SECONDS
        self._uid = uid

    def moved_to(self, version: int | None) -> None:
        """Take ``version`` as the schema's, and the statements it has."""
        _check_version(self.schema, version)
        self.version = int(version or 0)
        if self.version >= migrations.TOKENS_SINCE:
            self._sql.update(self._sql_v6)

    def settled(self) -> bool:
        """Whether a name longer than HEAD_BYTES is passed as the schema stores it.

        True from version 6 on (a schema never goes back), and inside
        :meth:`at_fixed_version`; before version 6, as last read, another
        process's ``setup()`` may have moved long names to their index form
        since.
        """
        return self.version >= migrations.TOKENS_SINCE or self in _FIXED.get()

    @contextmanager
    def fixed(self, version: int | None) -> Iterator[None]:
        """Within the block, this thread's (or task's) calls run at ``version``, read just now.

        For :meth:`fixed_version`, inside the transaction
        that holds ``setup()``'s lock shared (see :meth:`at_fixed_version`).
        """
        self.moved_to(version)
        token = _FIXED.set((*_FIXED.get(), self))
        try:
            yield
        finally:
            _FIXED.reset(token)

    def at_fixed_version(self, call: Callable[[], T]) -> T:
        """``call()`` in one transaction no migration overlaps, the schema's version read first.

        For a call that passes or reads back a name longer than
        :data:`~.schema.HEAD_BYTES` while :meth:`settled` is False: it holds
        ``setup()``'s advisory lock shared, so a migration either committed
        before the version is read here or waits for this transaction, and
        ``call`` passes each name as the schema it runs on stores it. The
        transaction, the lock and the read cost a few round trips more; no
        other call pays for them.
        """

        def plan() -> Plan[T]:
            return call()  # its calls run on the transaction's connection (holding)
            yield  # never reached: makes this function a plan

        return self.drive(self.fixed_version(plan))

    def fixed_version(self, make: Callable[[], Plan[T]]) -> Plan[T]:
        """The plan ``make()`` run as :meth:`at_fixed_version` runs a call: a plan itself."""
        result: T = yield Atomic(lambda: self._at_version(make))
        return result

    def _at_version(self, make: Callable[[], Plan[T]]) -> Plan[T]:
        key = (f"swarmstate.setup:{self.schema}",)
        _, applied = yield Batch((("SETUP_LOCK_SHARED", key), ("APPLIED_VERSION", None)))
        with self.fixed(applied[0][0] if applied else None):
            return (yield from make())

    @property
    def uid(self) -> str:
        """The store's uid, kept with its data."""
        self.ready()
        assert self._uid is not None
        return self._uid

    @uid.setter
    def uid(self, value: str) -> None:
        self._uid = value

    def found_as(self, name: str) -> bytes:
        """``name`` as lookups compare it: its index form (the name itself unless long)."""
        data = enc(name)
        if len(data) <= HEAD_BYTES:
            return data
        self.ready()
        return self.stored_as(name)

    def stored_as(self, name: str) -> bytes:
        """:meth:`found_as` at the version as last read (a plan's, after its ready step)."""
        data = enc(name)
        if len(data) <= HEAD_BYTES:
            return data
        # Before version 6 a long name is stored as it is.
        return index_form(data) if self.version >= migrations.TOKENS_SINCE else data

    def setup(self, conn: psycopg.Connection[Any] | None = None) -> None:
        """Create or migrate the schema (see :meth:`PostgresStore.setup`)."""
        if conn is not None:
            self._setup_on(conn)
        else:
            self.run(self._setup_on)
        self._recheck_at = 0.0  # read the version it left on the next call

    def _setup_on(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(self._sql["SETUP_LOCK"], (f"swarmstate.setup:{self.schema}",))
            cur.execute(self._sql["CREATE_SCHEMA"])
            cur.execute(self._sql["SCHEMA_VERSION_TABLE"])
            row = cur.execute(self._sql["APPLIED_VERSION"]).fetchone()
            applied = int(row[0]) if row else 0
            _check_version(self.schema, applied)
            if applied >= SCHEMA_VERSION:
                return
            for statement in _upgrade(applied):
                cur.execute(self.format(statement))
            for version in range(applied + 1, SCHEMA_VERSION + 1):
                cur.execute(self._sql["RECORD_VERSION"], (version,))

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the pool if the session created it (see :meth:`PostgresStore.close`)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if self._owns_pool and self._pool is not None and self._pid == os.getpid():
            try:
                self._pool.close()
            except psycopg.Error as exc:
                raise StorageError(f"closing the PostgreSQL pool failed: {exc}") from exc

    def describe(self) -> str:
        """Where the session connects, without a password."""
        return safe_conninfo(self._conninfo) if self._conninfo else "pool"


def _upgrade(applied: int) -> list[str]:
    """The statements bringing a schema at version ``applied`` to the schema in force."""
    if applied == 0:
        return list(schema.CREATE)  # a new schema
    steps = [
        s for v in range(applied + 1, SCHEMA_VERSION + 1) for s in migrations.TABLE_STEPS.get(v, ())
    ]
    return [*steps, *schema.FUNCTIONS, *migrations.DROPPED]


def _check_version(name: str, version: int | None) -> None:
    if version is not None and int(version) > SCHEMA_VERSION:
        raise IncompatibleStoreError(
            f"schema {name!r} is at swarmstate schema version {version}, newer than "
            f"this code's {SCHEMA_VERSION}; upgrade swarmstate"
        )

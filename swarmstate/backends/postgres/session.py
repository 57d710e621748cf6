"""PostgresStore's session: its pool, each call's connection and retries, the schema's version.

Everything a :class:`~swarmstate.backends.postgres.PostgresStore` runs, and
what its helpers (:mod:`.snapshots`, :mod:`.writes`, :mod:`.reclaim`) run,
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
"""

from __future__ import annotations

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
    psycopg,
    rollback_quietly,
    safe_conninfo,
    sql,
    tuple_row,
)
from swarmstate.backends.postgres.names import enc, index_form
from swarmstate.backends.postgres.schema import HEAD_BYTES, SCHEMA_VERSION

__all__ = ["Params", "Session"]

T = TypeVar("T")

Params = Mapping[str, Any] | tuple[Any, ...] | None
"""A statement's parameters: named, positional, or none."""

_RETRIES = 8
# Only what the isolation level or a lock cycle can cause; retrying the whole
# transaction is then correct because nothing of it was committed.
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_MISSING_TABLES = (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName)
_RECHECK_SECONDS = 30.0


class Session:
    """The connections and statements of one PostgresStore handle.

    Args:
        schema: The schema holding the store's tables.
        conninfo: A libpq connection string: the session then owns a pool
            (autocommit connections) and closes it in :meth:`close`.
        pool: A pool the caller owns instead; never closed here.

    Thread-safe: threads share the pool. After :meth:`close`, every call
    that starts raises :class:`~swarmstate.StoreClosedError`.
    """

    version: int
    """The schema's migration version, as last read (0 until :meth:`ready` reads it)."""

    def __init__(self, schema: str, conninfo: str | None, pool: ConnectionPool[Any] | None) -> None:
        self.schema = schema
        self.closed = False
        self.version = 0
        self._conninfo = conninfo
        self._owns_pool = pool is None
        self._pool: ConnectionPool[Any] | None = pool
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._held = threading.local()  # the connection of a transaction in progress
        self._fixed = threading.local()  # inside at_fixed_version
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
            _probe(conninfo)
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

    # -- calls -------------------------------------------------------------

    def _get_pool(self) -> ConnectionPool[Any]:
        if self.closed:
            raise self.closed_error()
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
                if isinstance(exc, _RETRYABLE) and attempt < _RETRIES - 1 and not self.closed:
                    time.sleep(random.uniform(0, 0.002 * 2**attempt))
                    continue
                if self.closed:  # the pool was closed under this call
                    raise self.closed_error() from exc
                failure = exc
                break
        else:  # pragma: no cover
            raise AssertionError("unreachable")
        error = self.translate(failure)
        if self.hide(str(failure)) != str(failure):
            # Raised outside the except block: no exception in the chain holds the password.
            raise error
        raise error from failure

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
                f"{_RETRIES} attempts; retry later"
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
        if self._uid is not None and (
            self.version >= SCHEMA_VERSION or time.monotonic() < self._recheck_at
        ):
            return

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            with conn.cursor(row_factory=tuple_row) as cur:
                return cur.execute(self._sql["OPEN"]).fetchall()

        rows = self.run(work)
        if not rows:
            raise IncompatibleStoreError(
                f"schema {self.schema!r} has no swarmstate meta row; it was damaged "
                "or written by something else"
            )
        uid, version = rows[0]
        self._moved_to(version)
        self._recheck_at = time.monotonic() + _RECHECK_SECONDS
        self._uid = uid

    def _moved_to(self, version: int | None) -> None:
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
        return self.version >= migrations.TOKENS_SINCE or getattr(self._fixed, "on", False)

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
        lock, applied = self._sql["SETUP_LOCK_SHARED"], self._sql["APPLIED_VERSION"]
        key = (f"swarmstate.setup:{self.schema}",)

        def work(conn: psycopg.Connection[Any]) -> T:
            with conn.transaction():
                with conn.pipeline():
                    conn.cursor().execute(lock, key)
                    cur = conn.cursor(row_factory=tuple_row)
                    cur.execute(applied)
                row = cur.fetchone()
                self._moved_to(row[0] if row else None)
                outer, self._fixed.on = getattr(self._fixed, "on", False), True
                try:
                    with self.holding(conn):
                        return call()
                finally:
                    self._fixed.on = outer

        return self.run(work)

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


PROBE_TIMEOUT = 5
"""Seconds the first connection of a new store may take (unless the conninfo sets its own)."""


def _probe(conninfo: str | None) -> None:
    """Connect once, so that a bad conninfo or an unreachable database fails now, by its cause.

    A pool connects in the background and reports a failure only as a
    timeout of the first call that needs a connection (30 seconds later),
    the cause left in its log lines.
    """
    assert conninfo is not None
    # libpq's errors may quote the connection string, password and all: each
    # is raised as our own message with the password hidden, outside the
    # except block, so that no exception in the chain holds it.
    refused: str | None = None
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        refused = _cause(exc, conninfo)
    if refused is not None:
        raise InvalidArgumentError(
            f"conninfo {safe_conninfo(conninfo)!r} is not a PostgreSQL connection string: "
            f"{refused} (use a postgresql:// URL or libpq key=value text)"
        )
    timeout = params.get("connect_timeout") or PROBE_TIMEOUT
    try:
        dsn = psycopg.conninfo.make_conninfo(conninfo, connect_timeout=timeout)
        psycopg.connect(dsn, autocommit=True).close()
    except psycopg.Error as exc:
        refused = _cause(exc, conninfo)
    if refused is not None:
        raise StorageError(
            f"cannot connect to PostgreSQL with {safe_conninfo(conninfo)!r}: {refused}"
        )


def _cause(exc: psycopg.Error, conninfo: str) -> str:
    """libpq's error text on one line, without the password ``conninfo`` holds."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return hide_password(" ".join(lines), conninfo) or type(exc).__name__

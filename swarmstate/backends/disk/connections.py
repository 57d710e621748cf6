"""DiskStore's connections: one per reading thread, one writer per process, fork and close.

Each thread reads on its own connection (a new thread takes over one whose
thread has ended). The writes of a process queue on one lock and go through
one connection, taking SQLite's write lock up front (``BEGIN IMMEDIATE``):
SQLite empties a connection's page cache when the file changed since its
last transaction, so with a connection per thread a write after another
thread's write started cold, reading each page of its b-tree paths again;
the one writer of a process is usually the last to have changed the file,
and finds them cached. A process that forks opens fresh connections (see
:mod:`swarmstate.backends.disk.process`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

from swarmstate._errors import InvalidKeyError, ReadOnlyStoreError, StorageError, StoreClosedError
from swarmstate.backends.disk import opening, process, readonly
from swarmstate.backends.disk.driver import Connection, apsw

__all__ = ["IDLE_CONNECTIONS", "Connections"]

_T = TypeVar("_T")

IDLE_CONNECTIONS = 8
"""Connections of ended threads kept open for new threads to take over."""


class Connections:
    """The connections of one DiskStore handle: reads, writes and their transactions, close.

    What the store and its helpers run SQL through. Every method that fails
    raises a swarmstate error (:meth:`fail` translates apsw's); after
    :meth:`close`, or while it runs, they raise
    :class:`~swarmstate.StoreClosedError`.

    Args:
        path: The database file (already checked and created by the caller).
        readonly: Open read-only connections only (see :mod:`.readonly`); any
            write raises :class:`~swarmstate.ReadOnlyStoreError`.
        synchronous: ``"NORMAL"`` or ``"FULL"``, set on every read-write connection.
        busy_timeout: Seconds to wait for another writer's lock, for calls in
            flight at :meth:`close`, and at ``fork()`` for a write in progress.
    """

    path: str
    readonly: bool
    synchronous: str
    busy_timeout: float
    closed: bool
    pid: int
    """The process the connections belong to (a forked child opens its own)."""
    write_lock: threading.Lock
    """Held by each write of this process, from ``BEGIN IMMEDIATE`` to its end."""
    _local: threading.local
    _conns: list[process.Entry]
    _conns_lock: threading.Lock
    _writer: Connection | None
    _write_cursor: apsw.Cursor | None

    def __init__(self, path: str, *, readonly: bool, synchronous: str, busy_timeout: float) -> None:
        self.path = path
        self.readonly = readonly
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.closed = False
        self._reset_process_state()
        process.register(self)

    def retry_busy(
        self,
        attempt: Callable[[], _T],
        busy: tuple[type[apsw.Error], ...] = (apsw.BusyError,),
    ) -> _T:
        """Run ``attempt`` again, with a growing pause, while it fails busy.

        SQLite's busy handler waits ``busy_timeout`` for a lock, but a few busy
        cases skip it (WAL recovery by another process, another opener's
        journal-mode switch); those are retried here within the same budget.
        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                return attempt()
            except busy:
                if time.monotonic() + pause > deadline or self.closed:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    # -- connections -----------------------------------------------------

    def _reset_process_state(self) -> None:
        """Per-process state: this thread's connection, the list to close, the write lock."""
        self.pid = os.getpid()
        self._local = threading.local()
        self._conns: list[process.Entry] = []
        self._conns_lock = threading.Lock()
        # Threads of one process queue here, without SQLite's sleep-and-retry.
        self.write_lock = threading.Lock()
        self._writer: Connection | None = None  # used only with write_lock held
        # A cursor of _writer kept for one-statement writes: apsw's
        # Connection.execute makes (and drops) a cursor on every call.
        self._write_cursor: apsw.Cursor | None = None

    def _check_open(self) -> None:
        """Raise once closed; after a fork, leave the parent's connections behind."""
        if self.closed:
            raise self._closed_error()
        if os.getpid() != self.pid:
            # Several threads of a child may get here at once: one resets. The
            # lock is free in every child (the fork hooks hold it across fork);
            # the inherited _conns_lock may not be, and is not taken.
            with process.RESETTING:
                if os.getpid() != self.pid:
                    self._abandon()
                    self._reset_process_state()

    def _abandon(self) -> None:
        """In a forked child: keep the parent's connections and kept cursor, unused, for good.

        Closing or freeing them would take their SQLite mutex, which a parent
        thread inside a statement held at the fork.
        """
        process.ABANDONED.extend(self._own_connections())
        if self._write_cursor is not None:
            process.ABANDONED.append(self._write_cursor)

    def _own_connections(self) -> list[Connection]:
        writer = [] if self._writer is None else [self._writer]
        return [conn for _, conn in self._conns] + writer

    def conn(self) -> Connection:
        """This thread's connection; opens one on first use and after a fork."""
        self._check_open()
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or (self.readonly and readonly.went_stale(self.path, self._local.stamp)):
            conn = self.new_connection()
        return conn

    def _write_conn(self) -> Connection:
        """The connection this process writes with.

        Call :meth:`_check_open` first (after a fork it replaces the lock),
        then this with ``write_lock`` held.
        """
        if self.closed:  # close() ran meanwhile
            raise self._closed_error()
        conn = self._writer
        if conn is not None:
            if conn.in_transaction:
                # Left open by a call interrupted between BEGIN and its handler
                # (an asynchronous exception); nothing of it was committed.
                conn.execute("ROLLBACK")
            return conn
        self.check_writable()
        self._check_not_wedged()
        conn = self._open_read_write()
        if self.closed:  # a close() that gave up waiting for the lock ran meanwhile
            conn.close()
            raise self._closed_error()
        self._writer = conn
        return conn

    def _open_read_write(self) -> Connection:
        try:
            conn = opening.open_connection(self.path)
            opening.configure(conn, self.synchronous, self.busy_timeout)
        except apsw.Error as exc:
            raise self.fail(exc, "open a connection") from exc
        return conn

    def _check_not_wedged(self) -> None:
        if process.forked_mid_write(self.path):
            raise StorageError(
                f"{self.path}: this process was forked while another thread of its parent "
                f"was inside a write to this file for longer than busy_timeout, so SQLite "
                "in this process will always see that write's lock as taken; use the file "
                "from a process started with spawn or forkserver, or fork when no write runs"
            )

    def new_connection(self) -> Connection:
        """A connection for this thread, opened (or taken over from an ended thread) now."""
        self._check_not_wedged()
        adopted = None if self.readonly else self._adopt()
        if adopted is not None:
            self._local.conn = adopted
            return adopted
        if self.readonly:
            try:
                conn, self._local.stamp = readonly.open_readonly(self.path)
                readonly.configure_readonly(conn, self.busy_timeout)
            except apsw.Error as exc:
                raise self.fail(exc, "open a connection") from exc
        else:
            conn = self._open_read_write()
        current = threading.current_thread()
        with self._conns_lock:
            if self.closed:  # close() ran since _conn() checked: this one is not its to close
                conn.close()
                raise self._closed_error()
            alive = []
            idle = 0
            for thread_ref, other in self._conns:
                thread = thread_ref()
                ended = thread is None or not thread.is_alive()
                if ended and idle < IDLE_CONNECTIONS and not other.in_transaction:
                    idle += 1  # kept for the next new thread (see _adopt)
                    alive.append((thread_ref, other))
                elif ended or thread is current:
                    # Its thread is gone, or this one replaces it (a read-only
                    # connection that went stale): nothing else can be using it.
                    with suppress(apsw.Error):
                        other.close()
                else:
                    alive.append((thread_ref, other))
            alive.append((weakref.ref(current), conn))
            self._conns = alive
        self._local.conn = conn
        return conn

    def _adopt(self) -> Connection | None:
        """The connection of a thread that has ended, now this thread's; None if there is none.

        LangGraph runs a graph's checkpoint writes on the threads of an
        executor made for each ``invoke``: without this, every ``invoke``
        would open (and parse the schema of) a new connection per thread.
        A connection left inside a transaction is not taken (opening a new
        one closes it).
        """
        current = threading.current_thread()
        with self._conns_lock:
            if self.closed:
                raise self._closed_error()
            for i, (thread_ref, conn) in enumerate(self._conns):
                thread = thread_ref()
                if (thread is None or not thread.is_alive()) and not conn.in_transaction:
                    self._conns[i] = (weakref.ref(current), conn)
                    return conn
        return None

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
        self.closed = True
        if os.getpid() != self.pid:
            with process.RESETTING:
                self._abandon()
                self._conns, self._writer, self._write_cursor = [], None, None
            return
        deadline = time.monotonic() + self.busy_timeout
        held = self.write_lock.acquire(timeout=self.busy_timeout)
        try:
            with self._conns_lock:
                writer = self._writer
                conns = self._conns
                if writer is not None:
                    conns = [*conns, (weakref.ref(threading.current_thread()), writer)]
                left_open = process.close_all(conns, deadline)
                # What is still open stays tracked, for close() to be called again.
                self._conns = [entry for entry in left_open if entry[1] is not writer]
                still = any(entry[1] is writer for entry in left_open)
                self._writer = writer if still else None
                if self._writer is None:
                    self._write_cursor = None  # closed with its connection
                left = len(left_open)
        finally:
            if held:
                self.write_lock.release()
        if left:
            raise StorageError(
                f"DiskStore({self.path!r}).close(): {left} connection(s) still in use by "
                f"other threads after busy_timeout ({self.busy_timeout:g} s); they were "
                "interrupted: call close() again once those calls have returned"
            )

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"DiskStore({self.path!r}) is closed; open a new one")

    def fail(self, exc: BaseException, action: str) -> Exception:
        if self.closed:  # the connection was closed under this call
            return self._closed_error()
        if isinstance(exc, UnicodeEncodeError):
            return InvalidKeyError(
                f"namespaces and keys must be valid Unicode to be stored in SQLite, "
                f"got a lone surrogate ({exc.reason}); encode such text first"
            )
        return opening.translate(exc, self.path, action)

    def check_writable(self) -> None:
        if self.readonly:
            raise ReadOnlyStoreError(
                f"DiskStore({self.path!r}) was opened with readonly=True; "
                "open it without readonly to write"
            )

    def write(
        self, action: str, body: Callable[[Connection], _T], conn: Connection | None = None
    ) -> _T:
        """Run ``body`` in one write transaction that holds the write lock from the start.

        On the process's write connection, or on ``conn`` (this thread's).
        """
        self.check_writable()
        self._check_open()
        with self.write_lock:
            try:
                if conn is None:
                    conn = self._write_conn()
                try:
                    self.retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
                    result = body(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    # Also after a failed COMMIT: never leave the lock held.
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except (apsw.Error, UnicodeEncodeError) as exc:
                raise self.fail(exc, action) from exc
        return result

    def read_in(self, action: str, body: Callable[[Connection], _T]) -> _T:
        """Run ``body`` in one read transaction: a consistent view, no write lock."""
        conn = self.conn()
        try:
            conn.execute("BEGIN")
            try:
                return body(conn)
            finally:
                conn.execute("COMMIT")
        except (apsw.Error, UnicodeEncodeError) as exc:
            raise self.fail(exc, action) from exc

    def query(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """One read statement in autocommit: its rows."""
        conn = self.conn()
        try:
            return conn.execute(query, params).fetchall()
        except (apsw.Error, UnicodeEncodeError) as exc:
            raise self.fail(exc, "read") from exc

    def one_statement(self, statement: str, params: tuple[Any, ...], count: bool = False) -> int:
        """Run one write as an autocommit statement; whether it changed a row (or how many).

        One statement takes the write lock at its start (no upgrade) and is
        its own transaction. False (0) leaves everything as it was (the
        statement changed nothing, or the file was busy): the caller then runs
        the checked write in a transaction of its own, which tells these apart.
        """
        if self._writer is None or os.getpid() != self.pid:
            self._check_open()
        with self.write_lock:
            conn = self._writer
            if conn is None or self.closed or conn.in_transaction:
                conn = self._write_conn()
            try:
                cursor = self._write_cursor
                if cursor is None or cursor.connection is not conn:
                    cursor = self._write_cursor = conn.cursor()
                cursor.execute(statement, params)
                return conn.changes() if count else bool(conn.changes())
            except (apsw.Error, UnicodeEncodeError) as exc:
                if not isinstance(exc, apsw.BusyError):
                    raise self.fail(exc, "write") from exc
        return False

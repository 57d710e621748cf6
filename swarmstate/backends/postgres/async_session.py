"""PostgresStore's async session: its ``AsyncConnectionPool``, and the plans run on an event loop.

:class:`AsyncSession` runs the plans of :mod:`.calls.reads` and :mod:`.calls.writes`
(see :mod:`.plans`) on psycopg's async connections: an awaited call holds
no thread while it waits on the server. It shares its
:class:`~.session.Session` (the schema's version and uid, the statements,
retries, how errors are translated) and adds only the awaiting I/O, so the
async methods answer exactly as the blocking ones do.

The invariant: a connection taken from the pool goes back to it whatever
ends the call, cancellation included (the return is shielded from it), and
a transaction a cancelled call opened is rolled back before it does.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from swarmstate._errors import InvalidArgumentError, StorageError
from swarmstate.backends.postgres.driver import (
    AsyncConnectionPool,
    AsyncPooledConnection,
    keep,
    psycopg,
    rollback_quietly_async,
    tuple_row,
)
from swarmstate.backends.postgres.plans import Atomic, Batch, Fetch, Params, Plan, Ready, Rows
from swarmstate.backends.postgres.session import RETRIES, Session

__all__ = ["AsyncSession"]

T = TypeVar("T")

Connection = psycopg.AsyncConnection[Any]


class AsyncSession:
    """The async connections of one PostgresStore handle.

    Args:
        session: The store's session, whose schema state this one shares.
        pool: An ``AsyncConnectionPool`` the caller owns (never closed
            here); None to open one from the session's conninfo on the first
            awaited call, on that call's event loop, sized as the session's.

    Safe for many tasks of one event loop at once: they share the pool. A
    pool the store opened belongs to the loop that opened it.
    """

    def __init__(self, session: Session, pool: AsyncConnectionPool[Any] | None) -> None:
        self.session = session
        self._pool = pool
        self._owns_pool = pool is None
        self._open = pool is not None  # a pool passed in is the caller's to open
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()
        self._close_asked = False  # by close(), once
        self._closing: asyncio.Task[None] | None = None  # close()'s task on the pool's loop

    # -- the pool ------------------------------------------------------------

    @property
    def pool(self) -> AsyncConnectionPool[Any] | None:
        """The async pool, once there is one."""
        return self._pool

    def usable_here(self) -> bool:
        """Whether the running loop has this session's pool open: ``aopen()`` (or an
        ``afrom_conn_string`` block, or a first awaited call) opened it on this loop,
        or the caller passed one. A pool is never opened implicitly for a caller
        that only asks, so a store used by ``asyncio.run`` now and then keeps no
        pool bound to a loop that ends."""
        if self.session.closed or self._pool is None or not self._open:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is None or self._loop is loop

    async def connections(self) -> AsyncConnectionPool[Any]:
        """The pool, opened on this event loop on the first call."""
        session = self.session
        if session.closed:
            raise session.closed_error()
        pool = self._pool
        if self._open and pool is not None:
            if self._loop is not None and self._loop is not asyncio.get_running_loop():
                raise self._other_loop()
            return pool
        return await self._opening()

    async def _opening(self) -> AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        if self._pool is None:
            conninfo = self.session.conninfo
            if conninfo is None:
                raise InvalidArgumentError(
                    "this PostgresStore was given pool= and no async_pool=: pass "
                    "async_pool=psycopg_pool.AsyncConnectionPool(...) too, or open it with "
                    "a conninfo to let it open its own"
                )
            min_size, max_size, timeout = self.session.sized
            self._pool = AsyncConnectionPool(
                conninfo,
                min_size=min_size,
                max_size=max_size,
                timeout=timeout,
                kwargs={"autocommit": True},
                connection_class=AsyncPooledConnection,
                open=False,
                name=f"swarmstate-async-{self.session.schema}",
            )
            self._loop = loop
        elif self._loop is not None and self._loop is not loop:
            raise self._other_loop()
        pool = self._pool
        await pool.open()  # idempotent: tasks racing the first call all wait for it
        self._open = True
        return pool

    def _other_loop(self) -> StorageError:
        return StorageError(
            "this PostgresStore's async pool was opened on another event loop; a store's "
            "async methods run on the loop of its first awaited call (open one store per "
            "loop, and aclose() it on its loop)"
        )

    # -- calls ---------------------------------------------------------------

    async def run(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """Await ``work`` on a pooled connection, retrying as :meth:`.Session.run` does."""
        session = self.session
        pool = await self.connections()
        for attempt in range(RETRIES):
            try:
                conn = await pool.getconn()
                try:
                    result = await work(conn)
                    if not conn.autocommit:
                        await conn.commit()
                except BaseException:
                    await asyncio.shield(_give_back(pool, conn))
                    raise
                await asyncio.shield(_give_back(pool, conn))
                return result
            except psycopg.Error as exc:  # PoolTimeout and PoolClosed are psycopg errors too
                pause = session.backoff(exc, attempt)
                if pause is not None:
                    await asyncio.sleep(pause)
                    continue
                failure = exc
                break
        else:  # pragma: no cover
            raise AssertionError("unreachable")
        error, chained = session.failed(failure)
        if not chained:
            # Raised outside the except block: no exception in the chain holds the password.
            raise error
        raise error from failure

    async def drive(self, plan: Plan[T], conn: Connection | None = None) -> T:
        """Run ``plan`` to its end, awaiting each step; its result.

        With ``conn``, every step runs on it (inside its transaction).
        Each step's error, cancellation included, is thrown into the plan.
        """
        try:
            step = next(plan)
            while True:
                try:
                    result = await self._perform(step, conn)
                except BaseException as exc:
                    step = plan.throw(exc)
                else:
                    step = plan.send(result)
        except StopIteration as done:
            result = done.value
        return result  # type: ignore[no-any-return]

    async def _perform(self, step: object, conn: Connection | None) -> Any:
        kind = type(step)
        if kind is Fetch:
            assert isinstance(step, Fetch)
            await self.ready(conn)
            text, params = self.session.statement(step.name), step.params
            if conn is not None:
                return await _fetch(conn, text, params)
            return await self.run(lambda c: _fetch(c, text, params))
        if kind is Ready:
            await self.ready(conn)
            return None
        if kind is Batch:
            assert isinstance(step, Batch)
            await self.ready(conn)
            texts = [(self.session.statement(name), params) for name, params in step.statements]
            if conn is not None:
                return await _pipeline(conn, texts)
            return await self.run(lambda c: _pipeline(c, texts))
        if kind is Atomic:
            assert isinstance(step, Atomic)
            make = step.make

            async def atomic(c: Connection) -> Any:
                async with c.transaction():
                    return await self.drive(make(), c)

            return await (atomic(conn) if conn is not None else self.run(atomic))
        raise TypeError(f"not a plan's step: {step!r}")

    async def ready(self, conn: Connection | None = None) -> None:
        """:meth:`.Session.ready`, awaited: read the schema's uid and version unless known."""
        session = self.session
        if session.known():
            return
        text = session.statement("OPEN")

        async def work(c: Connection) -> Rows:
            async with c.cursor(row_factory=tuple_row) as cur:
                await cur.execute(text)
                return await cur.fetchall()

        session.opened(await (work(conn) if conn is not None else self.run(work)))

    # -- lifecycle -----------------------------------------------------------

    async def close(self) -> None:
        """Close the pool if this session opened it; idempotent."""
        pool = self._pool
        if not self._owns_pool or pool is None or pool.closed or self._pid != os.getpid():
            return
        try:
            await pool.close()
        except psycopg.Error as exc:
            raise StorageError(f"closing the PostgreSQL async pool failed: {exc}") from exc

    def close_soon(self) -> None:
        """Close an open pool this session opened from outside an awaited call (``close()``).

        On its loop's thread the close is a task of that loop; from another
        thread it is handed to that loop. A loop that is not running cannot
        close it: a :class:`ResourceWarning` says to call ``aclose()``.
        """
        pool, loop = self._pool, self._loop
        if not self._owns_pool or pool is None or pool.closed or self._pid != os.getpid():
            return
        if self._close_asked:
            return
        self._close_asked = True
        assert loop is not None
        if not loop.is_running():
            warnings.warn(
                "a PostgresStore was closed with close() while its async pool was open and "
                "its event loop was not running, so the pool is left open; close a store "
                "used with await with 'await store.aclose()' (or 'async with store') on its loop",
                ResourceWarning,
                stacklevel=3,
            )
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._closing = loop.create_task(pool.close())  # kept: a task only weakly held
        else:
            asyncio.run_coroutine_threadsafe(pool.close(), loop)


async def _give_back(pool: AsyncConnectionPool[Any], conn: Connection) -> None:
    """End what ``conn`` may have left open and return it to ``pool``."""
    await rollback_quietly_async(conn)
    await pool.putconn(conn)


async def _fetch(conn: Connection, text: str, params: Params) -> Rows:
    """Run one statement on ``conn`` and return its rows (one round trip)."""
    if not isinstance(conn, AsyncPooledConnection):
        async with conn.cursor(row_factory=tuple_row, binary=True) as fresh:
            await fresh.execute(text, params)
            return await fresh.fetchall()
    cur = conn.hot_cursor
    if cur is None or cur.closed:
        cur = conn.hot_cursor = conn.cursor(row_factory=tuple_row, binary=True)
    await cur.execute(text, params)
    rows = await cur.fetchall()
    if not keep(rows):
        conn.hot_cursor = None
        await cur.close()  # frees the result; the next call makes a new cursor
    return rows


async def _pipeline(conn: Connection, texts: list[tuple[str, Params]]) -> list[Rows]:
    """Run statements in one pipeline on ``conn`` (one round trip); each one's rows."""
    cursors = []
    async with conn.pipeline():
        for text, params in texts:
            # Separate cursors: each statement's result stays with its cursor.
            cur = conn.cursor(row_factory=tuple_row, binary=True)
            await cur.execute(text, params)
            cursors.append(cur)
    return [await cur.fetchall() for cur in cursors]

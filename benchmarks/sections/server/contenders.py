"""The server section's contenders: ours and the upstream async saver, on a file and on PostgreSQL.

Each is opened as its users open it in a server's lifespan and closed on
the same event loop at the end (:func:`open_contenders` enters everything
into the caller's ``AsyncExitStack``):

- on a file, ``SwarmStateSaver(DiskStore(path, synchronous="NORMAL"))``
  (``async with`` the store) beside ``AsyncSqliteSaver`` on an
  ``aiosqlite`` connection in WAL mode at ``synchronous=NORMAL`` (the fair
  pair: the same fsync policy);
- on PostgreSQL, ``SwarmStateSaver(PostgresStore(dsn, max_size=pool))``
  (its async pool opened with ``aopen``, closed with ``aclose``) beside
  ``AsyncPostgresSaver`` on a ``psycopg_pool.AsyncConnectionPool`` of the
  same ``max_size``, with the connection settings its docs give
  (autocommit, no prepared statements), each in a schema of its own on the
  same server, both schemas dropped at the end.

Ours is used only through its public API: whatever the saver's async
methods do is what is measured.
"""

import asyncio
import importlib.metadata
import secrets
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.growth_savers import drop_schema

__all__ = ["OURS_DISK", "OURS_PG", "PAIRS", "PEER_DISK", "PEER_PG", "Contender", "open_contenders"]

OURS_DISK = "SwarmStateSaver(DiskStore NORMAL)"
PEER_DISK = "AsyncSqliteSaver NORMAL"
OURS_PG = "SwarmStateSaver(PostgresStore)"
PEER_PG = "AsyncPostgresSaver"
# (store kind, ours, the upstream async saver beside it), in run order
PAIRS = (("disk", OURS_DISK, PEER_DISK), ("postgres", OURS_PG, PEER_PG))


@dataclass
class Contender:
    """One checkpointer of the run and how it was opened (recorded with its rows)."""

    name: str
    store: str  # disk or postgres
    ours: bool
    checkpointer: Any
    setup: dict[str, Any] = field(default_factory=dict)


async def open_contenders(
    stack: AsyncExitStack, tmp: Path, pg_dsn: str | None, pool_size: int
) -> list[Contender]:
    """Every contender of the run, each pair adjacent (ours, then its peer), in :data:`PAIRS` order.

    Everything opened is closed (and every schema dropped) when ``stack`` closes.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    out = await _disk(stack, tmp)
    if pg_dsn:
        out += await _postgres(stack, pg_dsn, pool_size)
    return out


async def _disk(stack: AsyncExitStack, tmp: Path) -> list[Contender]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    store = await stack.enter_async_context(DiskStore(tmp / "server-ours.db", synchronous="NORMAL"))
    conn = await stack.enter_async_context(aiosqlite.connect(str(tmp / "server-peer.sqlite")))
    await conn.execute("PRAGMA journal_mode=WAL")
    await conn.execute("PRAGMA synchronous=NORMAL")
    peer = AsyncSqliteSaver(conn)
    await peer.setup()
    setup = {"synchronous": "NORMAL", "journal_mode": "WAL"}
    aiosqlite_version = importlib.metadata.version("aiosqlite")
    return [
        Contender(OURS_DISK, "disk", True, SwarmStateSaver(store), dict(setup)),
        Contender(PEER_DISK, "disk", False, peer, {**setup, "aiosqlite": aiosqlite_version}),
    ]


async def _postgres(stack: AsyncExitStack, dsn: str, pool_size: int) -> list[Contender]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg_pool import AsyncConnectionPool

    from swarmstate.backends.postgres import PostgresStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    run = f"bench_server_{secrets.token_hex(4)}"
    ours_schema, peer_schema = f"{run}_ours", f"{run}_peer"
    # Pushed first, so they run last: after the pools are closed.
    stack.push_async_callback(asyncio.to_thread, drop_schema, dsn, ours_schema)
    stack.push_async_callback(asyncio.to_thread, drop_schema, dsn, peer_schema)
    server = await asyncio.to_thread(_server_settings, dsn, peer_schema)

    store = PostgresStore(dsn, schema=ours_schema, max_size=pool_size)
    await stack.enter_async_context(store)  # aclose() at the end
    await asyncio.to_thread(store.setup)
    await store.aopen()

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo=dsn,
        max_size=pool_size,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "options": f"-c search_path={peer_schema}",
        },
        open=False,
    )
    await stack.enter_async_context(pool)
    peer = AsyncPostgresSaver(pool)
    await peer.setup()
    return [
        Contender(
            OURS_PG, "postgres", True, SwarmStateSaver(store),
            {"max_size": pool_size, "pool": "PostgresStore's own", **server},
        ),
        Contender(
            PEER_PG, "postgres", False, peer,
            {"max_size": pool_size, "pool": "AsyncConnectionPool", **server},
        ),
    ]  # fmt: skip


def _server_settings(dsn: str, peer_schema: str) -> dict[str, str]:
    """Create the peer's schema; the server's ``fsync`` and ``synchronous_commit``, read back."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{peer_schema}"')
        settings = {}
        for name in ("fsync", "synchronous_commit"):
            row = conn.execute(f"SHOW {name}").fetchone()
            settings[name] = str(row[0]) if row else "?"
    return settings

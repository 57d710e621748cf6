"""The shapes section's contenders: ours on each store beside the saver it replaces.

Each :class:`Contender` is a checkpointer whose class is a subclass of the
saver's own (``harness.growth_savers.timing``) that records how long each ``put`` takes in a
list the harness owns, so the runtime's real ``put`` calls are timed from
inside ``invoke`` and nothing is set on a saver or store object. A
contender also knows its stored bytes, how to open a new saver on the same
file or database (a restarted process: a new store or connection object,
nothing read before), and how to clean up.

Pairs, in run order (:data:`PAIRS`): ``SwarmStateSaver(Store)`` and
``InMemorySaver``; ``SwarmStateSaver(DiskStore NORMAL)`` and ``SqliteSaver``
with WAL and ``synchronous=NORMAL``; ``SwarmStateSaver(PostgresStore)`` and
``PostgresSaver`` on the same server (with a DSN).
"""

import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.growth_savers import (
    drop_schema,
    inmemory_bytes,
    peer_connection,
    pg_bytes,
    sqlite_bytes,
    store_bytes,
    timing,
)

__all__ = [
    "PAIRS",
    "Contender",
    "Reader",
    "analyze_schema",
    "close_all",
    "make_contenders",
]

OURS_MEMORY = "SwarmStateSaver(Store)"
OURS_DISK = "SwarmStateSaver(DiskStore NORMAL)"
OURS_PG = "SwarmStateSaver(PostgresStore)"
# (store kind, ours, the peer it replaces)
PAIRS = (
    ("memory", OURS_MEMORY, "InMemorySaver"),
    ("disk", OURS_DISK, "SqliteSaver NORMAL"),
    ("postgres", OURS_PG, "PostgresSaver"),
)


@dataclass
class Reader:
    """A new checkpointer over a contender's stored data, and how to close it."""

    checkpointer: Any
    close: Callable[[], None]


@dataclass
class Contender:
    """One saver of a shape's run."""

    name: str
    store: str  # memory, disk or postgres
    ours: bool
    checkpointer: Any
    stored_bytes: Callable[[], int]
    close: Callable[[], None]
    reopen: Callable[[], Reader] | None = None
    analyze: Callable[[], None] | None = None
    puts: list[int] = field(default_factory=list)


def analyze_schema(dsn: str, schema: str) -> None:
    """``ANALYZE`` every table of one schema (plans for the tables as filled, not as empty)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(
                sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            )


def make_contenders(tag: str, tmp: Path, pg_dsn: str | None) -> list[Contender]:
    """Every contender of one run, pairs adjacent (ours, then its peer), in :data:`PAIRS` order.

    ``tag`` names this run's files and schemas (one per shape).
    """
    out = [*_memory(), *_disk(tag, tmp)]
    if pg_dsn:
        out += _postgres(tag, pg_dsn)
    return out


def _memory() -> list[Contender]:
    from langgraph.checkpoint.memory import InMemorySaver

    import swarmstate
    from swarmstate.integrations.langgraph import SwarmStateSaver

    ours_puts: list[int] = []
    store = swarmstate.Store()
    ours = timing(SwarmStateSaver, ours_puts)(store)
    peer_puts: list[int] = []
    peer = timing(InMemorySaver, peer_puts)()
    return [
        Contender(
            OURS_MEMORY, "memory", True, ours, lambda: store_bytes(store), store.close,
            puts=ours_puts,
        ),
        Contender(
            "InMemorySaver", "memory", False, peer, lambda: inmemory_bytes(peer), lambda: None,
            puts=peer_puts,
        ),
    ]  # fmt: skip


def _disk(tag: str, tmp: Path) -> list[Contender]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    ours_path, peer_path = tmp / f"{tag}-ours.db", tmp / f"{tag}-peer.sqlite"
    store = DiskStore(ours_path, synchronous="NORMAL")
    ours_puts: list[int] = []
    ours = timing(SwarmStateSaver, ours_puts)(store)

    def reopen_ours() -> Reader:
        again = DiskStore(ours_path, synchronous="NORMAL")
        again.get("swarmstate-bench", "open")  # the connection open, nothing of the thread read
        return Reader(SwarmStateSaver(again), again.close)

    conn = _sqlite_normal(peer_path)
    peer_puts: list[int] = []
    peer = timing(SqliteSaver, peer_puts)(conn)
    peer.setup()

    def reopen_peer() -> Reader:
        again = _sqlite_normal(peer_path)
        saver = SqliteSaver(again)
        saver.setup()  # a no-op on an existing file; otherwise the first read would run it
        return Reader(saver, again.close)

    return [
        Contender(
            OURS_DISK, "disk", True, ours, lambda: sqlite_bytes(ours_path, True), store.close,
            reopen=reopen_ours, puts=ours_puts,
        ),
        Contender(
            "SqliteSaver NORMAL", "disk", False, peer, lambda: sqlite_bytes(peer_path, False),
            conn.close, reopen=reopen_peer, puts=peer_puts,
        ),
    ]  # fmt: skip


def _sqlite_normal(path: Path) -> sqlite3.Connection:
    """A connection as SqliteSaver's users open it, at ``synchronous=NORMAL`` (WAL: its setup)."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _postgres(tag: str, dsn: str) -> list[Contender]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from swarmstate.backends.postgres import PostgresStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    run = f"{tag}_{random.Random().getrandbits(32):08x}"
    ours_schema, peer_schema = f"{run}_ours", f"{run}_peer"
    store = PostgresStore(dsn, schema=ours_schema)
    store.setup()
    ours_puts: list[int] = []
    ours = timing(SwarmStateSaver, ours_puts)(store)

    def close_ours() -> None:
        store.close()
        drop_schema(dsn, ours_schema)

    def reopen_ours() -> Reader:
        again = PostgresStore(dsn, schema=ours_schema)
        again.get("swarmstate-bench", "open")  # connected, nothing of the thread read
        return Reader(SwarmStateSaver(again), again.close)

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{peer_schema}"')
    conn = peer_connection(dsn, peer_schema)
    peer_puts: list[int] = []
    peer = timing(PostgresSaver, peer_puts)(conn)
    peer.setup()

    def close_peer() -> None:
        conn.close()
        drop_schema(dsn, peer_schema)

    def reopen_peer() -> Reader:
        again = peer_connection(dsn, peer_schema)
        again.execute("SELECT 1")
        return Reader(PostgresSaver(again), again.close)

    return [
        Contender(
            OURS_PG, "postgres", True, ours, lambda: pg_bytes(dsn, ours_schema), close_ours,
            reopen=reopen_ours, analyze=lambda: analyze_schema(dsn, ours_schema), puts=ours_puts,
        ),
        Contender(
            "PostgresSaver", "postgres", False, peer, lambda: pg_bytes(dsn, peer_schema),
            close_peer, reopen=reopen_peer, analyze=lambda: analyze_schema(dsn, peer_schema),
            puts=peer_puts,
        ),
    ]  # fmt: skip


def close_all(contenders: list[Contender]) -> None:
    """Close every contender (each even if another's close fails; the first error is raised)."""
    failed: BaseException | None = None
    for contender in contenders:
        try:
            contender.close()
        except Exception as exc:
            failed = failed or exc
    if failed is not None:
        raise failed

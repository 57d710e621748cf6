"""The growth section's contenders: every saver on every store, and what each stores.

Each :class:`Saver` is a checkpointer wrapped to time its ``put`` calls, with
how to read its stored bytes and how to close it. ``make_savers`` builds
those this machine can run, in a fixed order (``sections_growth`` runs them in
lockstep).
"""

import contextlib
import functools
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["GrowthConfig", "Saver", "drop_schema", "make_savers", "timed"]


@dataclass
class GrowthConfig:
    """What one growth run does."""

    turns: int = 200
    seed: int = 7
    reads: int = 15  # get_state / history calls per saver after the run
    marks: tuple[int, ...] = (10, 25, 50, 100, 150, 200)  # turns where bytes are read
    pg_dsn: str | None = None
    graphs: tuple[str, ...] = ("plain", "delta")
    savers: tuple[str, ...] | None = None  # None: every saver that can run here
    extra: dict[str, Any] = field(default_factory=dict)


def timed(cls: type, put_ns: list[int]) -> type:
    """A subclass of a saver class that appends how long each ``put`` takes to ``put_ns``."""

    def put(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return super(timed_class, self).put(*args, **kwargs)
        finally:
            put_ns.append(time.perf_counter_ns() - start)

    timed_class: type = type(f"Timed{cls.__name__}", (cls,), {"put": put})
    return timed_class


@dataclass
class Saver:
    """One contender: its checkpointer, how to read its stored bytes, how to close it.

    ``put_ns`` holds how long each of the checkpointer's ``put`` calls took (see :func:`timed`).
    """

    name: str
    checkpointer: Any
    stored_bytes: Callable[[], int]
    close: Callable[[], None]
    put_ns: list[int] = field(default_factory=list)


def _sqlite_bytes(path: Path, apsw_file: bool) -> int:
    """Database plus WAL bytes after folding the WAL in, so every layout is measured alike.

    The checkpoint runs through the SQLite library that has the file open
    (apsw's for DiskStore, the standard library's for SqliteSaver): closing a
    connection of another copy of SQLite would drop the process's POSIX locks
    on the file under the open one.
    """
    if apsw_file:
        import apsw

        conn = apsw.Connection(str(path))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    else:
        with contextlib.closing(sqlite3.connect(path)) as std:
            std.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _pg_bytes(dsn: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a schema a section made on the server it was given, with all it holds."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _memory_bytes_inmemory(saver: Any) -> int:
    total = 0
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for checkpoint, metadata, _ in checkpoints.values():
                total += len(checkpoint[1]) + len(metadata[1])
    total += sum(len(blob[1]) for blob in saver.blobs.values())
    for writes in saver.writes.values():
        total += sum(len(w[2][1]) for w in writes.values())
    return total


def _memory_bytes_store(store: Any) -> int:
    return int(store.snapshot().size_bytes)


def make_savers(cfg: GrowthConfig, tmp: Path, graph: str) -> list[Saver]:
    """Every contender that can run on this machine, in a fixed order."""
    import swarmstate as ss
    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    out: list[Saver] = []
    wanted = set(cfg.savers) if cfg.savers else None

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    if want("SwarmStateSaver(Store)"):
        store = ss.Store()
        times: list[int] = []
        out.append(
            Saver(
                "SwarmStateSaver(Store)",
                timed(SwarmStateSaver, times)(store),
                functools.partial(_memory_bytes_store, store),
                store.close,
                times,
            )
        )
    for level in ("NORMAL", "FULL"):
        name = f"SwarmStateSaver(DiskStore {level})"
        if want(name):
            path = tmp / f"{graph}-ours-{level.lower()}.db"
            disk = DiskStore(path, synchronous=level)
            times = []
            ours = timed(SwarmStateSaver, times)(disk)
            bytes_of = functools.partial(_sqlite_bytes, path, True)
            out.append(Saver(name, ours, bytes_of, disk.close, times))
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if want("InMemorySaver"):
        times = []
        mem = timed(InMemorySaver, times)()
        out.append(
            Saver(
                "InMemorySaver",
                mem,
                functools.partial(_memory_bytes_inmemory, mem),
                lambda: None,
                times,
            )
        )
    for label, level in (("shipped", None), ("NORMAL", "NORMAL")):
        name = f"SqliteSaver {label}"
        if not want(name):
            continue
        path = tmp / f"{graph}-sqlite-{label.lower()}.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        times = []
        saver = timed(SqliteSaver, times)(conn)
        saver.setup()
        if level:
            conn.execute(f"PRAGMA synchronous = {level}")
        bytes_of = functools.partial(_sqlite_bytes, path, False)
        out.append(Saver(name, saver, bytes_of, conn.close, times))
    if cfg.pg_dsn:
        out.extend(_pg_savers(cfg, graph, want))
    return out


def _pg_savers(cfg: GrowthConfig, graph: str, want: Callable[[str], bool]) -> list[Saver]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from swarmstate.backends.postgres import PostgresStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    assert cfg.pg_dsn is not None
    out: list[Saver] = []
    tag = f"growth_{graph}_{random.Random().getrandbits(32):08x}"
    # Each closer drops its own schema: the names are distinct variables (a
    # closure over one rebound name dropped the peer's schema twice, ours never).
    dsn = cfg.pg_dsn
    if want("SwarmStateSaver(PostgresStore)"):
        ours_schema = f"{tag}_ours"
        store = PostgresStore(cfg.pg_dsn, schema=ours_schema)
        store.setup()

        def close_ours() -> None:
            store.close()
            drop_schema(dsn, ours_schema)

        times: list[int] = []
        out.append(
            Saver(
                "SwarmStateSaver(PostgresStore)",
                timed(SwarmStateSaver, times)(store),
                functools.partial(_pg_bytes, cfg.pg_dsn, ours_schema),
                close_ours,
                times,
            )
        )
    if want("PostgresSaver"):
        peer_schema = f"{tag}_peer"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{peer_schema}"')
        conn = psycopg.connect(
            cfg.pg_dsn,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={peer_schema}",
        )
        peer_times: list[int] = []
        peer = timed(PostgresSaver, peer_times)(conn)
        peer.setup()

        def close_peer() -> None:
            conn.close()
            drop_schema(dsn, peer_schema)

        out.append(
            Saver(
                "PostgresSaver",
                peer,
                functools.partial(_pg_bytes, cfg.pg_dsn, peer_schema),
                close_peer,
                peer_times,
            )
        )
    return out

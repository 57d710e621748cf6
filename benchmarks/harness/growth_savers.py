"""The growth section's contenders: every saver on every store, and what each stores.

Each :class:`Saver` is a checkpointer wrapped to time its ``put`` calls, with
how to read its stored bytes and how to close it. ``make_savers`` builds
those this machine can run, in a fixed order (``sections.growth`` runs them in
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

__all__ = [
    "GrowthConfig",
    "Saver",
    "drop_schema",
    "inmemory_bytes",
    "make_savers",
    "peer_connection",
    "pg_bytes",
    "sqlite_bytes",
    "store_bytes",
    "timing",
]


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


def timing(cls: type, sink: list[int]) -> type:
    """A subclass of saver class ``cls`` whose ``put`` appends its duration (ns) to ``sink``.

    ``sink`` belongs to the caller (nothing is set on the saver); a copy of
    the saver (LangGraph copies a checkpointer to extend its serializer's
    allowlist) is of the same class and records into the same list.
    """

    class Timed(cls):  # type: ignore[misc, valid-type]
        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return super().put(config, checkpoint, metadata, new_versions)
            finally:
                sink.append(time.perf_counter_ns() - start)

    Timed.__name__ = Timed.__qualname__ = f"Timed{cls.__name__}"
    return Timed


@dataclass
class Saver:
    """One contender: its checkpointer, how to read its stored bytes, how to close it."""

    name: str
    checkpointer: Any
    stored_bytes: Callable[[], int]
    close: Callable[[], None]
    puts: list[int] = field(default_factory=list)  # ns of each put (``timing``'s sink)


def sqlite_bytes(path: Path, apsw_file: bool) -> int:
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


def pg_bytes(dsn: str, schema: str) -> int:
    """Total size of the relations (tables, their indexes and TOAST) in one schema."""
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


def inmemory_bytes(saver: Any) -> int:
    """The serialized bytes an ``InMemorySaver`` holds: checkpoints, metadata, blobs, writes."""
    total = 0
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for checkpoint, metadata, _ in checkpoints.values():
                total += len(checkpoint[1]) + len(metadata[1])
    total += sum(len(blob[1]) for blob in saver.blobs.values())
    for writes in saver.writes.values():
        total += sum(len(w[2][1]) for w in writes.values())
    return total


def store_bytes(store: Any) -> int:
    """The encoded bytes of every value an in-memory ``Store`` holds."""
    return int(store.snapshot().size_bytes)


def make_savers(cfg: GrowthConfig, tmp: Path, graph: str) -> list[Saver]:
    """Every contender that can run on this machine, in a fixed order."""
    import swarmstate
    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    out: list[Saver] = []
    wanted = set(cfg.savers) if cfg.savers else None

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    if want("SwarmStateSaver(Store)"):
        store = swarmstate.Store()
        puts: list[int] = []
        out.append(
            Saver(
                "SwarmStateSaver(Store)",
                timing(SwarmStateSaver, puts)(store),
                functools.partial(store_bytes, store),
                store.close,
                puts,
            )
        )
    for level in ("NORMAL", "FULL"):
        name = f"SwarmStateSaver(DiskStore {level})"
        if want(name):
            path = tmp / f"{graph}-ours-{level.lower()}.db"
            disk = DiskStore(path, synchronous=level)
            puts = []
            saver = timing(SwarmStateSaver, puts)(disk)
            out.append(
                Saver(name, saver, functools.partial(sqlite_bytes, path, True), disk.close, puts)
            )
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if want("InMemorySaver"):
        puts = []
        mem = timing(InMemorySaver, puts)()
        out.append(
            Saver("InMemorySaver", mem, functools.partial(inmemory_bytes, mem), lambda: None, puts)
        )
    for label, level in (("shipped", None), ("NORMAL", "NORMAL")):
        name = f"SqliteSaver {label}"
        if not want(name):
            continue
        path = tmp / f"{graph}-sqlite-{label.lower()}.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        puts = []
        saver = timing(SqliteSaver, puts)(conn)
        saver.setup()
        if level:
            conn.execute(f"PRAGMA synchronous = {level}")
        bytes_of = functools.partial(sqlite_bytes, path, False)
        out.append(Saver(name, saver, bytes_of, conn.close, puts))
    if cfg.pg_dsn:
        out.extend(_pg_savers(cfg, graph, want))
    return out


def _pg_savers(cfg: GrowthConfig, graph: str, want: Callable[[str], bool]) -> list[Saver]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

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

        ours_puts: list[int] = []
        out.append(
            Saver(
                "SwarmStateSaver(PostgresStore)",
                timing(SwarmStateSaver, ours_puts)(store),
                functools.partial(pg_bytes, cfg.pg_dsn, ours_schema),
                close_ours,
                ours_puts,
            )
        )
    if want("PostgresSaver"):
        peer_schema = f"{tag}_peer"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{peer_schema}"')
        conn = peer_connection(cfg.pg_dsn, peer_schema)
        peer_puts: list[int] = []
        peer = timing(PostgresSaver, peer_puts)(conn)
        peer.setup()

        def close_peer() -> None:
            conn.close()
            drop_schema(dsn, peer_schema)

        out.append(
            Saver(
                "PostgresSaver",
                peer,
                functools.partial(pg_bytes, cfg.pg_dsn, peer_schema),
                close_peer,
                peer_puts,
            )
        )
    return out


def peer_connection(dsn: str, schema: str, settings: str = "") -> Any:
    """A connection as PostgresSaver takes it (autocommit, dict rows), on its own schema.

    ``settings``: more server settings for the session (``-c name=value``).
    """
    import psycopg
    from psycopg.rows import dict_row

    return psycopg.connect(
        dsn,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema} {settings}".strip(),
    )

"""The many-threads section's stores and how threads are written into them.

A :class:`Population` is one file or schema holding ``threads`` threads for
one saver: ours on ``DiskStore`` NORMAL or ``PostgresStore``, or the peer
(``SqliteSaver`` NORMAL, ``PostgresSaver``). Threads are written through the
saver's own ``put`` and ``put_writes`` (:class:`ThreadWriter`), never loaded
in bulk, so the stored state is exactly what a user's graphs leave.

On PostgreSQL the threads are written on sessions with
``synchronous_commit=off``: the same statements and the same stored rows,
without waiting for each commit's WAL flush (a hundred thousand threads are
seven hundred thousand commits). What is measured afterwards runs on new
sessions with the server's settings.
"""

import datetime
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.growth_savers import drop_schema, peer_connection, pg_bytes, sqlite_bytes
from benchmarks.sections.shapes.savers import analyze_schema

__all__ = [
    "KINDS",
    "ONE_DAY",
    "Chain",
    "Opened",
    "Population",
    "ThreadWriter",
    "populations",
    "thread_ids",
]

ONE_DAY = datetime.timedelta(days=1)
CHECKPOINTS = 3  # per thread, each with its pending writes
# store kind -> (ours, the peer it replaces)
KINDS = {
    "disk": ("SwarmStateSaver(DiskStore NORMAL)", "SqliteSaver NORMAL"),
    "postgres": ("SwarmStateSaver(PostgresStore)", "PostgresSaver"),
}
_BUILD_SETTINGS = "-c synchronous_commit=off"


def thread_ids(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct seeded thread ids, in no particular order (as UUIDs would be)."""
    out: dict[str, None] = {}
    while len(out) < count:
        out[f"{rng.getrandbits(64):016x}-{rng.getrandbits(32):08x}"] = None
    return list(out)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class ThreadWriter:
    """The runtime's calls for a thread: each checkpoint's ``put``, then its tasks' ``put_writes``.

    The checkpoints are the recorded conversation's (``swarmstate._bench.conversation``)
    with fresh ids (LangGraph's ``uuid6``) and timestamps of now, so every
    thread is younger than a day and ids sort by time, as the runtime's do.
    """

    def __init__(self, conversation: Any) -> None:
        self.conversation = conversation

    def thread(self, saver: Any, thread_id: str, put_ns: list[int] | None = None) -> None:
        """Write one thread of :data:`CHECKPOINTS` checkpoints; each put's time into ``put_ns``."""
        from swarmstate._bench.conversation import Replay

        replay = Replay(self.conversation, saver, thread_id)
        chain = Chain(replay)
        for k in range(CHECKPOINTS):
            args = chain.put_args(k)
            start = time.perf_counter_ns()
            saver.put(*args)
            if put_ns is not None:
                put_ns.append(time.perf_counter_ns() - start)
            chain.writes(k)


class Chain:
    """Put arguments of one replayed thread with fresh checkpoint ids and timestamps."""

    def __init__(self, replay: Any) -> None:
        from langgraph.checkpoint.base.id import uuid6

        self.replay = replay
        self._uuid6 = uuid6
        self.ids: list[str] = []

    def id_of(self, k: int) -> str:
        while len(self.ids) <= k:
            self.ids.append(str(self._uuid6(clock_seq=len(self.ids))))
        return self.ids[k]

    def put_args(self, k: int) -> tuple[Any, Any, Any, Any]:
        config, checkpoint, metadata, new_versions = self.replay.put_args(k)
        checkpoint["id"], checkpoint["ts"] = self.id_of(k), _now()
        if k:
            config["configurable"]["checkpoint_id"] = self.id_of(k - 1)
        return config, checkpoint, metadata, new_versions

    def writes(self, k: int) -> None:
        """Every task's ``put_writes`` from checkpoint ``k``, in task path order."""
        saver, replay = self.replay.saver, self.replay
        config = replay.config(k, self.id_of(k))
        for task in replay.steps[k].tasks:
            saver.put_writes(config, list(task.writes), task.task_id, task.task_path)


@dataclass
class Opened:
    """A saver opened on a population, how to close it, and (ours) one with a policy."""

    saver: Any
    close: Callable[[], None]
    with_policy: Any = None  # ours: a second saver on the same store, Retention on


@dataclass
class Population:
    """One file or schema of ``threads`` threads written by one saver."""

    kind: str
    name: str
    ours: bool
    threads: int
    writer: Callable[[], Opened]  # a saver to write the threads with
    reader: Callable[[], Opened]  # a saver as a user opens one afterwards
    stored_bytes: Callable[[], int]
    cli_args: list[str]  # PATH (and --schema) for `swarmstate threads`
    drop: Callable[[], None]
    analyze: Callable[[], None] | None = None


def populations(kind: str, threads: int, tmp: Path, dsn: str | None, tag: str) -> list[Population]:
    """Ours and the peer for ``threads`` threads on store ``kind`` (disk or postgres)."""
    if kind == "disk":
        return _disk(threads, tmp)
    assert dsn is not None
    return _postgres(threads, dsn, tag)


def _ours(store: Any) -> Opened:
    from swarmstate.integrations.langgraph import Retention, SwarmStateSaver

    policy = SwarmStateSaver(store, retention=Retention(older_than=ONE_DAY))
    return Opened(SwarmStateSaver(store), store.close, policy)


def _disk(threads: int, tmp: Path) -> list[Population]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from swarmstate.backends.disk import DiskStore

    ours_path, peer_path = (
        tmp / f"threads-{threads}-ours.db",
        tmp / f"threads-{threads}-peer.sqlite",
    )

    def ours() -> Opened:
        return _ours(DiskStore(ours_path, synchronous="NORMAL"))

    def peer() -> Opened:
        import sqlite3

        conn = sqlite3.connect(str(peer_path), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()  # WAL
        conn.execute("PRAGMA synchronous=NORMAL")
        return Opened(saver, conn.close)

    def remove(*paths: Path) -> Callable[[], None]:
        def drop() -> None:
            for path in paths:
                for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    part.unlink(missing_ok=True)

        return drop

    ours_name, peer_name = KINDS["disk"]
    return [
        Population(
            "disk", ours_name, True, threads, ours, ours,
            lambda: sqlite_bytes(ours_path, True), [str(ours_path)], remove(ours_path),
        ),
        Population(
            "disk", peer_name, False, threads, peer, peer,
            lambda: sqlite_bytes(peer_path, False), [str(peer_path)], remove(peer_path),
        ),
    ]  # fmt: skip


def _postgres(threads: int, dsn: str, tag: str) -> list[Population]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import make_conninfo

    from swarmstate.backends.postgres import PostgresStore

    ours_schema, peer_schema = f"{tag}_{threads}_ours", f"{tag}_{threads}_peer"
    building = make_conninfo(dsn, options=_BUILD_SETTINGS)

    def ours_writer() -> Opened:
        store = PostgresStore(building, schema=ours_schema)
        store.setup()
        return _ours(store)

    def ours_reader() -> Opened:
        return _ours(PostgresStore(dsn, schema=ours_schema))

    def peer_writer() -> Opened:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{peer_schema}"')
        conn = peer_connection(dsn, peer_schema, _BUILD_SETTINGS)
        saver = PostgresSaver(conn)
        saver.setup()
        return Opened(saver, conn.close)

    def peer_reader() -> Opened:
        conn = peer_connection(dsn, peer_schema)
        return Opened(PostgresSaver(conn), conn.close)

    ours_name, peer_name = KINDS["postgres"]
    return [
        Population(
            "postgres", ours_name, True, threads, ours_writer, ours_reader,
            lambda: pg_bytes(dsn, ours_schema), [dsn, "--schema", ours_schema],
            lambda: drop_schema(dsn, ours_schema),
            analyze=lambda: analyze_schema(dsn, ours_schema),
        ),
        Population(
            "postgres", peer_name, False, threads, peer_writer, peer_reader,
            lambda: pg_bytes(dsn, peer_schema), [], lambda: drop_schema(dsn, peer_schema),
            analyze=lambda: analyze_schema(dsn, peer_schema),
        ),
    ]  # fmt: skip

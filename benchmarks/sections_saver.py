"""Sections "saver" (issue 4) and "postgres" (issue 6): SwarmStateSaver against LangGraph's savers.

Every saver receives the same checkpoint stream (built once per section from
the seed). Groups are measured apart and never compared across: in memory
(SwarmStateSaver(Store) vs InMemorySaver) and durable on a file (DiskStore
NORMAL/FULL vs SqliteSaver with synchronous=NORMAL and as shipped).
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import CheckpointStream, Results, bare_apsw

from swarmstate._bench import Op, interleave, latency_stats

if TYPE_CHECKING:
    from run import Config

SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
DECODE_FLOOR = "floor: serializer decode"
PUT_FLOOR = "floor: encode + bare INSERT"


def _have(module: str, attr: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def _cfg(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _fill(saver: Any, thread: str, stream: CheckpointStream, count: int) -> None:
    parent: str | None = None
    for cp, meta, versions in stream.items[:count]:
        saver.put(_cfg(thread, parent), dict(cp), meta, versions)
        parent = cp["id"]


def _decode_floor(stream: CheckpointStream) -> Callable[[int], object]:
    """Decoding the thread's 10 newest checkpoints with LangGraph's serializer, no store.

    Every saver returning those checkpoints does at least this (the peers
    decode the same channel values, split differently).
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    newest = [serde.dumps_typed(cp) for cp, _, _ in stream.items[-10:]]
    loads = serde.loads_typed
    return lambda i: [loads(typed) for typed in newest]


def _bare_put(path: Path) -> Callable[[dict[str, Any]], object]:
    """The least a durable put does: encode the checkpoint, one apsw INSERT, WAL, NORMAL."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    conn = bare_apsw(path, "NORMAL")
    dumps = JsonPlusSerializer().dumps_typed
    insert = "INSERT OR REPLACE INTO kv VALUES ('put', ?1, ?2)"

    def put(checkpoint: dict[str, Any]) -> object:
        return conn.execute(insert, (checkpoint["id"], dumps(checkpoint)[1]))

    return put


def _sqlite_saver(path: Path, synchronous: str | None) -> tuple[Any, str]:
    """SqliteSaver on a file; ``synchronous=None`` leaves it as shipped."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous={synchronous}")
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    return saver, SYNC_NAMES.get(level, str(level))


class _Group:
    """Savers measured together: same stream, same thread lengths, interleaved rounds."""

    def __init__(
        self,
        name: str,
        savers: dict[str, Any],
        fsync: dict[str, str],
        prefix: str = "",
        *,
        after_fill: Callable[[], None] | None = None,
        setup: str | None = None,
        put_floor: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        self.name, self.savers, self.fsync = name, savers, fsync
        # Thread ids start with ``prefix`` so a shared server never mixes runs.
        self.prefix = prefix
        # Runs once every saver's threads are filled, before any measurement
        # (the postgres group refreshes table statistics there); ``setup``
        # says what it did, in every row.
        self.after_fill, self.setup = after_fill, setup
        # The least a durable put must do, measured beside the savers' puts.
        self.put_floor = put_floor

    def run(self, cfg: Config, res: Results, lengths: list[int], scale: int = 1) -> None:
        rng = cfg.rng(f"{self.name}.stream")
        longest = max(lengths)
        grow = CheckpointStream(rng, longest, message_kind=cfg.messages)
        calls = max(20, cfg.iters // scale)
        put_stream = CheckpointStream(
            rng, calls + cfg.warmup + 1, start_ticks=0x1F1 << 48, message_kind=cfg.messages
        )
        writes = [put_stream.writes(rng, i) for i in range(calls + cfg.warmup)]
        section = "postgres" if self.name == "postgres" else "saver"
        for saver in self.savers.values():
            for n in lengths:
                _fill(saver, f"{self.prefix}grow-{n}", grow, n)
        if self.after_fill is not None:
            self.after_fill()
        latest = [
            Op(f"{label}|{n}", lambda i, s=saver, t=f"{self.prefix}grow-{n}": s.get_tuple(_cfg(t)))
            for label, saver in self.savers.items()
            for n in lengths
        ]
        samples = interleave(latest, calls=calls, rounds=cfg.rounds, warmup=cfg.warmup)
        list_calls = max(20, calls // 5)
        listing = [
            Op(
                label,
                lambda i, s=saver, t=f"{self.prefix}grow-{longest}": list(
                    s.list(_cfg(t), limit=10)
                ),
            )
            for label, saver in self.savers.items()
        ]
        listing.append(Op(DECODE_FLOOR, _decode_floor(grow)))
        listed = interleave(listing, calls=list_calls, rounds=cfg.rounds, warmup=5)

        put_thread = f"{self.prefix}put"

        def put_op(saver: Any) -> Callable[[int], object]:
            def call(i: int) -> object:
                cp, meta, versions = put_stream.items[i + 1]
                parent = _cfg(put_thread, put_stream.items[i][0]["id"])
                return saver.put(parent, dict(cp), meta, versions)

            return call

        for saver in self.savers.values():
            first, meta, versions = put_stream.items[0]
            saver.put(_cfg(put_thread), dict(first), meta, versions)
        put_ops = [Op(label, put_op(saver)) for label, saver in self.savers.items()]
        if self.put_floor is not None:
            floor = self.put_floor
            put_ops.append(Op(PUT_FLOOR, lambda i: floor(put_stream.items[i + 1][0])))
        puts = interleave(put_ops, calls=calls, rounds=cfg.rounds, warmup=cfg.warmup)
        last = _cfg(put_thread, put_stream.items[calls + cfg.warmup][0]["id"])
        pending = interleave(
            [
                Op(label, lambda i, s=saver: s.put_writes(last, writes[i][1], writes[i][0]))
                for label, saver in self.savers.items()
            ],
            calls=calls,
            rounds=cfg.rounds,
            warmup=cfg.warmup,
        )
        for label in self.savers:
            meta = {
                "section": section,
                "saver_group": self.name,
                "saver": label,
                "fsync": self.fsync[label],
            }
            if self.setup is not None:
                meta["setup"] = self.setup
            for n in lengths:
                res.add(
                    f"{self.name}.latest.{label}.{n}",
                    latency_stats(samples[f"{label}|{n}"]),
                    group="latest",
                    subject="get_tuple (latest)",
                    param=n,
                    **meta,
                )
            res.add(
                f"{self.name}.list10.{label}.{longest}",
                latency_stats(listed[label]),
                group="list",
                subject="list(limit=10)",
                param=longest,
                **meta,
            )
            res.add(
                f"{self.name}.put.{label}",
                latency_stats(puts[label]),
                group="put",
                subject="put",
                param=None,
                **meta,
            )
            res.add(
                f"{self.name}.put_writes.{label}",
                latency_stats(pending[label]),
                group="put_writes",
                subject="put_writes (3 writes)",
                param=None,
                **meta,
            )
        floor_meta = {"section": section, "saver_group": self.name, "saver": "floor"}
        res.add(
            f"{self.name}.list10.floor.{longest}",
            latency_stats(listed[DECODE_FLOOR]),
            group="floor",
            subject="LangGraph's serializer decoding the 10 newest checkpoints, no store",
            param=longest,
            fsync="none (no store)",
            **floor_meta,
        )
        if self.put_floor is not None:
            res.add(
                f"{self.name}.put.floor",
                latency_stats(puts[PUT_FLOOR]),
                group="floor",
                subject="serializer encode + one bare apsw INSERT OR REPLACE of its bytes",
                param=None,
                fsync="WAL, synchronous=NORMAL",
                **floor_meta,
            )


def section_saver(cfg: Config, res: Results, workdir: Path) -> None:
    """In-memory and durable checkpoint latency, and latest-read as the thread grows."""
    from langgraph.checkpoint.memory import InMemorySaver

    workdir.mkdir(parents=True, exist_ok=True)
    have_saver = _have("swarmstate.integrations.langgraph", "SwarmStateSaver")
    have_disk = _have("swarmstate.backends.disk", "DiskStore")
    if not have_saver:
        res.skipped["saver.SwarmStateSaver"] = "swarmstate.integrations.langgraph not available"
    if not have_disk:
        res.skipped["saver.DiskStore"] = "swarmstate.backends.disk not available"
    lengths = cfg.thread_lengths

    memory: dict[str, Any] = {"InMemorySaver": InMemorySaver()}
    if have_saver:
        import swarmstate as ss
        from swarmstate.integrations.langgraph import SwarmStateSaver

        memory = {"SwarmStateSaver(Store)": SwarmStateSaver(ss.Store()), **memory}
    _Group("memory", memory, dict.fromkeys(memory, "none (in memory)")).run(cfg, res, lengths)

    durable: dict[str, Any] = {}
    fsync: dict[str, str] = {}
    if have_saver and have_disk:
        from swarmstate.backends.disk import DiskStore
        from swarmstate.integrations.langgraph import SwarmStateSaver

        for level in ("NORMAL", "FULL"):
            label = f"SwarmStateSaver(DiskStore {level})"
            durable[label] = SwarmStateSaver(
                DiskStore(workdir / f"disk-{level}.db", synchronous=level)
            )
            fsync[label] = f"WAL, synchronous={level}"
    for label, level in (("SqliteSaver NORMAL", "NORMAL"), ("SqliteSaver shipped", None)):
        durable[label], actual = _sqlite_saver(workdir / f"{label.split()[1]}.sqlite", level)
        fsync[label] = f"WAL, synchronous={actual}"
    put_floor = _bare_put(workdir / "floor.db") if have_disk else None
    _Group("durable", durable, fsync, put_floor=put_floor).run(cfg, res, lengths)
    for saver in durable.values():
        close = getattr(getattr(saver, "store", None), "close", None) or getattr(
            getattr(saver, "conn", None), "close", None
        )
        if close is not None:
            close()

    top = max(lengths)
    ours, peer = "SwarmStateSaver(Store)", "InMemorySaver"
    res.limit(
        4, "in memory: put p50 / InMemorySaver", f"memory.put.{ours}", f"memory.put.{peer}", 1.0
    )
    res.limit(
        4,
        "in memory: latest read at 50 / InMemorySaver",
        f"memory.latest.{ours}.50",
        f"memory.latest.{peer}.50",
        0.8,
    )
    res.limit(
        4,
        "in memory: latest read at 2,000 / InMemorySaver",
        f"memory.latest.{ours}.2000",
        f"memory.latest.{peer}.2000",
        0.4,
    )
    res.limit(
        4,
        "in memory: our latest read at 2,000 / ours at 5",
        f"memory.latest.{ours}.2000",
        f"memory.latest.{ours}.5",
        1.2,
    )
    res.limit(
        4,
        "in memory: list(limit=10) at 2,000 / InMemorySaver",
        f"memory.list10.{ours}.2000",
        f"memory.list10.{peer}.2000",
        0.25,
        floor="memory.list10.floor.2000",
    )
    normal, full = "SwarmStateSaver(DiskStore NORMAL)", "SwarmStateSaver(DiskStore FULL)"
    res.limit(
        4,
        "durable: DiskStore NORMAL put p50 / SqliteSaver NORMAL",
        f"durable.put.{normal}",
        "durable.put.SqliteSaver NORMAL",
        0.7,
        floor="durable.put.floor",
    )
    res.limit(
        4,
        "durable: DiskStore NORMAL put p50 / SqliteSaver shipped (FULL)",
        f"durable.put.{normal}",
        "durable.put.SqliteSaver shipped",
        0.25,
    )
    res.limit(
        4,
        "durable: DiskStore FULL put p50 / SqliteSaver shipped (FULL)",
        f"durable.put.{full}",
        "durable.put.SqliteSaver shipped",
        1.0,
    )
    for n in (50, 2000):
        res.limit(
            4,
            f"durable: latest read at {n:,} / SqliteSaver shipped",
            f"durable.latest.{normal}.{n}",
            f"durable.latest.SqliteSaver shipped.{n}",
            0.8,
        )
    res.limit(
        4,
        "durable: our latest read at 2,000 / ours at 5 (flat, read as <= 1.2)",
        f"durable.latest.{normal}.2000",
        f"durable.latest.{normal}.5",
        1.2,
    )
    res.limit(
        4,
        "durable: list(limit=10) at 2,000 / SqliteSaver shipped",
        f"durable.list10.{normal}.2000",
        "durable.list10.SqliteSaver shipped.2000",
        0.5,
        floor="durable.list10.floor.2000",
    )
    del top


def section_postgres(cfg: Config, res: Results, workdir: Path) -> None:
    """SwarmStateSaver(PostgresStore) against PostgresSaver on the same server."""
    import secrets

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    assert cfg.pg_dsn
    savers: dict[str, Any] = {}
    conn = psycopg.connect(cfg.pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    peer = PostgresSaver(conn)  # type: ignore[arg-type]
    peer.setup()
    have = _have("swarmstate.backends.postgres", "PostgresStore") and _have(
        "swarmstate.integrations.langgraph", "SwarmStateSaver"
    )
    store = None
    if have:
        from swarmstate.backends.postgres import PostgresStore
        from swarmstate.integrations.langgraph import SwarmStateSaver

        schema = f"bench_{secrets.token_hex(4)}"
        store = PostgresStore(cfg.pg_dsn, schema=schema)
        store.setup()
        savers["SwarmStateSaver(PostgresStore)"] = SwarmStateSaver(store)
    else:
        res.skipped["postgres.PostgresStore"] = "swarmstate.backends.postgres not available"
    savers["PostgresSaver"] = peer
    settings = {
        name: conn.execute(f"SHOW {name}").fetchone()[name]  # type: ignore[index]
        for name in ("fsync", "synchronous_commit")
    }
    policy = (
        f"server fsync={settings['fsync']}, synchronous_commit={settings['synchronous_commit']}"
    )
    fsync = dict.fromkeys(savers, policy)
    lengths = [n for n in cfg.thread_lengths]
    prefix = f"run-{secrets.token_hex(4)}-"
    # PostgreSQL plans with table statistics that autovacuum refreshes only
    # now and then; LangGraph's read queries cost several times more on
    # unanalyzed tables, so whether they had been analyzed would decide the
    # ratios. Analyze both savers' tables once they are filled: every row is
    # then measured in the steady state a running server reaches.
    # Unqualified, as PostgresSaver names them (resolved by search_path).
    analyzed = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
    if store is not None:
        analyzed += [f'"{schema}".{table}' for table in ("entries", "meta", "snapshots")]

    def analyze() -> None:
        for table in analyzed:
            conn.execute(f"ANALYZE {table}")

    setup = "ANALYZE on both savers' tables after filling, before measuring"
    _Group("postgres", savers, fsync, prefix, after_fill=analyze, setup=setup).run(
        cfg, res, lengths, scale=5
    )
    # Leave a shared server as we found it.
    for n in [*lengths, "put"]:
        peer.delete_thread(f"{prefix}grow-{n}" if n != "put" else f"{prefix}put")
    if store is not None:
        store.close()
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.close()
    ours, theirs = "SwarmStateSaver(PostgresStore)", "PostgresSaver"
    res.limit(
        6,
        "latest read at 2,000 / PostgresSaver",
        f"postgres.latest.{ours}.2000",
        f"postgres.latest.{theirs}.2000",
        0.3,
    )
    res.limit(
        6,
        "our latest read at 2,000 / ours at 5",
        f"postgres.latest.{ours}.2000",
        f"postgres.latest.{ours}.5",
        1.3,
    )
    res.limit(
        6,
        "list(limit=10) at 2,000 / PostgresSaver",
        f"postgres.list10.{ours}.2000",
        f"postgres.list10.{theirs}.2000",
        0.2,
    )
    res.limit(6, "put p50 / PostgresSaver", f"postgres.put.{ours}", f"postgres.put.{theirs}", 1.0)

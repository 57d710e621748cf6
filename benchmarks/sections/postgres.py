"""Section "postgres": SwarmStateSaver(PostgresStore) against PostgresSaver on the same server.

Needs ``--pg-dsn``. Both savers replay the saver section's recorded
conversations (``harness.savers``: ``langchain_core`` messages in the ``postgres``
group, plain dict messages in ``postgres_dict``); thread ids carry a random
prefix and our store
a schema of its own, so a shared server never mixes runs, and both are
removed afterwards.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.results import Results
from benchmarks.harness.savers import (
    SERVER_FLOORS,
    STREAMS,
    floor_blobs,
    have,
    put_floor,
    read_claims,
)
from benchmarks.sections.saver import measure
from swarmstate._bench import Op

OURS, PEER = "SwarmStateSaver(PostgresStore)", "PostgresSaver"


def section_postgres(cfg: Config, res: Results, workdir: Path) -> None:
    """SwarmStateSaver(PostgresStore) against PostgresSaver on the same server."""
    del workdir  # everything lives on the server
    if not cfg.pg_dsn:
        res.skipped["postgres"] = "no --pg-dsn given (a PostgreSQL server to measure on)"
        _claims(cfg, res, "needs --pg-dsn: a PostgreSQL server")
        return
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    savers: dict[str, Any] = {}
    conn = psycopg.connect(cfg.pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    peer = PostgresSaver(conn)  # type: ignore[arg-type]
    peer.setup()
    store = None
    schema = f"bench_{secrets.token_hex(4)}"
    if have("swarmstate.backends.postgres", "PostgresStore") and have(
        "swarmstate.integrations.langgraph", "SwarmStateSaver"
    ):
        from swarmstate.backends.postgres import PostgresStore
        from swarmstate.integrations.langgraph import SwarmStateSaver

        store = PostgresStore(cfg.pg_dsn, schema=schema)
        store.setup()
        savers[OURS] = SwarmStateSaver(store)
    else:
        res.skipped["postgres.PostgresStore"] = "swarmstate.backends.postgres not available"
    savers[PEER] = peer
    settings = {
        name: conn.execute(f"SHOW {name}").fetchone()[name]  # type: ignore[index]
        for name in ("fsync", "synchronous_commit")
    }
    policy = (
        f"server fsync={settings['fsync']}, synchronous_commit={settings['synchronous_commit']}"
    )
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

    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    # One floor table and thread prefix per recorded stream: the floors' rows
    # are named by op, and both streams run on the same two savers.
    floors = {stream: _Floors(cfg.pg_dsn, f'"{schema}".floor_kv_{stream}') for stream in STREAMS}
    prefixes = {stream: f"{prefix}{stream}-" for stream in STREAMS}
    try:
        for stream in STREAMS:
            floor = floors[stream]
            measure(
                cfg,
                res,
                "postgres" if stream == "pydantic" else f"postgres_{stream}",
                savers,
                dict.fromkeys(savers, policy),
                lambda conv, floor=floor: [put_floor(conv, "floor.put", floor.write)],
                scale=5,
                reads=floor.read_op,
                subjects=SERVER_FLOORS,
                setup="ANALYZE on both savers' tables after filling, before measuring",
                prefix=prefixes[stream],
                after_fill=analyze,
                stream=stream,
            )
    finally:
        # Leave a shared server as we found it.
        for what in [*(f"grow-{n}" for n in cfg.thread_lengths), "put", "writes"]:
            for start in prefixes.values():
                peer.delete_thread(f"{start}{what}")
        for floor in floors.values():
            floor.close()
        if store is not None:
            store.close()
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()
    _claims(cfg, res)


class _Floors:
    """The least a saver on this server does: one statement on a bare table, plus the codec.

    ``floor_kv(key, value)`` in our schema; reads fetch a checkpoint's
    encoded blobs with one SELECT and decode them, puts encode and INSERT
    one row (autocommit: one commit each), as PostgresSaver's connection does.
    """

    def __init__(self, dsn: str, table: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
        self.table = table
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, value bytea NOT NULL)"
        )
        self.loads = _serde().loads_typed

    def write(self, key: str, data: bytes) -> object:
        sql = (
            f"INSERT INTO {self.table} VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        return self.conn.execute(sql, (f"put/{key}", data))

    def read_op(self, conv: Any, name: str, last: int, count: int) -> Op:
        blobs = floor_blobs(conv, last, count)
        prefix = f"{name}/"
        with self.conn.transaction():
            for i, (kind, data) in enumerate(blobs):
                self.conn.execute(
                    f"INSERT INTO {self.table} VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                    (f"{prefix}{i:06d}/{kind}", bytes(data)),
                )
        sql = f"SELECT key, value FROM {self.table} WHERE key >= %s AND key < %s ORDER BY key"
        bounds = (prefix, prefix + "~")
        loads = self.loads

        def read(i: int) -> object:
            rows = self.conn.execute(sql, bounds).fetchall()
            return [loads((key.rsplit("/", 1)[1], value)) for key, value in rows]

        return Op(name, read)

    def close(self) -> None:
        self.conn.close()


def _serde() -> Any:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer()


def _claims(cfg: Config, res: Results, reason: str | None = None) -> None:
    bounds = {"long": 0.3, "flat": 1.3, "list": 0.2}
    read_claims(res, cfg, "postgres", "PostgreSQL", OURS, PEER, bounds, reason)
    # The plain-dict stream, at issue #28's limits (spread within 5% of each).
    bounds = {"mid": 1.0, "long": 1.0, "flat": 1.3, "list": 1.0}
    where = "dict messages, PostgreSQL"
    read_claims(res, cfg, "postgres_dict", where, OURS, PEER, bounds, reason, margin=1.05)
    res.claim(
        "postgres_dict.put",
        f"{where}: put, {OURS} / {PEER}",
        f"postgres_dict.put.{OURS}",
        f"postgres_dict.put.{PEER}",
        1.0,
        section="postgres",
        floor="postgres_dict.put.floor",
        reason=reason,
        floor_label=f"{where}: put, {OURS}",
        spread_bound=1.05,
    )
    res.claim(
        "postgres.put",
        f"PostgreSQL: put, {OURS} / {PEER}",
        f"postgres.put.{OURS}",
        f"postgres.put.{PEER}",
        1.0,
        floor="postgres.put.floor",
        reason=reason,
        floor_label=f"PostgreSQL: put, {OURS}",
    )

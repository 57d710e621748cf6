"""Ad hoc probe: SwarmStateSaver(PostgresStore) against LangGraph's PostgresSaver.

Both savers run in one process against one server (a throwaway cluster the
probe starts unless ``--conninfo`` is given), on the same checkpoints, and
the probe prints per-call p50/p90 in microseconds:

* ``put`` of a checkpoint with a 10 kB channel value,
* ``get_tuple`` of the latest checkpoint with 5 and with 2,000 checkpoints
  in the thread,
* ``list(limit=10)`` with 2,000 checkpoints in the thread.

Not a gate: the benchmark suite (``benchmarks/run.py``) owns the numbers that
go into docs. Usage::

    python benchmarks/pg_probe.py [--conninfo DSN] [--big 2000] [--reps 300]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

from swarmstate.backends.postgres import PostgresStore
from swarmstate.integrations.langgraph import SwarmStateSaver

VALUE = "x" * 10_000


@contextmanager
def server(conninfo: str | None) -> Iterator[str]:
    """The given server, or a throwaway cluster started for this run."""
    if conninfo:
        yield conninfo
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from pgserver import Cluster, find_bindir  # the test plugin's cluster helper

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found: install the postgresql package")
    cluster = Cluster(bindir)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def fill(saver: BaseCheckpointSaver[Any], thread: str, n: int) -> dict[str, Any]:
    """Append ``n`` checkpoints to ``thread``; returns the config of the last."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        config = put_one(saver, config, i)
    return config


def put_one(saver: BaseCheckpointSaver[Any], config: dict[str, Any], i: int) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=i))
    checkpoint["channel_values"] = {"value": VALUE, "step": i}
    checkpoint["channel_versions"] = {"value": i + 1, "step": i + 1}
    versions = {"value": i + 1, "step": i + 1}
    metadata: Any = {"source": "loop", "step": i, "parents": {}}
    return dict(saver.put(config, checkpoint, metadata, versions))  # type: ignore[arg-type]


def timed(fn: Callable[[], object], reps: int, warmup: int = 20) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return {
        "p50_us": round(statistics.median(samples), 1),
        "p90_us": round(samples[int(len(samples) * 0.9)], 1),
    }


def probe(name: str, saver: BaseCheckpointSaver[Any], big: int, reps: int) -> dict[str, Any]:
    small_thread, big_thread = f"{name}-small", f"{name}-big"
    fill(saver, small_thread, 5)
    fill(saver, big_thread, big)
    small = {"configurable": {"thread_id": small_thread, "checkpoint_ns": ""}}
    large = {"configurable": {"thread_id": big_thread, "checkpoint_ns": ""}}
    put_config: dict[str, Any] = {"configurable": {"thread_id": f"{name}-put", "checkpoint_ns": ""}}
    counter = iter(range(10**9))

    def do_put() -> None:
        nonlocal put_config
        put_config = put_one(saver, put_config, next(counter))

    return {
        "put": timed(do_put, reps),
        "get_tuple_latest_5": timed(lambda: saver.get_tuple(small), reps),  # type: ignore[arg-type]
        f"get_tuple_latest_{big}": timed(lambda: saver.get_tuple(large), reps),  # type: ignore[arg-type]
        f"list_limit10_{big}": timed(lambda: list(saver.list(large, limit=10)), reps),  # type: ignore[arg-type]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conninfo", help="an existing server (default: start a temp cluster)")
    parser.add_argument("--big", type=int, default=2000, help="checkpoints in the long thread")
    parser.add_argument("--reps", type=int, default=300, help="timed calls per operation")
    parser.add_argument("--seed", type=int, default=0, help="orders the two savers' turns")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"big": args.big, "reps": args.reps, "seed": args.seed}
    with server(args.conninfo) as conninfo:
        schema = f"probe_{uuid.uuid4().hex[:8]}"
        with (
            Connection.connect(
                conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
            ) as conn,
            PostgresStore.from_conn_string(conninfo, schema=schema) as store,
        ):
            theirs = PostgresSaver(conn)  # type: ignore[arg-type]
            theirs.setup()
            store.setup()
            ours = SwarmStateSaver(store)
            turns = [("postgres_saver", theirs), ("swarmstate_pg", ours)]
            rng.shuffle(turns)
            for name, saver in turns:
                results[name] = probe(name, saver, args.big, args.reps)
                print(name, json.dumps(results[name]), file=sys.stderr)
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    ours_r, theirs_r = results["swarmstate_pg"], results["postgres_saver"]
    results["ratios_p50"] = {
        op: round(ours_r[op]["p50_us"] / theirs_r[op]["p50_us"], 3) for op in ours_r
    }
    results["ours_big_vs_small_latest"] = round(
        ours_r[f"get_tuple_latest_{args.big}"]["p50_us"] / ours_r["get_tuple_latest_5"]["p50_us"],
        3,
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

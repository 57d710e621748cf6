"""Section "retention": expire idle threads, keep the newest checkpoints, give the space back.

The growth section's conversation (``sections.growth``) on many threads of
one store, most of them idle. On the quiet store:

1. ``retain(older_than=...)`` deletes the idle threads, ``reclaim()`` gives
   their room back: rows ``bytes.before``, ``bytes.after_expiry``, and
   ``expiry.reported`` (the report's ``bytes_freed``) against
   ``expiry.given_back`` (what the file lost);
2. ``retain(keep_last=2)`` on the rest, the same pair ``keep_last.*``;
3. the expired threads' amount written again: ``bytes.after_refill``, the
   room reused.

Then a writer in another process (what ``swarmstate prune --reclaim`` meets
while graphs run) invokes turns while ``retain`` and ``reclaim()`` run on
the same store: its ``put`` median, p99 and longest then
(``writer.put_busy``) against the same with nothing else running
(``writer.put_quiet``), and the reclaim's longest step.

Claims (DiskStore): the file after expiring 80% of the threads at most 0.3x
its size before; the report within 20% of what the file gives back (it
estimates each entry's cells and overflow pages by SQLite's file format;
partly filled pages are what it misses); refilling grows the file to at
most 1.25x its size before expiry. PostgreSQL's ``VACUUM`` makes room for
new rows but keeps the files, so only the refill claim applies there; the
other rows are reported as measured. Rows ``retention.<backend>.<what>``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.growth_savers import drop_schema, timing
from benchmarks.harness.results import Results
from benchmarks.sections import growth


def _open(where: tuple[str, str, str]) -> Any:
    """A store from ``(kind, path or DSN, schema)``: what a writer process opens."""
    kind, target, schema = where
    if kind == "disk":
        from swarmstate.backends.disk import DiskStore

        return DiskStore(target)
    from swarmstate.backends.postgres import PostgresStore

    return PostgresStore(target, schema=schema)


Script = list[dict[str, Any]]
"""The text of each turn, as the growth section's graph reads it."""


def _writer(where: tuple[str, str, str], seed: int, ready: Any, stop: Any, out: Any) -> None:
    """In its own process: invoke turns on one live thread until ``stop``; send ``put`` times."""
    from langchain_core.messages import HumanMessage

    from swarmstate.integrations.langgraph import SwarmStateSaver

    script = growth.conversation(seed, 10)
    store = _open(where)
    puts: list[int] = []
    saver = timing(SwarmStateSaver, puts)(store)
    graph = growth.build_graph(saver, False, script)
    turn = 0
    while not stop.is_set():
        if turn == 3:  # imports and the first writes done: measure from here
            puts.clear()
            ready.set()
        at = turn % len(script)
        graph.invoke(
            {
                "messages": [HumanMessage(script[at]["user"], id=f"w-{turn}")],
                "turn": at,
            },
            {"configurable": {"thread_id": "writer"}},
            durability="sync",
        )
        turn += 1
    out.put(list(puts))
    store.close()


def _writer_waits(where: tuple[str, str, str], seed: int, work: Any) -> list[int]:
    """``put`` times of a writer process while ``work()`` runs here (they overlap whole)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_writer, args=(where, seed, ready, stop, out))
    proc.start()
    if not ready.wait(120):
        proc.kill()
        raise RuntimeError("the writer process did not start")
    try:
        work()
    finally:
        stop.set()
    waits: list[int] = out.get(timeout=120)
    proc.join(30)
    return waits


def _p99(samples: list[int]) -> float:
    if len(samples) < 2:
        return float(samples[0])
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def _fill(saver: Any, threads: int, turns: int, prefix: str, script: Script) -> None:
    from langchain_core.messages import HumanMessage

    graph = growth.build_graph(saver, False, script)
    for turn in range(turns):  # turn by turn across the threads, as concurrent users write
        for t in range(threads):
            graph.invoke(
                {
                    "messages": [HumanMessage(content=script[turn]["user"], id=f"u-{turn}")],
                    "turn": turn,
                },
                {"configurable": {"thread_id": f"{prefix}-{t:03d}"}},
                durability="sync",
            )


def _size(store: Any) -> int:
    """The store's size with nothing left to give back: ``reclaim()`` first, then its figure."""
    return int(store.reclaim().bytes_after)


def _one(backend: str, where: tuple[str, str, str], cfg: Config, res: Results) -> None:
    import datetime

    from swarmstate.integrations.langgraph import SwarmStateSaver

    idle, active, turns = (8, 2, 8) if cfg.quick else (40, 10, 40)
    script = growth.conversation(cfg.seed, 10 if cfg.quick else 40)
    store = _open(where)
    saver = SwarmStateSaver(store)
    base = f"retention.{backend}"
    one = {"section": "retention", "subject": backend, "batch": base}

    def row(what: str, value: float, unit: str = "bytes", **extra: Any) -> None:
        res.add(
            f"{base}.{what}",
            {"unit": unit, "p50": value, "rounds_p50": [value], "statistic": "one run", **extra},
            group=what,
            **one,
        )

    # 1. Sizes, on a quiet store: expire the idle threads, then keep_last=2 on the rest.
    _fill(saver, idle, turns, "idle", script)
    split = datetime.datetime.now(datetime.UTC)
    time.sleep(0.01)
    _fill(saver, active, turns, "active", script)
    before = _size(store)
    now = datetime.datetime.now(datetime.UTC)
    expired = saver.retain(older_than=now - split, now=now)
    after_expiry = store.reclaim()
    kept = saver.retain(keep_last=2)
    after_keep = store.reclaim()
    row("bytes.before", before, threads=idle + active, turns=turns)
    row("bytes.after_expiry", after_expiry.bytes_after, threads_deleted=expired.threads_deleted)
    row("expiry.reported", expired.bytes_freed)
    row("expiry.given_back", before - after_expiry.bytes_after)
    row("keep_last.reported", kept.bytes_freed, checkpoints_deleted=kept.checkpoints_deleted)
    # Sizes after reclaim on both sides: its bytes_before counts the log the deletes wrote.
    row("keep_last.given_back", after_expiry.bytes_after - after_keep.bytes_after)
    # 2. Refill what expiry deleted: the store reuses the room it made.
    _fill(saver, idle, turns, "again", script)
    row("bytes.after_refill", _size(store))
    # 3. A writer in another process through a retention run and a reclaim (what
    # `swarmstate prune --reclaim` does while graphs run); the same writer with
    # nothing else running before that.
    quiet = _writer_waits(where, cfg.seed, lambda: time.sleep(1.0 if cfg.quick else 3.0))
    again = [f"again-{t:03d}" for t in range(idle)]
    during: list[Any] = []
    busy = _writer_waits(
        where,
        cfg.seed,
        lambda: during.extend((saver.retain(older_than=0.0, thread_ids=again), store.reclaim())),
    )
    reclaim = during[1]
    for name, waits in (("quiet", quiet), ("busy", busy)):
        p50 = statistics.median(waits) / 1e3
        row(
            f"writer.put_{name}",
            p50,
            "us",
            p99=_p99(waits) / 1e3,
            max=max(waits) / 1e3,
            puts=len(waits),
            statistic=f"p50 of {len(waits):,} puts",
        )
    row("reclaim.longest_step", reclaim.longest_step_seconds * 1e6, "us", steps=reclaim.steps)
    row("reclaim.seconds", reclaim.seconds * 1e6, "us")
    claims: list[tuple[str, str, str, str, float, str]] = [
        (
            "refill",
            "size after refilling what expiry deleted / before expiry",
            "bytes.after_refill",
            "bytes.before",
            1.25,
            "<=",
        ),
    ]
    if backend == "disk":  # VACUUM on PostgreSQL makes room for new rows, keeps the files
        claims += [
            (
                "expiry",
                f"size after expiring {idle} of {idle + active} threads and reclaim / before",
                "bytes.after_expiry",
                "bytes.before",
                0.3,
                "<=",
            ),
            (
                "report.expiry.low",
                "bytes retain() reported (expiry) / bytes reclaim() gave back",
                "expiry.reported",
                "expiry.given_back",
                0.8,
                ">=",
            ),
            (
                "report.expiry.high",
                "bytes retain() reported (expiry) / bytes reclaim() gave back",
                "expiry.reported",
                "expiry.given_back",
                1.2,
                "<=",
            ),
            (
                "report.keep_last.low",
                "bytes retain() reported (keep_last) / bytes reclaim() gave back",
                "keep_last.reported",
                "keep_last.given_back",
                0.8,
                ">=",
            ),
            (
                "report.keep_last.high",
                "bytes retain() reported (keep_last) / bytes reclaim() gave back",
                "keep_last.reported",
                "keep_last.given_back",
                1.2,
                "<=",
            ),
        ]
    for cid, label, num, den, bound, op in claims:
        res.claim(
            f"retention.{cid}.{backend}",
            f"{backend}: {label}",
            f"{base}.{num}",
            f"{base}.{den}",
            bound,
            op=op,
            section="retention",
            per_call=False,
        )
    store.close()


def section_retention(cfg: Config, res: Results, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    _one("disk", ("disk", str(workdir / "retention.db"), ""), cfg, res)
    if cfg.pg_dsn:
        from swarmstate.backends.postgres import PostgresStore

        schema = f"bench_retention_{time.time_ns() % 10**9}"
        with PostgresStore(cfg.pg_dsn, schema=schema) as store:
            store.setup()
        try:
            _one("postgres", ("postgres", cfg.pg_dsn, schema), cfg, res)
        finally:
            drop_schema(cfg.pg_dsn, schema)
    else:
        res.skipped["retention.postgres"] = "needs --pg-dsn"

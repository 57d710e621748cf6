"""Section "retention": expire idle threads, keep the newest checkpoints, give the space back.

The growth section's conversation (``sections_growth``) on many threads of
one store, most of them idle. On the quiet store:

1. ``retain(older_than=...)`` deletes the idle threads, ``reclaim()`` gives
   their room back: rows ``bytes.before``, ``bytes.after_expiry``, and
   ``expiry.reported`` (the report's ``bytes_freed``) against
   ``expiry.given_back`` (what the file lost);
2. ``retain(keep_last=2)`` on the rest, the same pair ``keep_last.*``;
3. the expired threads' amount written again: ``bytes.after_refill``, the
   room reused.

Then a writer on its own thread invokes turns while ``retain`` and
``reclaim()`` run on the same store: its longest ``put`` then
(``writer.put_max_busy``) against its median and longest with nothing else
running (``writer.put_*_quiet``), and the longest step of the reclaim.

Claims (DiskStore): the file after expiring 80% of the threads at most 0.35x
its size before; the report within 0.6x-1.0x of what the file gives back (it
counts namespace, key and value bytes; SQLite adds row headers and partly
filled pages); refilling grows the file to at most 1.25x its size before
expiry. PostgreSQL's ``VACUUM`` makes room for new rows but keeps the files,
so only the refill claim applies there; the other rows are reported as
measured. Rows ``retention.<backend>.<what>``.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import sections_growth as growth
from _config import Config
from _results import Results


def _writer(saver: Any, stop: threading.Event, waits: list[int]) -> None:
    """Invoke turns of the growth conversation on one live thread until ``stop``."""
    from langchain_core.messages import HumanMessage

    graph = growth.build_graph(saver, delta=False)
    turn = 0
    while not stop.is_set():
        text = growth._SCRIPT[turn % len(growth._SCRIPT)]
        saver.put_ns = []
        graph.invoke(
            {
                "messages": [HumanMessage(content=text["user"], id=f"w-{turn}")],
                "turn": turn % len(growth._SCRIPT),
            },
            {"configurable": {"thread_id": "writer"}},
            durability="sync",
        )
        waits.extend(saver.put_ns)
        turn += 1


def _fill(saver: Any, threads: int, turns: int, prefix: str) -> None:
    from langchain_core.messages import HumanMessage

    graph = growth.build_graph(saver, delta=False)
    for t in range(threads):
        for turn in range(turns):
            graph.invoke(
                {
                    "messages": [
                        HumanMessage(content=growth._SCRIPT[turn]["user"], id=f"u-{turn}")
                    ],
                    "turn": turn,
                },
                {"configurable": {"thread_id": f"{prefix}-{t:03d}"}},
                durability="sync",
            )


def _size(store: Any) -> int:
    """The store's size with nothing left to give back: ``reclaim()`` first, then its figure."""
    return int(store.reclaim().bytes_after)


def _one(backend: str, store: Any, cfg: Config, res: Results) -> None:
    import datetime

    from swarmstate.integrations.langgraph import SwarmStateSaver

    idle, active, turns = (8, 2, 8) if cfg.quick else (40, 10, 40)
    saver = SwarmStateSaver(store)
    base = f"retention.{backend}"
    one = {"section": "retention", "subject": backend, "batch": base}

    def row(what: str, value: float, unit: str = "bytes", **extra: Any) -> None:
        res.add(
            f"{base}.{what}",
            {"unit": unit, "p50": value, "rounds_p50": [value], **extra},
            group=what,
            **one,
        )

    # 1. Sizes, on a quiet store: expire the idle threads, then keep_last=2 on the rest.
    _fill(saver, idle, turns, "idle")
    split = datetime.datetime.now(datetime.UTC)
    time.sleep(0.01)
    _fill(saver, active, turns, "active")
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
    _fill(saver, idle, turns, "again")
    row("bytes.after_refill", _size(store))
    # 3. A writer on its own thread through a retention run and a reclaim of the same store.
    writer = growth._timed(SwarmStateSaver)(store)
    for phase in ("quiet", "busy"):
        waits: list[int] = []
        stop = threading.Event()
        thread = threading.Thread(target=_writer, args=(writer, stop, waits))
        thread.start()
        if phase == "busy":
            saver.retain(older_than=0.0)
            during = store.reclaim()
        else:
            time.sleep(1.0 if cfg.quick else 3.0)
        stop.set()
        thread.join()
        if phase == "quiet":
            row("writer.put_p50_quiet", statistics.median(waits) / 1e3, "us", puts=len(waits))
            row("writer.put_max_quiet", max(waits) / 1e3, "us", puts=len(waits))
        else:
            row("writer.put_max_busy", max(waits) / 1e3, "us", puts=len(waits))
            row("reclaim.longest_step", during.longest_step_seconds * 1e6, "us", steps=during.steps)
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
                0.35,
                "<=",
            ),
            (
                "report.expiry.low",
                "bytes retain() reported (expiry) / bytes reclaim() gave back",
                "expiry.reported",
                "expiry.given_back",
                0.6,
                ">=",
            ),
            (
                "report.expiry.high",
                "bytes retain() reported (expiry) / bytes reclaim() gave back",
                "expiry.reported",
                "expiry.given_back",
                1.0,
                "<=",
            ),
            (
                "report.keep_last.low",
                "bytes retain() reported (keep_last) / bytes reclaim() gave back",
                "keep_last.reported",
                "keep_last.given_back",
                0.6,
                ">=",
            ),
            (
                "report.keep_last.high",
                "bytes retain() reported (keep_last) / bytes reclaim() gave back",
                "keep_last.reported",
                "keep_last.given_back",
                1.0,
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
    from swarmstate.backends.disk import DiskStore

    growth._SCRIPT = growth.conversation(cfg.seed, 10 if cfg.quick else 40)
    workdir.mkdir(parents=True, exist_ok=True)
    _one("disk", DiskStore(workdir / "retention.db"), cfg, res)
    if cfg.pg_dsn:
        from swarmstate.backends.postgres import PostgresStore

        store = PostgresStore(cfg.pg_dsn, schema=f"bench_retention_{time.time_ns() % 10**9}")
        store.setup()
        _one("postgres", store, cfg, res)
    else:
        res.skipped["retention.postgres"] = "needs --pg-dsn"

"""Several writer processes on one DiskStore file: their total writes per second."""

from __future__ import annotations

import multiprocessing
import queue
import time
from pathlib import Path
from typing import Any

__all__ = ["parallel_writers"]


def _writer_main(
    path: str,
    synchronous: str,
    worker: int,
    writes: int,
    value: Any,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """One spawned writer: open the file, wait for the start signal, write, report."""
    from swarmstate.backends.disk import DiskStore

    errors = 0
    first_error = ""
    start = end = 0.0
    opened = False
    try:
        store = DiskStore(path, synchronous=synchronous)
        opened = True
        ready.put(worker)
        go.wait()
        namespace = f"writer-{worker}"
        start = time.monotonic()
        for i in range(writes):
            try:
                store.set(namespace, f"k{i:08d}", value)
            except Exception as exc:
                errors += 1
                first_error = first_error or f"write {i}: {exc!r}"
        end = time.monotonic()
        store.close()
    except Exception as exc:  # reported, so the parent can say what went wrong
        if not opened:
            ready.put(worker)  # do not keep the parent waiting for a writer that failed
        results.put((worker, None, None, writes, repr(exc)))
        return
    results.put((worker, start, end, errors, first_error))


def parallel_writers(
    path: Path, processes: int, writes: int, *, synchronous: str = "NORMAL", value: Any = None
) -> dict[str, Any]:
    """Run ``processes`` spawned writers on one DiskStore file; total writes per second.

    The clock runs from the first writer's start to the last writer's end, after
    every process has opened the store (process start-up is not counted).
    """
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go = ctx.Event()
    value = {"payload": "x" * 200} if value is None else value
    procs = [
        ctx.Process(
            target=_writer_main,
            args=(str(path), synchronous, w, writes, value, ready, go, results),
        )
        for w in range(processes)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
    except queue.Empty:
        pass  # a writer failed to open; its result says why
    go.set()
    outcome = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    failures = [msg for *_, msg in outcome if msg]
    starts = [o[1] for o in outcome if o[1] is not None]  # None: the writer never ran
    ends = [o[2] for o in outcome if o[2] is not None]
    errors = sum(o[3] for o in outcome)
    wall = (max(ends) - min(starts)) if starts else float("nan")
    total = writes * processes - errors
    return {
        "processes": processes,
        "writes_per_process": writes,
        "synchronous": synchronous,
        "wall_s": round(wall, 4),
        "ops_per_s": round(total / wall, 1) if wall and wall == wall else 0.0,
        "errors": errors,
        "failures": failures,
    }

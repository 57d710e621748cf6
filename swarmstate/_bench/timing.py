"""Measurement primitives shared by ``swarmstate benchmark`` and ``benchmarks/run.py``.

Everything here is standard library plus swarmstate itself, so the command
works on a base install with the ``disk`` extra. Timing rules, applied the
same way to a store and to its peer:

* per-call latency: every call is timed on its own (``perf_counter_ns``),
  warm-up calls are run first and thrown away, and the contenders of one
  comparison run in interleaved rounds (order flipped each round), so a
  burst of machine noise lands on all of them instead of one; garbage is
  collected between rounds and never inside one, as ``timeit`` does;
* throughput: whole batches are timed, again in interleaved rounds, and the
  median round is reported (the best round is kept too);
* nothing is an absolute pass/fail: limits are ratios between rows measured
  in the same run.
"""

from __future__ import annotations

import gc
import importlib.metadata
import multiprocessing
import os
import platform
import queue
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Op",
    "environment",
    "footprint",
    "interleave",
    "interleave_rounds",
    "latency_stats",
    "make_values",
    "parallel_writers",
    "round_stats",
    "saver_rows",
    "throughput",
]

PACKAGES = (
    "swarmstate",
    "ormsgpack",
    "msgpack",
    "pyrsistent",
    "apsw",
    "psycopg",
    "psycopg-pool",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "matplotlib",
    "pytest-benchmark",
    "psutil",
    "tqdm",
)


@dataclass
class Op:
    """One contender: ``call(i)`` is the timed call, ``setup(i)`` untimed work before it.

    ``i`` counts from 0 across warm-up and measured calls, so an op that
    consumes pre-built inputs (the next checkpoint, the next key) indexes them.
    ``calls`` and ``warmup`` override the comparison's counts for this op (a
    far slower contender makes fewer calls in the same rounds).
    """

    name: str
    call: Callable[[int], object]
    setup: Callable[[int], object] | None = None
    calls: int | None = None
    warmup: int | None = None


def interleave_rounds(
    ops: Sequence[Op], *, calls: int, rounds: int = 5, warmup: int = 20
) -> dict[str, list[list[int]]]:
    """Time individual calls of each op (ns each), in alternating rounds; samples per round.

    Every op takes its turn in every round (order flipped each round), so a
    burst of machine noise lands on all of them, and a ratio between two ops
    can be taken round by round.
    """
    index = dict.fromkeys((op.name for op in ops), 0)
    samples: dict[str, list[list[int]]] = {op.name: [] for op in ops}
    clock = time.perf_counter_ns
    for op in ops:
        for _ in range(warmup if op.warmup is None else op.warmup):
            i = index[op.name]
            if op.setup is not None:
                op.setup(i)
            op.call(i)
            index[op.name] = i + 1
    rounds = max(1, rounds)
    counts = {op.name: _split(max(rounds, calls if op.calls is None else op.calls), rounds)
              for op in ops}  # fmt: skip
    enabled = gc.isenabled()
    # Everything built so far (stores, threads, recorded data) is left out
    # of the collections below, so each costs the garbage of one round.
    gc.collect()
    gc.freeze()
    try:
        for r in range(rounds):
            order = list(ops) if r % 2 == 0 else list(reversed(ops))
            # As timeit does: collect between rounds, never inside one.
            gc.collect()
            gc.disable()
            for op in order:
                out: list[int] = []
                call, setup = op.call, op.setup
                i = index[op.name]
                n = counts[op.name][r]
                for j in range(i, i + n):
                    if setup is not None:
                        setup(j)
                    t0 = clock()
                    call(j)
                    out.append(clock() - t0)
                samples[op.name].append(out)
                index[op.name] = i + n
            if enabled:
                gc.enable()
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
    return samples


def _split(calls: int, rounds: int) -> list[int]:
    return [calls // rounds + (1 if r < calls % rounds else 0) for r in range(rounds)]


def interleave(
    ops: Sequence[Op], *, calls: int, rounds: int = 5, warmup: int = 20
) -> dict[str, list[int]]:
    """Time ``calls`` individual calls of each op (ns each), in alternating rounds."""
    rounds = max(1, min(rounds, calls))
    per_round = interleave_rounds(ops, calls=calls, rounds=rounds, warmup=warmup)
    return {name: [t for part in parts for t in part] for name, parts in per_round.items()}


def _percentile(ordered: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of an already sorted sample."""
    rank = max(0, min(len(ordered) - 1, round(q / 100.0 * len(ordered) + 0.5) - 1))
    return float(ordered[rank])


def latency_stats(samples_ns: Sequence[int]) -> dict[str, float | int]:
    """p50/p90/p99/min/mean of per-call samples, in microseconds."""
    ordered = sorted(samples_ns)
    if not ordered:
        raise ValueError("no samples")
    us = 1000.0
    return {
        "unit": "us",  # type: ignore[dict-item]
        "n": len(ordered),
        "p50": round(_percentile(ordered, 50) / us, 4),
        "p90": round(_percentile(ordered, 90) / us, 4),
        "p99": round(_percentile(ordered, 99) / us, 4),
        "min": round(ordered[0] / us, 4),
        "mean": round(statistics.fmean(ordered) / us, 4),
    }


def round_stats(per_round: Sequence[Sequence[int]]) -> dict[str, Any]:
    """:func:`latency_stats` of all calls, plus the p50 of each round (``rounds_p50``)."""
    flat = [t for part in per_round for t in part]
    out: dict[str, Any] = dict(latency_stats(flat))
    out["rounds_p50"] = [round(_percentile(sorted(part), 50) / 1000.0, 4) for part in per_round]
    return out


def throughput(
    runs: dict[str, Callable[[int], int]], *, rounds: int = 5, warmup: bool = True
) -> dict[str, dict[str, Any]]:
    """Operations per second of each ``run(round) -> ops done``, interleaved rounds.

    Returns per name the median and best round (ops/s) and the rounds themselves.
    """
    rates: dict[str, list[float]] = {name: [] for name in runs}
    if warmup:
        for run in runs.values():
            run(-1)
    names = list(runs)
    for r in range(rounds):
        gc.collect()
        for name in names if r % 2 == 0 else reversed(names):
            t0 = time.perf_counter()
            done = runs[name](r)
            rates[name].append(done / (time.perf_counter() - t0))
    return {
        name: {
            "unit": "ops/s",
            "median": round(statistics.median(values), 1),
            "best": round(max(values), 1),
            "rounds": [round(v, 1) for v in values],
        }
        for name, values in rates.items()
    }


def make_values(rng: random.Random, count: int, *, size: int = 64) -> list[dict[str, Any]]:
    """``count`` small dict values of roughly ``size`` encoded bytes, drawn from ``rng``."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    pad = max(0, size - 40)
    return [
        {
            "step": rng.randrange(1_000_000),
            "status": rng.choice(("queued", "running", "done", "failed")),
            "score": round(rng.random(), 6),
            "note": "".join(rng.choice(letters) for _ in range(pad)),
        }
        for _ in range(count)
    ]


def saver_rows(
    tmp: Path, *, calls: int, lengths: list[int], rounds: int, seed: object = 7
) -> tuple[dict[str, Any], dict[str, str]]:
    """Checkpointer rows on LangGraph's recorded call pattern (needs the ``langgraph`` extra).

    See :func:`swarmstate._bench.savers.saver_rows`; imported only when called,
    so this module still loads without LangGraph.
    """
    from swarmstate._bench.savers import saver_rows as measure

    return measure(tmp, calls=calls, lengths=lengths, rounds=rounds, seed=seed)


# -- several processes on one DiskStore file --------------------------------


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


# -- environment -------------------------------------------------------------


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit(where: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    if out.returncode != 0 or not commit:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def environment(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a result depends on: interpreter, packages, platform, CPU, settings, commit."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
        "git_commit": _git_commit(Path(__file__).resolve().parent),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": dict(settings or {}),
    }
    if hasattr(os, "sched_getaffinity"):
        env["cpus_usable"] = len(os.sched_getaffinity(0))
    try:
        import psutil  # type: ignore[import-untyped]

        env["memory_total_mb"] = round(psutil.virtual_memory().total / 2**20)
        freq = psutil.cpu_freq()
        env["cpu_mhz"] = round(freq.current) if freq else None
    except Exception:  # psutil is optional; missing or unsupported is fine
        pass
    return env


def footprint() -> dict[str, float]:
    """RAM and CPU used so far by this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss is KiB on Linux, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    out = {
        "max_rss_mb": round(own.ru_maxrss * scale / 2**20, 1),
        "children_max_rss_mb": round(kids.ru_maxrss * scale / 2**20, 1),
        "cpu_user_s": round(own.ru_utime, 2),
        "cpu_system_s": round(own.ru_stime, 2),
        "children_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
    }
    try:
        import psutil

        out["rss_now_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    except Exception:  # psutil is optional
        pass
    return out

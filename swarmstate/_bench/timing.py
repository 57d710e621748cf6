"""Timed calls: interleaved rounds, percentiles, throughput, and seeded values to time with.

Standard library only, so ``swarmstate benchmark`` works on a base install
with the ``disk`` extra. Timing rules, applied the same way to a store and
to its peer:

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
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Op",
    "interleave",
    "interleave_rounds",
    "latency_stats",
    "make_values",
    "round_stats",
    "throughput",
]


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

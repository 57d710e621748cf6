"""Interleaved rounds over stores of several sizes, with a time budget per call.

A call whose cost grows faster than the store (a scan of every thread per
thread) can take hours at 100,000 threads. Each contender is a saver at one
size; before it is called, its cost is predicted from its own calls at the
smaller sizes (growing as it did between them, or linearly from one), and a
contender predicted to take longer than the budget is not called: its rows
are left out with the reason, which the claims on them repeat. The first
round runs the sizes in ascending order, so the prediction has the smaller
sizes' calls of the same round; once a call of a round took longer than the
budget, that round is the last.
"""

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Budget", "SaverAtSize", "rounds"]

Key = tuple[str, int]  # (saver, threads)


@dataclass
class SaverAtSize:
    """One saver at one size, and its call (given the round number)."""

    saver: str
    threads: int
    call: Callable[[int], object]

    @property
    def key(self) -> Key:
        return (self.saver, self.threads)


@dataclass
class Budget:
    """The longest single call worth making (seconds), and what each saver's calls took."""

    seconds: float
    seen: dict[tuple[str, str], dict[int, float]] = field(default_factory=dict)

    def note(self, op: str, saver: str, threads: int, seconds: float) -> None:
        """Record a call's cost (the largest seen at each size is kept)."""
        at = self.seen.setdefault((op, saver), {})
        at[threads] = max(seconds, at.get(threads, 0.0))

    def predict(self, op: str, saver: str, threads: int) -> float | None:
        """Seconds one call at ``threads`` should take, from the smaller sizes; None if unknown."""
        known = sorted((n, t) for n, t in self.seen.get((op, saver), {}).items() if n < threads)
        if not known:
            return None
        n1, t1 = known[-1]
        growth = 1.0
        if len(known) > 1:
            n0, t0 = known[-2]
            if t0 > 0 and t1 > 0:
                growth = min(2.0, max(1.0, math.log(t1 / t0) / math.log(n1 / n0)))
        return t1 * (threads / n1) ** growth

    def refuses(self, op: str, saver: str, threads: int) -> str | None:
        """Why a call at ``threads`` is not worth making, or None."""
        at = self.seen.get((op, saver), {})
        smaller = [n for n, t in at.items() if n < threads and t > self.seconds]
        if smaller:
            n = max(smaller)
            return (
                f"not measured: one call took {at[n]:,.0f} s at {n:,} threads, over the "
                f"{self.seconds:g} s budget per call"
            )
        predicted = self.predict(op, saver, threads)
        if predicted is not None and predicted > self.seconds:
            n = max(k for k in at if k < threads)
            return (
                f"not measured: one call would take about {predicted:,.0f} s at {threads:,} "
                f"threads ({at[n]:,.1f} s at {n:,}), over the {self.seconds:g} s budget per call"
            )
        return None


def rounds(
    op: str, contenders: list[SaverAtSize], count: int, budget: Budget
) -> tuple[dict[Key, list[int]], dict[Key, str]]:
    """Up to ``count`` rounds of one call per contender; ns per call, and why any were left out.

    A garbage collection runs before each round, never inside one.
    """
    times: dict[Key, list[int]] = {c.key: [] for c in contenders}
    left_out: dict[Key, str] = {}
    active = sorted(contenders, key=lambda c: c.threads)
    for r in range(count):
        gc.collect()
        over = False
        order = active if r % 2 == 0 else active[::-1]
        for contender in order:
            if r == 0:
                why = budget.refuses(op, contender.saver, contender.threads)
                if why is not None:
                    left_out[contender.key] = why
                    continue
            begin = time.perf_counter_ns()
            contender.call(r)
            took = time.perf_counter_ns() - begin
            times[contender.key].append(took)
            budget.note(op, contender.saver, contender.threads, took / 1e9)
            over = over or took / 1e9 > budget.seconds
        if r == 0:
            active = [c for c in active if c.key not in left_out]
        if over:
            break
    return {k: v for k, v in times.items() if k not in left_out}, left_out

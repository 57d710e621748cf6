"""The regression gate: a ratio of two operations timed in the same run, never a time.

Both operations are timed in alternating rounds of ``inner`` calls; each
side's figure is its best (minimum) round mean per call. The minimum is what
the code costs when the machine leaves it alone, so background noise, which
only ever adds time, moves it little, while a real slowdown moves every
round. The gate passes when ``candidate / reference <= budget``.

Reference is either the peer (LangGraph's saver, a plain dict, a bare apsw
insert) or the same operation at a baseline size (flatness claims).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["GateResult", "check", "min_round_means"]

Op = Callable[[int], object]


@dataclass(frozen=True)
class GateResult:
    """What the gate measured and decided."""

    candidate_s: float
    reference_s: float
    ratio: float
    budget: float

    @property
    def passed(self) -> bool:
        return self.ratio <= self.budget

    def __str__(self) -> str:
        verdict = "within" if self.passed else "OVER"
        return (
            f"candidate {self.candidate_s * 1e6:.2f} µs / reference "
            f"{self.reference_s * 1e6:.2f} µs = {self.ratio:.3f}x, {verdict} budget "
            f"{self.budget:.3f}x"
        )


def min_round_means(ops: list[Op], *, rounds: int, inner: int) -> list[float]:
    """Best round mean (seconds per call) of each op, rounds interleaved and alternated."""
    best = [float("inf")] * len(ops)
    clock = time.perf_counter
    index = list(range(len(ops)))
    for j in index:  # warm-up, untimed
        for i in range(min(inner, 10)):
            ops[j](i)
    for r in range(rounds):
        gc.collect()
        for j in index if r % 2 == 0 else reversed(index):
            op = ops[j]
            base = r * inner
            t0 = clock()
            for i in range(base, base + inner):
                op(i)
            best[j] = min(best[j], (clock() - t0) / inner)
    return best


def check(
    candidate: Op, reference: Op, *, budget: float, rounds: int = 15, inner: int = 100
) -> GateResult:
    """Time both ops in the same run and compare their min-over-rounds ratio to ``budget``."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    cand, ref = min_round_means([candidate, reference], rounds=rounds, inner=inner)
    return GateResult(candidate_s=cand, reference_s=ref, ratio=cand / ref, budget=budget)

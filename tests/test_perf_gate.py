"""The perf gate catches a real 1.5x slowdown and lets noise through (default suite)."""

from __future__ import annotations

import pytest
from perf.gate import check

import swarmstate as ss

# About 20 µs per call: large enough that loop overhead does not blur a 1.5x change.
VALUE = [{"step": i, "status": "running", "note": "x" * 40, "tags": ["a", "b"]} for i in range(60)]
NOISE_BUDGET = 1.3


def real_op(i: int) -> object:
    return ss.loads(ss.dumps(VALUE))


def same_op_again(i: int) -> object:
    return ss.loads(ss.dumps(VALUE))


HALF = VALUE[: len(VALUE) // 2]


def slowed_op(i: int) -> object:
    """The real op plus the same op on half the value, on every call: a 1.5x regression.

    Every call pays the extra work (not every other one), so no round of the
    minimum can miss it.
    """
    out = real_op(i)
    ss.loads(ss.dumps(HALF))
    return out


def test_gate_passes_the_real_operation_against_itself() -> None:
    result = check(same_op_again, real_op, budget=NOISE_BUDGET)
    assert result.passed, str(result)
    assert 0.7 < result.ratio < NOISE_BUDGET


def test_gate_fails_a_deliberately_slowed_variant() -> None:
    result = check(slowed_op, real_op, budget=NOISE_BUDGET)
    assert not result.passed, str(result)
    assert result.ratio > 1.35, str(result)


def test_gate_reports_numbers_and_verdict() -> None:
    result = check(slowed_op, real_op, budget=NOISE_BUDGET, rounds=5, inner=20)
    assert "OVER budget" in str(result)
    assert f"{result.ratio:.3f}x" in str(result)


def test_gate_rejects_a_non_positive_budget() -> None:
    with pytest.raises(ValueError, match="budget must be positive"):
        check(real_op, real_op, budget=0)

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
    # Budgets no measurement can meet or miss: the report, not the timing, is under test.
    over = check(slowed_op, real_op, budget=0.001, rounds=3, inner=5)
    assert not over.passed
    assert "OVER budget 0.001x" in str(over)
    assert f"{over.ratio:.3f}x" in str(over)
    within = check(slowed_op, real_op, budget=1000.0, rounds=3, inner=5)
    assert within.passed
    assert "within budget 1000.000x" in str(within)


def test_gate_rejects_a_non_positive_budget() -> None:
    with pytest.raises(ValueError, match="budget must be positive"):
        check(real_op, real_op, budget=0)

"""The sorted key set behind ordered ranges in the in-memory store."""

from __future__ import annotations

from hypothesis import given, settings, strategies

from swarmstate.backends.memory.sorted_keys import CHUNK, SortedKeys

KEYS = strategies.lists(strategies.text(max_size=3), max_size=4 * CHUNK, unique=True)
BOUND = strategies.none() | strategies.text(max_size=3)


@settings(max_examples=200)
@given(KEYS, BOUND, BOUND, strategies.booleans(), strategies.none() | strategies.integers(0, 20))
def test_range_matches_sorted_filter(
    keys: list[str], start: str | None, stop: str | None, reverse: bool, limit: int | None
) -> None:
    found = SortedKeys()
    for key in keys:
        found.add(key)
    expected = sorted(
        k for k in keys if (start is None or k >= start) and (stop is None or k < stop)
    )
    if reverse:
        expected.reverse()
    assert found.range(start, stop, reverse, limit) == expected[:limit]


@settings(max_examples=200)
@given(
    strategies.lists(
        strategies.tuples(strategies.booleans(), strategies.text(max_size=2)), max_size=6 * CHUNK
    )
)
def test_interleaved_adds_removes_and_reads_agree_with_a_set(
    ops: list[tuple[bool, str]],
) -> None:
    found = SortedKeys()
    model: set[str] = set()
    for i, (add, key) in enumerate(ops):
        if add and key not in model:
            found.add(key)
            model.add(key)
        elif not add and key in model:
            found.remove(key)
            model.discard(key)
        if i % 7 == 0:  # reads settle pending keys at varying moments
            assert found.range(limit=3) == sorted(model)[:3]
    assert list(found) == sorted(model)
    assert len(found) == len(model)

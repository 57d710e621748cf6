"""A saver's store calls written once as a plan, driven blocking and awaited alike."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import swarmstate
from swarmstate import Absent, Present, Transaction
from swarmstate.backends.postgres import PostgresStore
from swarmstate.integrations.langgraph import steps

MakeStore = Callable[[], swarmstate.BaseStore]


def _plan(seen: list[str]) -> steps.Plan[tuple[Any, ...]]:
    """Write, be refused by a condition and recover, read back; what each step returned."""
    written = yield steps.Write(Transaction(sets=[("ns", "a", b"\xa1a")], raw=True))
    try:
        yield steps.Write(
            Transaction(conditions=[Absent("ns", "a")], sets=[("ns", "b", b"\xa1b")], raw=True)
        )
        refused = False
    except swarmstate.ConflictError:
        refused = True
    yield steps.Write(
        Transaction(conditions=[Present("ns", "a")], sets=[("ns", "c", b"\xa1c")], raw=True)
    )
    rows = yield steps.Items("ns", start="b", reverse=True, limit=5)
    found = yield steps.GetMany([("ns", "a"), ("ns", "b")])
    thread = yield steps.Blocking(lambda: threading.current_thread().name)
    seen.append(thread)
    return written.written, refused, rows, found


async def _opened(store: swarmstate.BaseStore) -> None:
    if isinstance(store, PostgresStore):
        await store.aopen()


async def _closed(store: swarmstate.BaseStore) -> None:
    if isinstance(store, PostgresStore):
        await store.aclose()


def test_a_plan_does_the_same_calls_blocking_and_awaited(make_store: MakeStore) -> None:
    blocking_store, awaited_store = make_store(), make_store()
    seen: list[str] = []
    blocking = steps.run(blocking_store, _plan(seen))

    async def awaited() -> tuple[Any, ...]:
        await _opened(awaited_store)
        try:
            done = await steps.arun(awaited_store, _plan(seen))
            assert awaited_store.items("ns") == [("a", "a"), ("c", "c")]
            return done
        finally:
            await _closed(awaited_store)

    assert asyncio.run(awaited()) == blocking == (1, True, [("c", b"\xa1c")], [b"\xa1a", None])
    assert blocking_store.items("ns") == [("a", "a"), ("c", "c")]
    # Blocking code runs on the caller's thread, and off the loop unless the store never blocks.
    assert seen[0] == threading.current_thread().name
    assert (seen[1] == threading.current_thread().name) is (not awaited_store.blocks)


def test_an_exception_the_plan_does_not_handle_reaches_the_caller_with_nothing_after_it(
    make_store: MakeStore,
) -> None:
    store, awaited_store = make_store(), make_store()

    def plan() -> steps.Plan[None]:
        yield steps.Write(Transaction(conditions=[Present("ns", "x")], sets=[("ns", "y", 1)]))
        yield steps.Write(Transaction(sets=[("ns", "z", 1)]))

    with pytest.raises(swarmstate.ConflictError):
        steps.run(store, plan())

    assert store.keys("ns") == []

    async def awaited() -> None:
        await _opened(awaited_store)
        try:
            with pytest.raises(swarmstate.ConflictError):
                await steps.arun(awaited_store, plan())
            assert awaited_store.keys("ns") == []
        finally:
            await _closed(awaited_store)

    asyncio.run(awaited())


def test_each_store_says_how_an_event_loop_waits_on_it(make_store: MakeStore) -> None:
    store = make_store()

    async def modes() -> tuple[str, str]:
        before = steps.mode_of(store)
        await _opened(store)
        try:
            return before, steps.mode_of(store)
        finally:
            await _closed(store)

    expected = {
        "Store": ("inline", "inline"),
        "DiskStore": ("thread", "thread"),
        # Its async pool is used once open on the loop, never opened by asking.
        "PostgresStore": ("thread", "native"),
    }
    assert asyncio.run(modes()) == expected[type(store).__name__]
    # Outside a running loop no store offers its async twins.
    assert store.awaitable() is False

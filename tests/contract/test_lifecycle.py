"""What every backend does around its calls: building without uuid4, closing while in use."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import swarmstate


def test_building_and_reopening_a_store_never_calls_uuid4(
    store_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Test suites patch uuid.uuid4 to get deterministic ids (LangGraph's does):
    # a store must not take one of them.
    calls: list[None] = []
    real = uuid.uuid4

    def counting() -> uuid.UUID:
        calls.append(None)
        return real()

    monkeypatch.setattr(uuid, "uuid4", counting)
    store = store_factory()
    store.set("ns", "k", 1)
    assert store.snapshot().get("ns", "k") == 1
    if store_factory.durable:
        store = store_factory.reopen(store)
        store.restore(store.snapshots()[-1])
    assert calls == []


def test_close_twice_is_harmless_and_later_calls_on_any_thread_are_refused(
    durable_store_factory: Any,
) -> None:
    store = durable_store_factory()
    store.set("ns", "k", 1)
    store.close()
    store.close()
    seen: list[BaseException] = []

    def call() -> None:
        try:
            store.get("ns", "k")
        except BaseException as exc:  # checked by the main thread
            seen.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert len(seen) == 1
    assert isinstance(seen[0], swarmstate.StoreClosedError)
    with pytest.raises(swarmstate.StoreClosedError):
        store.set("ns", "k", 2)


async def test_async_with_closes_every_store(store_factory: Any) -> None:
    store = store_factory()
    async with store as opened:
        assert opened is store
        store.set("a", "k", 1)
    if store_factory.durable:
        with pytest.raises(swarmstate.StoreClosedError):
            store.get("a", "k")
        assert store_factory.reopen(store).get("a", "k") == 1
    else:
        assert store.get("a", "k") == 1  # closing the in-memory store keeps it usable


async def test_async_with_closes_the_store_when_its_block_raises(store_factory: Any) -> None:
    store = store_factory()

    async def fail_inside() -> None:
        async with store:
            store.set("a", "k", 1)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await fail_inside()
    if store_factory.durable:
        with pytest.raises(swarmstate.StoreClosedError):
            store.get("a", "k")


async def test_async_with_waits_for_a_write_in_flight_off_the_event_loop(tmp_path: Path) -> None:
    from swarmstate.backends.disk import DiskStore

    store = DiskStore(tmp_path / "a.db")
    rows = 200_000  # a batch that takes a good part of a second to write
    encoded = threading.Event()

    def items() -> Any:
        for i in range(rows):
            yield ("big", f"k{i:06d}", i)
        encoded.set()  # set_many has encoded them all; its write transaction starts now

    def write() -> None:
        store.set("small", "k", 0)  # this thread's connection, opened before
        store.set_many(items())

    writer = threading.Thread(target=write)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    async with store:
        writer.start()
        while not encoded.is_set():
            await asyncio.sleep(0.001)
        # The rows are encoded; once the write lock is taken the batch is being
        # written (the small write before it has long released the lock). A
        # fixed pause here raced with set_many building its parameters.
        while not store._db.write_lock.locked() and writer.is_alive():
            await asyncio.sleep(0.001)
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.02)
        before = ticks
    # close() waited for the batch, in a worker thread: the loop kept running.
    after = ticks
    ticker.cancel()
    writer.join()
    assert after > before
    with DiskStore(tmp_path / "a.db") as again:
        assert again.count("big") == rows

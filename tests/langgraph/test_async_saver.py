"""The saver's async path: the same plans as the sync one, awaited on the event loop."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver

import swarmstate
from swarmstate.backends.postgres import PostgresStore
from swarmstate.integrations.langgraph import SwarmStateSaver, steps
from tests.support.graphs import cfg, chat_graph

MakeStore = Callable[[], swarmstate.BaseStore]


def _said_in(values: dict[str, Any]) -> list[tuple[str, Any]]:
    """The messages of a state as (type, content): node messages get fresh ids."""
    return [(m.type, m.content) for m in values.get("messages", [])]


def _said(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text, id=f"h-{text}")]}


async def _opened(store: swarmstate.BaseStore) -> swarmstate.BaseStore:
    """``store`` with its async pool open on this loop where it has one."""
    if isinstance(store, PostgresStore):
        await store.aopen()
    return store


async def _closed(store: swarmstate.BaseStore) -> None:
    if isinstance(store, PostgresStore):
        await store.aclose()


async def test_the_official_suite_passes_with_the_store_awaited_on_the_loop(
    make_store: MakeStore,
) -> None:
    @checkpointer_test(name="SwarmStateSaver (awaited)")
    async def factory() -> AsyncIterator[SwarmStateSaver]:
        store = await _opened(make_store())
        try:
            yield SwarmStateSaver(store)
        finally:
            await _closed(store)

    report = await validate(factory)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert report.conformance_level() == "FULL"


async def test_a_graph_awaited_reads_back_what_the_reference_holds(make_store: MakeStore) -> None:
    store = await _opened(make_store())
    try:
        ours, reference = SwarmStateSaver(store), InMemorySaver()
        graphs = [chat_graph(ours), chat_graph(reference)]
        for turn in range(4):
            for graph in graphs:
                await graph.ainvoke(_said(f"question {turn}"), cfg("aw"))
        states = [await graph.aget_state(cfg("aw")) for graph in graphs]
        assert _said_in(states[0].values) == _said_in(states[1].values)
        assert len(states[0].values["messages"]) == 16
        history = [
            [_said_in(s.values) async for s in graph.aget_state_history(cfg("aw"))]
            for graph in graphs
        ]
        assert history[0] == history[1]
        # What was awaited reads back the same through the blocking path.
        assert SwarmStateSaver(store).get_tuple(cfg("aw")) is not None
    finally:
        await _closed(store)


def _offloads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """From now on, what the loop hands to a worker thread: store steps, or function names."""
    offloaded: list[Any] = []
    to_thread = asyncio.to_thread

    async def recorded(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(args[1] if fn is steps._blocking else getattr(fn, "__name__", fn))
        return await to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", recorded)
    return offloaded


async def test_a_put_on_an_awaitable_store_takes_no_worker_thread(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _opened(make_store())
    offloaded = _offloads(monkeypatch)
    try:
        saver = SwarmStateSaver(store)
        saver.setup()  # the store's one-time conversion check, before the timed part
        graph = chat_graph(saver)
        await graph.ainvoke(_said("warm"), cfg("t"))
        offloaded.clear()
        await graph.ainvoke(_said("hello"), cfg("t"))
        store_calls = [s for s in offloaded if isinstance(s, steps.Write | steps.Items)]
        # A put or put_writes is never handed whole to a thread.
        assert not {"put", "put_writes", "_put_plan"} & {s for s in offloaded if type(s) is str}
        if store.blocks and not store.awaitable():
            assert store_calls  # DiskStore: only its store calls go to a thread
        else:
            assert store_calls == []  # awaited on the server, or inline in memory
    finally:
        await _closed(store)


async def test_an_awaited_latest_read_with_pending_writes_takes_no_worker_thread(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _opened(make_store())
    try:
        saver = SwarmStateSaver(store)
        saver.setup()
        checkpoint, values = _checkpoint(300, random.Random(4))
        config = await saver.aput(
            cfg("w"), checkpoint, {"source": "loop", "step": 1}, {"text": 1, "n": 1}
        )
        await saver.aput_writes(config, [("text", "pending"), ("n", 7)], "task-1")
        offloaded = _offloads(monkeypatch)
        found = await saver.aget_tuple(cfg("w"))
        assert found is not None
        assert found.checkpoint["channel_values"] == values
        assert [(w[1], w[2]) for w in found.pending_writes or []] == [("text", "pending"), ("n", 7)]
        blocking = [s for s in offloaded if type(s) is steps.Blocking]
        assert blocking == []  # the checkpoint's group is read as one range, not by a scan
        if not store.blocks or store.awaitable():
            assert offloaded == []  # awaited on the server, or inline in memory
    finally:
        await _closed(store)


async def test_an_awaited_cold_read_of_chunks_takes_no_worker_thread(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _opened(make_store())
    try:
        writer = SwarmStateSaver(store)
        writer.setup()
        rnd = random.Random(5)
        checkpoint, values = _checkpoint(30_000, rnd)  # over the sharing threshold: chunks
        await writer.aput(cfg("c"), checkpoint, {"source": "loop", "step": 1}, {"text": 1, "n": 1})
        offloaded = _offloads(monkeypatch)
        reader = SwarmStateSaver(store)  # a new process: nothing cached
        found = await reader.aget_tuple(cfg("c"))
        assert found is not None
        assert found.checkpoint["channel_values"] == values
        assert [s for s in offloaded if type(s) is steps.Blocking] == []
        if not store.blocks or store.awaitable():
            assert offloaded == []  # the chunks awaited on the server, or read inline
        else:
            assert [type(s) for s in offloaded] == [steps.Items, steps.GetMany]
    finally:
        await _closed(store)


def _checkpoint(size: int, rnd: random.Random) -> tuple[Any, dict[str, Any]]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=rnd.randrange(1 << 14)))
    value = "".join(rnd.choice("abcdefgh ") for _ in range(size))
    checkpoint["channel_values"] = {"text": value, "n": size}
    checkpoint["channel_versions"] = {"text": 1, "n": 1}
    return checkpoint, {"text": value, "n": size}


async def test_a_cancelled_put_wrote_its_whole_checkpoint_or_nothing(
    make_store: MakeStore, request: pytest.FixtureRequest
) -> None:
    store = await _opened(make_store())
    rnd = random.Random(39)
    saver = SwarmStateSaver(store)
    saver.setup()
    expected: dict[str, tuple[str, dict[str, Any]]] = {}

    async def one(i: int) -> None:
        thread = f"c{i}"
        checkpoint, values = _checkpoint(rnd.choice([50, 3_000, 20_000]), rnd)
        expected[thread] = (checkpoint["id"], values)
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = await saver.aput(config, checkpoint, {"step": 0}, {"text": 1, "n": 1})
        await saver.aput_writes(stored, [("text", values["text"][:20]), ("n", i)], f"task{i}")

    try:
        for batch in range(4):
            tasks = [
                asyncio.wait_for(one(batch * 50 + i), timeout=rnd.choice([0, 0.0005, 0.002, 1]))
                for i in range(50)
            ]
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(o is None or isinstance(o, TimeoutError) for o in outcomes), outcomes
        landed = 0
        for thread, (checkpoint_id, values) in expected.items():
            found = saver.get_tuple(cfg(thread))
            if found is None:
                continue
            landed += 1
            assert found.checkpoint["id"] == checkpoint_id
            assert found.checkpoint["channel_values"] == values
            # A task's writes are one batch: both or neither.
            assert len(found.pending_writes or []) in (0, 2)
        assert 0 < landed <= len(expected)
        if isinstance(store, PostgresStore):
            with psycopg.connect(request.getfixturevalue("pg_conninfo")) as conn:
                stuck = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"
                ).fetchone()
            assert stuck == (0,)
        # The store still serves every call after the cancellations.
        await chat_graph(saver).ainvoke(_said("after"), cfg("after"))
    finally:
        await _closed(store)


async def test_afrom_conn_string_opens_the_pool_on_the_loop_and_closes_it(tmp_path: Any) -> None:
    path = str(tmp_path / "a.db")
    async with SwarmStateSaver.afrom_conn_string(path) as saver:
        await saver.asetup()
        graph = chat_graph(saver)
        await graph.ainvoke(_said("hi"), cfg("f"))
        assert (await saver.aget_tuple(cfg("f"))) is not None
    with pytest.raises(swarmstate.StoreClosedError):
        saver.store.get("x", "y")


async def test_afrom_conn_string_on_postgres_awaits_the_server(pg_conninfo: str) -> None:
    schema = f"afcs_{random.randrange(1 << 30)}"
    try:
        async with SwarmStateSaver.afrom_conn_string(
            pg_conninfo, schema=schema, max_size=3, timeout=5
        ) as saver:
            await saver.asetup()
            assert saver.store.awaitable()
            graph = chat_graph(saver)
            await asyncio.gather(*(graph.ainvoke(_said("hi"), cfg(f"u{i}")) for i in range(8)))
            assert len(saver.list_threads()) == 8
        with pytest.raises(swarmstate.StoreClosedError):
            saver.store.get("x", "y")
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

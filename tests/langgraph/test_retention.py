"""Retention on every backend: what is kept, what goes, and that nothing a graph needs is lost."""

from __future__ import annotations

import asyncio
import datetime
import functools
import multiprocessing
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from test_sharing import assert_every_item_is_needed, chat_graph, everything, talk

import swarmstate
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import Retention, RetentionReport, SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys
from swarmstate.integrations.langgraph.guard import GUARDS

MakeStore = Callable[[], swarmstate.BaseStore]
DAY = datetime.timedelta(days=1)


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def count_by_namespace(saver: SwarmStateSaver, thread_id: str) -> Counter[str]:
    return Counter(t.config["configurable"]["checkpoint_ns"] for t in saver.list(cfg(thread_id)))


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def subgraph_chat(saver: Any) -> Any:
    """A root graph whose node is a subgraph with its own checkpoints."""
    inner = StateGraph(Chat)
    inner.add_node(
        "think", lambda s: {"messages": [AIMessage(content="hm", id=f"t{len(s['messages'])}")]}
    )
    inner.add_edge(START, "think")
    inner.add_edge("think", END)
    builder = StateGraph(Chat)
    builder.add_node("sub", inner.compile(checkpointer=True))
    builder.add_node(
        "say", lambda s: {"messages": [AIMessage(content="ok", id=f"s{len(s['messages'])}")]}
    )
    builder.add_edge(START, "sub")
    builder.add_edge("sub", "say")
    builder.add_edge("say", END)
    return builder.compile(checkpointer=saver)


def test_keep_last_keeps_exactly_the_newest_n_of_every_namespace(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = subgraph_chat(saver)
    for turn in range(6):
        graph.invoke({"messages": [HumanMessage(content=f"q{turn}", id=f"q{turn}")]}, cfg("s"))
    before = count_by_namespace(saver, "s")
    assert len(before) == 2
    assert all(n > 3 for n in before.values())
    newest = {
        ns: [t.checkpoint["id"] for t in saver.list(cfg("s", checkpoint_ns=ns))][:3]
        for ns in before
    }
    state = graph.get_state(cfg("s")).values

    def tuples() -> list[Any]:
        return [
            SwarmStateSaver(saver.store).get_tuple(cfg("s", checkpoint_ns=ns, checkpoint_id=id_))
            for ns, ids in newest.items()
            for id_ in ids
        ]

    kept = tuples()
    report = saver.retain(keep_last=3)
    assert count_by_namespace(saver, "s") == {ns: 3 for ns in before}
    assert tuples() == kept  # a kept checkpoint reads back exactly as before
    for ns, ids in newest.items():
        assert [t.checkpoint["id"] for t in saver.list(cfg("s", checkpoint_ns=ns))] == ids
    assert report.checkpoints_deleted == sum(before.values()) - 6
    assert (report.threads_examined, report.threads_deleted) == (1, 0)
    assert graph.get_state(cfg("s")).values == state
    assert_every_item_is_needed(saver, "s")


def footprint(store: swarmstate.BaseStore, contents: dict[str, list[tuple[str, bytes]]]) -> int:
    """What ``contents`` occupies in ``store``, by the measure retention reports."""
    return sum(
        store.footprint(ns, key, len(value))
        for ns, items in contents.items()
        if ns != GUARDS
        for key, value in items
    )


def test_a_dry_run_changes_nothing_and_reports_what_the_real_run_does(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "a", 8)
    talk(graph, "b", 3)
    old = datetime.datetime.now(datetime.UTC) + 2 * DAY  # "b" looks idle from there
    store = saver.store
    contents = {ns: store.items(ns, raw=True) for ns in store.namespaces()}
    readable = everything(saver)

    def now_stored() -> dict[str, list[tuple[str, bytes]]]:
        return {ns: store.items(ns, raw=True) for ns in store.namespaces()}

    plan = saver.retain(keep_last=2, older_than=DAY, thread_ids=["b"], now=old, dry_run=True)
    plan_a = saver.retain(keep_last=2, thread_ids=["a"], dry_run=True)
    assert {ns: store.items(ns, raw=True) for ns in store.namespaces()} == contents
    assert everything(saver) == readable
    assert plan.dry_run
    assert (plan.threads_deleted, plan.bytes_freed > 0) == (1, True)
    assert plan_a.checkpoints_deleted > 0
    assert plan_a.writes_deleted > 0
    done = saver.retain(keep_last=2, older_than=DAY, thread_ids=["b"], now=old)
    done_a = saver.retain(keep_last=2, thread_ids=["a"])
    for ran, planned in ((done, plan), (done_a, plan_a)):
        assert not ran.dry_run
        assert (ran.threads_examined, ran.threads_deleted) == (
            planned.threads_examined,
            planned.threads_deleted,
        )
        assert (ran.checkpoints_deleted, ran.writes_deleted) == (
            planned.checkpoints_deleted,
            planned.writes_deleted,
        )
        assert ran.bytes_freed == planned.bytes_freed
    # bytes_freed is exactly what left the store (the tombstone delete_thread
    # leaves for "b" aside).
    assert (
        footprint(store, contents) - footprint(store, now_stored())
        == done.bytes_freed + done_a.bytes_freed
    )
    assert store.namespaces(keys.thread_prefix("b")) == []
    assert len(list(saver.list(cfg("a")))) == 2


def test_what_retention_reports_freed_is_what_reclaim_gives_back(tmp_path: Path) -> None:
    # On a DiskStore file: threads expired, then keep_last on the rest.
    store = DiskStore(tmp_path / "r.db")
    saver = SwarmStateSaver(store)
    graph = chat_graph(saver)
    for turn in range(12):  # turn by turn across the threads, as concurrent users write
        for thread in range(12):
            talk(graph, f"t{thread:02d}", 1, start=turn)
    idle = [f"t{thread:02d}" for thread in range(0, 12, 2)]
    later = datetime.datetime.now(datetime.UTC) + 2 * DAY
    before = store.reclaim().bytes_after
    expired = saver.retain(older_than=DAY, thread_ids=idle, now=later)
    after = store.reclaim().bytes_after
    kept = saver.retain(keep_last=2)
    last = store.reclaim().bytes_after
    assert expired.threads_deleted == len(idle)
    assert kept.checkpoints_deleted > 0
    # One run's pages may hold rows another run deletes later (threads written
    # turn by turn share pages): a page comes back with the run that empties it.
    reported, given_back = expired.bytes_freed + kept.bytes_freed, before - last
    assert 0.8 <= reported / given_back <= 1.2, (reported, given_back)
    for run, back in ((expired, before - after), (kept, after - last)):
        assert 0.5 <= run.bytes_freed / back <= 2.0, (run, back)
    store.close()


def test_older_than_deletes_only_threads_idle_that_long(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "idle", 2)
    talk(graph, "busy", 2)
    stamps = {}
    for thread in ("idle", "busy"):
        latest = saver.get_tuple(cfg(thread))
        assert latest is not None
        stamps[thread] = datetime.datetime.fromisoformat(latest.checkpoint["ts"])
    assert stamps["busy"] > stamps["idle"]
    # Seen from an hour later, a horizon that falls between the two last activities.
    now = stamps["busy"] + datetime.timedelta(hours=1)
    middle = stamps["idle"] + (stamps["busy"] - stamps["idle"]) / 2
    horizon = now - middle
    report = saver.retain(older_than=horizon, now=now)
    assert saver.list_threads() == ["busy"]
    # "busy" is examined when one of its checkpoints was made before the horizon.
    assert report.threads_deleted == 1
    assert report.threads_examined in (1, 2)
    assert saver.retain(older_than=2 * 3600.0, now=now).threads_deleted == 0
    with pytest.raises(swarmstate.InvalidArgumentError, match="older_than"):
        saver.retain(older_than=-1)
    with pytest.raises(swarmstate.InvalidArgumentError, match="keep_last"):
        saver.retain(keep_last=0)
    with pytest.raises(swarmstate.InvalidArgumentError, match="aware"):
        saver.retain(older_than=1, now=datetime.datetime(2026, 1, 1))


class Work(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    done: Annotated[list[str], lambda a, b: a + b]


def test_an_interrupted_run_resumes_after_retention_and_runs_no_task_twice(
    make_store: MakeStore,
) -> None:
    runs: Counter[str] = Counter()

    def tool(name: str) -> Callable[[Work], dict[str, Any]]:
        def node(state: Work) -> dict[str, Any]:
            runs[name] += 1
            return {"done": [name]}

        return node

    def review(state: Work) -> dict[str, Any]:
        runs["review"] += 1
        answer = interrupt("approve?")
        return {"done": [f"review:{answer}"]}

    builder = StateGraph(Work)
    for name in ("fetch", "parse"):
        builder.add_node(name, tool(name))
        builder.add_edge(START, name)
    builder.add_node("review", review)
    builder.add_node("ship", tool("ship"))
    builder.add_edge(["fetch", "parse"], "review")
    builder.add_edge("review", "ship")
    builder.add_edge("ship", END)
    saver = SwarmStateSaver(make_store())
    graph = builder.compile(checkpointer=saver)
    for turn in range(3):  # history worth pruning
        graph.invoke({"messages": [HumanMessage(content=f"t{turn}", id=f"t{turn}")]}, cfg("w"))
        graph.invoke(Command(resume="yes"), cfg("w"))
    graph.invoke({"messages": [HumanMessage(content="last", id="last")]}, cfg("w"))
    assert graph.get_state(cfg("w")).next == ("review",)
    before = dict(runs)
    saver.retain(keep_last=1)
    assert len(list(saver.list(cfg("w")))) == 1
    resumed = SwarmStateSaver(saver.store)  # another process, no cache
    out = builder.compile(checkpointer=resumed).invoke(Command(resume="ok"), cfg("w"))
    assert out["done"][-2:] == ["review:ok", "ship"]
    assert (runs["fetch"], runs["parse"]) == (before["fetch"], before["parse"])
    assert runs["ship"] == before["ship"] + 1


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    return functools.reduce(add_messages, writes, state)


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_fold, snapshot_frequency=5)]


def test_a_delta_channel_graph_still_rebuilds_its_state(make_store: MakeStore) -> None:
    builder = StateGraph(DeltaChat)
    builder.add_node(
        "agent", lambda s: {"messages": [AIMessage(content="a", id=f"a{len(s['messages'])}")]}
    )
    builder.add_edge(START, "agent")
    saver = SwarmStateSaver(make_store())
    graph = builder.compile(checkpointer=saver)
    for turn in range(13):
        graph.invoke({"messages": [HumanMessage(content=f"u{turn}", id=f"u{turn}")]}, cfg("d"))
    state = graph.get_state(cfg("d")).values
    assert len(state["messages"]) == 26
    saver.retain(keep_last=1)
    kept = list(saver.list(cfg("d")))
    assert 1 < len(kept) < 26 * 3  # the chain back to the last snapshot stays, not more
    fresh = builder.compile(checkpointer=SwarmStateSaver(saver.store))
    assert fresh.get_state(cfg("d")).values == state
    graph.invoke({"messages": [HumanMessage(content="more", id="more")]}, cfg("d"))
    assert len(fresh.get_state(cfg("d")).values["messages"]) == 28


def test_a_policy_at_construction_applies_as_the_graph_writes(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store(), retention=Retention(keep_last=4, every=10))
    graph = chat_graph(saver)
    talk(graph, "p", 12)  # 36 puts: the policy ran three times
    kept = len(list(saver.list(cfg("p"))))
    assert 4 <= kept < 4 + 10
    assert graph.get_state(cfg("p")).values["messages"][-1].id == "ai-23"
    with pytest.raises(swarmstate.InvalidArgumentError, match="keep_last, older_than"):
        Retention()
    with pytest.raises(swarmstate.InvalidArgumentError, match="every"):
        Retention(keep_last=1, every=0)
    with pytest.raises(swarmstate.InvalidArgumentError, match="retention"):
        SwarmStateSaver(retention={"keep_last": 1})  # type: ignore[arg-type]


async def test_aretain_is_retain(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    talk(chat_graph(saver), "x", 4)
    report = await saver.aretain(keep_last=1, dry_run=True)
    assert isinstance(report, RetentionReport)
    assert report.checkpoints_deleted > 0


def test_progress_is_called_once_per_thread_in_order(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    for thread in ("a", "b", "c"):
        talk(graph, thread, 2)
    seen: list[tuple[int, int]] = []
    report = saver.retain(keep_last=1, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert report.threads_examined == 3
    seen.clear()
    saver.retain(keep_last=1, thread_ids=["b", "a", "b"], progress=lambda *p: seen.append(p))
    assert seen == [(1, 2), (2, 2)]
    with pytest.raises(swarmstate.InvalidArgumentError, match="progress"):
        saver.retain(keep_last=1, progress=3)  # type: ignore[arg-type]


def _writer(path: str, turns: int, queue: Any) -> None:
    from swarmstate.backends.disk import DiskStore

    try:
        with DiskStore(path) as store:
            graph = chat_graph(SwarmStateSaver(store))
            talk(graph, "live", turns, start=5)
            queue.put(("ok", len(graph.get_state(cfg("live")).values["messages"])))
    except BaseException as exc:  # reported to the test
        queue.put(("error", repr(exc)))


@pytest.mark.slow
def test_retention_in_one_process_while_another_writes_loses_nothing(tmp_path: Path) -> None:
    from swarmstate.backends.disk import DiskStore

    path = str(tmp_path / "shared.db")
    with DiskStore(path) as store:
        talk(chat_graph(SwarmStateSaver(store)), "live", 5)
        talk(chat_graph(SwarmStateSaver(store)), "old", 5)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    writer = ctx.Process(target=_writer, args=(path, 30, queue))
    writer.start()
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        rounds = 0
        while writer.is_alive() or rounds < 3:
            saver.retain(keep_last=2)
            rounds += 1
        writer.join(120)
        status, detail = queue.get(timeout=10)
        assert (status, writer.exitcode) == ("ok", 0), detail
        # 5 turns before, 30 during: every message of every turn is there.
        state = chat_graph(SwarmStateSaver(store)).get_state(cfg("live")).values
        assert len(state["messages"]) == detail == 2 * 35
        assert saver.verify() == []


@pytest.mark.parametrize("bare", ["t10", b"t10"], ids=["str", "bytes"])
def test_prune_refuses_one_bare_id_and_deletes_nothing(make_store: MakeStore, bare: Any) -> None:
    # A str is a sequence of one-character ids: prune("t10") once deleted
    # threads "t", "1" and "0" and kept "t10".
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    for thread in ["t", "1", "0", "t10"]:
        talk(graph, thread, 1)
    before = everything(saver)
    with pytest.raises(swarmstate.InvalidArgumentError, match=r"prune\(\[b?'t10'\]\)"):
        saver.prune(bare, strategy="delete")
    with pytest.raises(swarmstate.InvalidArgumentError, match=r"prune\(\[b?'t10'\]\)"):
        asyncio.run(saver.aprune(bare, strategy="delete"))
    with pytest.raises(
        swarmstate.InvalidArgumentError, match=r"not one str: pass delete_for_runs\(\[.r1.\]\)"
    ):
        saver.delete_for_runs("r1")
    assert everything(saver) == before
    saver.prune(["t10"], strategy="delete")
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"t", "1", "0"}

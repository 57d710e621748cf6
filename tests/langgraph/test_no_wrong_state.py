"""Corners where a saver could return the wrong state without an error, and what it does instead.

Each test runs a real graph (plain Python nodes) and compares with LangGraph's
reference ``InMemorySaver`` where one applies: forks made by ``__copy__``, a
store restored under a live saver, retention in another process while a run
is in flight, a thread deleted during a run (its first one included) with
``durability="async"``, a claim renewed by the run holding it, reads racing
retention, and retention bounds that overflow ``datetime``.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import operator
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import swarmstate
from swarmstate.integrations.langgraph import Retention, SwarmStateSaver

MakeStore = Callable[[], swarmstate.BaseStore]


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def _text(n: int) -> str:
    return " ".join(f"w{(n * 7919 + i * 104729) % 100003:x}" for i in range(50))


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    steps: Annotated[list[str], operator.add]


def _chat(saver: Any, gate: threading.Event | None = None) -> Any:
    """user -> agent -> tool -> answer; ``gate`` holds ``agent`` until it is set."""

    def agent(state: Chat) -> dict[str, Any]:
        if gate is not None:
            assert gate.wait(60)
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"agent {n} {_text(n)}", id=f"a{n}")],
            "steps": ["agent"],
        }

    def tool(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"tool {n} {_text(n + 1)}", id=f"t{n}")],
            "steps": ["tool"],
        }

    def answer(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"answer {n} {_text(n + 2)}", id=f"x{n}")],
            "steps": ["answer"],
        }

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_node("tool", tool)
    builder.add_node("answer", answer)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tool")
    builder.add_edge("tool", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def _turn(graph: Any, thread: str, n: int, **options: Any) -> Any:
    user = HumanMessage(content=f"question {n} {_text(n + 3)}", id=f"{thread}-u{n}")
    return graph.invoke({"messages": [user]}, cfg(thread), durability="sync", **options)


def _states(graph: Any, thread: str) -> list[Any]:
    return [
        (s.values, s.next, s.metadata.get("step")) for s in graph.get_state_history(cfg(thread))
    ]


# -- 1. forks made by __copy__ ----------------------------------------------------


@pytest.mark.parametrize("which", ["middle", "first", "latest"])
def test_a_copy_fork_reads_and_resumes_as_the_reference_does(
    make_store: MakeStore, which: str
) -> None:
    results = []
    for saver in (SwarmStateSaver(make_store()), InMemorySaver()):
        graph = _chat(saver)
        for n in range(3):
            _turn(graph, "c", n)
        history = list(graph.get_state_history(cfg("c")))
        target = {"middle": history[len(history) // 2], "first": history[-1], "latest": history[0]}[
            which
        ]
        fork = graph.update_state(target.config, None, as_node="__copy__")
        copied = graph.get_state(fork)
        assert copied.values == target.values  # the copy holds every value it copied
        resumed = graph.invoke(None, fork, durability="sync")
        results.append((copied.values, copied.next, resumed, _states(graph, "c")))
    ours, reference = results
    assert ours == reference


# -- 2. restore under a live saver -------------------------------------------------


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    out = list(state)
    for write in writes:
        out.extend(write if isinstance(write, list) else [write])
    return out


class Delta(TypedDict, total=False):
    messages: Annotated[list[Any], DeltaChannel(_fold, snapshot_frequency=3)]


def _delta_graph(saver: Any, answers: list[str]) -> Any:
    def agent(state: Delta) -> dict[str, Any]:
        return {"messages": [{"role": "assistant", "content": answers[0]}]}

    builder = StateGraph(Delta)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver, interrupt_before=["agent"])


def _content(message: Any) -> str:
    return message["content"] if isinstance(message, dict) else message.content


def test_a_restore_rolls_back_what_every_saver_in_the_process_reads(
    make_store: MakeStore,
) -> None:
    store = make_store()
    answers = ["early"]
    saver = SwarmStateSaver(store)
    graph = _delta_graph(saver, answers)
    for n in range(4):  # a few turns, so a history walk has rows to remember
        graph.invoke({"messages": [{"role": "user", "content": f"u{n}"}]}, cfg("r"))
        graph.invoke(None, cfg("r"))
    graph.invoke({"messages": [{"role": "user", "content": "last"}]}, cfg("r"))  # before agent
    before = store.snapshot()
    answers[0] = "first"
    graph.invoke(None, cfg("r"))
    assert _content(graph.get_state(cfg("r")).values["messages"][-1]) == "first"
    store.restore(before)
    answers[0] = "second"
    graph.invoke(None, cfg("r"))
    for reader in (saver, SwarmStateSaver(store)):
        last = _delta_graph(reader, answers).get_state(cfg("r")).values["messages"][-1]
        assert _content(last) == "second"
    # The next turns (a DeltaChannel snapshot among them) keep what the store holds.
    answers[0] = "later"
    for n in range(4):
        graph.invoke({"messages": [{"role": "user", "content": f"v{n}"}]}, cfg("r"))
        graph.invoke(None, cfg("r"))
    contents = [_content(m) for m in graph.get_state(cfg("r")).values["messages"]]
    assert "first" not in contents
    assert contents.count("second") == 1
    assert contents.count("later") == 4
    reread = _delta_graph(SwarmStateSaver(store), answers).get_state(cfg("r"))
    fresh = [_content(m) for m in reread.values["messages"]]
    assert fresh == contents


# -- 3. retention in another process while a run is in flight ----------------------


def _worker(spec: tuple[str, ...], queue: Any) -> None:
    """Another process: three turns on the thread, then retain(keep_last=2)."""
    try:
        if spec[0] == "disk":
            from swarmstate.backends.disk import DiskStore

            store: swarmstate.BaseStore = DiskStore(spec[1])
        else:
            from swarmstate.backends.postgres import PostgresStore

            store = PostgresStore(spec[1], schema=spec[2])
        with store:
            saver = SwarmStateSaver(store)
            graph = _chat(saver)
            for n in range(100, 103):
                _turn(graph, "live", n)
            report = saver.retain(keep_last=2)
            queue.put(("ok", report.checkpoints_deleted))
    except BaseException as exc:  # reported to the test
        queue.put(("error", repr(exc)))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["disk", "postgres"])
def test_retention_elsewhere_during_a_run_leaves_every_checkpoint_readable(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "disk":
        from swarmstate.backends.disk import DiskStore

        path = str(tmp_path / "live.db")
        store: swarmstate.BaseStore = DiskStore(path)
        spec: tuple[str, ...] = ("disk", path)
    else:
        store = request.getfixturevalue("pg_store_factory")()
        spec = ("postgres", request.getfixturevalue("pg_conninfo"), store.schema)  # type: ignore[attr-defined]
    gate = threading.Event()
    saver = SwarmStateSaver(store)
    # Three turns: run B's next write then builds on stored bytes that only the
    # checkpoints retention deletes reference (in the layout this replaced).
    for n in range(3):
        _turn(_chat(saver), "live", n)
    outcome: list[Any] = []
    # Run B: its input checkpoint is written, then its agent waits at the gate.
    run = threading.Thread(target=lambda: outcome.append(_turn(_chat(saver, gate), "live", 50)))
    run.start()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    other = ctx.Process(target=_worker, args=(spec, queue))
    other.start()
    other.join(120)
    status, detail = queue.get(timeout=10)
    assert status == "ok", detail
    assert detail > 0, "retention deleted the checkpoints run B started from"
    gate.set()
    run.join(60)
    assert outcome, "run B finished"
    # Every checkpoint reads back, for a saver with no cache and for verify().
    fresh = SwarmStateSaver(store)
    assert fresh.verify() == []
    assert list(fresh.list(cfg("live")))
    latest = _chat(fresh).get_state(cfg("live")).values
    assert latest["messages"][-1].content.startswith("answer")
    assert latest["steps"][-3:] == ["agent", "tool", "answer"]
    store.close()


# -- 4. a thread deleted while a run with a subgraph is going ------------------------


class Outer(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def _with_subgraph(saver: Any, gate: threading.Event, inside: threading.Event) -> Any:
    def think(state: Outer) -> dict[str, Any]:
        inside.set()
        assert gate.wait(60)
        return {"messages": [AIMessage(content="thought", id=f"think{len(state['messages'])}")]}

    def reply(state: Outer) -> dict[str, Any]:
        return {"messages": [AIMessage(content="reply", id=f"reply{len(state['messages'])}")]}

    inner = StateGraph(Outer)
    inner.add_node("think", think)
    inner.add_node("reply", reply)
    inner.add_edge(START, "think")
    inner.add_edge("think", "reply")
    inner.add_edge("reply", END)
    outer = StateGraph(Outer)
    outer.add_node("agent", inner.compile())
    outer.add_node("after", reply)
    outer.add_edge(START, "agent")
    outer.add_edge("agent", "after")
    outer.add_edge("after", END)
    return outer.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["async", "sync", "exit"])
def test_a_thread_deleted_during_a_run_stays_deleted(
    make_store: MakeStore, durability: str
) -> None:
    saver = SwarmStateSaver(make_store())
    gate, inside = threading.Event(), threading.Event()
    graph = _with_subgraph(saver, gate, inside)
    gate.set()
    graph.invoke({"messages": [HumanMessage(content="hi", id="h0")]}, cfg("gone"))
    gate.clear()
    inside.clear()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            graph.invoke(
                {"messages": [HumanMessage(content="again", id="h1")]},
                cfg("gone"),
                durability=durability,
            )
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert inside.wait(60)
    saver.delete_thread("gone")
    gate.set()
    worker.join(60)
    if durability != "exit":
        assert errors, "the run could not go on"
        assert isinstance(errors[0], swarmstate.ThreadDeletedError), errors
    # Nothing of the thread is readable, and nothing lists it, in any namespace.
    fresh = SwarmStateSaver(saver.store)
    assert fresh.get_tuple(cfg("gone")) is None
    assert list(fresh.list(cfg("gone"))) == []
    assert "gone" not in fresh.list_threads()
    assert saver.store.namespaces("langgraph:t4:gone,") == []
    # A new run under the same id starts afresh.
    gate.set()
    graph.invoke({"messages": [HumanMessage(content="new", id="n0")]}, cfg("gone"))
    assert [m.content for m in graph.get_state(cfg("gone")).values["messages"]] == [
        "new",
        "thought",
        "reply",
        "reply",
    ]


def _deletes_then_subgraph(saver: Any, other: SwarmStateSaver) -> Any:
    """``delete`` removes the thread through ``other``; then a compiled subgraph runs."""

    def delete(state: Outer, config: RunnableConfig) -> dict[str, Any]:
        other.delete_thread(config["configurable"]["thread_id"])
        return {"messages": [AIMessage(content="deleted", id="deleted")]}

    def reply(state: Outer) -> dict[str, Any]:
        return {"messages": [AIMessage(content="reply", id=f"reply{len(state['messages'])}")]}

    inner = StateGraph(Outer)
    inner.add_node("think", reply)
    inner.add_node("reply", reply)
    inner.add_edge(START, "think")
    inner.add_edge("think", "reply")
    inner.add_edge("reply", END)
    outer = StateGraph(Outer)
    outer.add_node("delete", delete)
    outer.add_node("agent", inner.compile())
    outer.add_edge(START, "delete")
    outer.add_edge("delete", "agent")
    outer.add_edge("agent", END)
    return outer.compile(checkpointer=saver)


@pytest.mark.parametrize("backend", ["disk", "postgres"])
def test_a_thread_deleted_by_another_handle_during_its_first_run_stays_deleted(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The run's first checkpoints were made before the deletion and, with the
    # default durability ("async"), their puts are still in flight when it
    # lands; the subgraph's checkpoints run under one the run never stores.
    if backend == "disk":
        from swarmstate.backends.disk import DiskStore

        store: swarmstate.BaseStore = DiskStore(tmp_path / "first.db")
        elsewhere: swarmstate.BaseStore = DiskStore(tmp_path / "first.db")
        reader: swarmstate.BaseStore = DiskStore(tmp_path / "first.db")
    else:
        make = request.getfixturevalue("pg_store_factory")
        store = make()
        elsewhere = make(schema=store.schema)  # type: ignore[attr-defined]
        reader = make(schema=store.schema)  # type: ignore[attr-defined]
    saver = SwarmStateSaver(store)
    graph = _deletes_then_subgraph(saver, SwarmStateSaver(elsewhere))
    threads = [f"first{n}" for n in range(4)]
    for thread in threads:
        with pytest.raises(swarmstate.ThreadDeletedError):
            graph.invoke({"messages": [HumanMessage(content="hi", id="h0")]}, cfg(thread))
    # Nothing of the threads is readable or listed, through a handle of its own.
    fresh = SwarmStateSaver(reader)
    for thread in threads:
        assert fresh.get_tuple(cfg(thread)) is None, thread
        assert list(fresh.list(cfg(thread))) == [], thread
        assert reader.namespaces(f"langgraph:t{len(thread)}:{thread},") == [], thread
    assert fresh.list_threads() == []
    assert fresh.thread_count() == 0
    assert fresh.recent_threads() == []
    # A new run under the same id, whose subgraph saves before the checkpoint it
    # runs under is stored, goes on and keeps everything.
    gate, inside = threading.Event(), threading.Event()
    gate.set()
    again = _with_subgraph(saver, gate, inside)
    again.invoke({"messages": [HumanMessage(content="new", id="n0")]}, cfg(threads[0]))
    expected = ["new", "thought", "reply", "reply"]
    assert [m.content for m in again.get_state(cfg(threads[0])).values["messages"]] == expected
    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in fresh.list(cfg(threads[0]))}
    assert len(namespaces) == 2  # the graph's and its subgraph's
    assert fresh.list_threads() == [threads[0]]


def test_a_checkpoint_made_before_its_threads_deletion_is_refused_without_a_parent(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    config = cfg("late", checkpoint_ns="")
    root, child = empty_checkpoint(), empty_checkpoint()  # made now: before the deletion
    saver.delete_thread("late")
    with pytest.raises(swarmstate.ThreadDeletedError):
        saver.put(config, root, {"source": "input", "step": -1}, {})
    assert saver.get_tuple(config) is None
    assert saver.list_threads() == []
    # A checkpoint made after the deletion starts the thread afresh.
    made = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert saver.list_threads() == ["late"]
    with pytest.raises(swarmstate.ThreadDeletedError):
        saver.put(made, child, {"source": "loop", "step": 0}, {})
    kept = [c.checkpoint["id"] for c in saver.list(config)]
    assert kept == [made["configurable"]["checkpoint_id"]]


# -- 5. a claim renewed by the run that holds it --------------------------------------


def test_the_run_holding_a_claim_renews_it_and_goes_on(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    token = saver.claim("w", ttl=30)
    renewed: list[Any] = []

    class Step(TypedDict, total=False):
        n: Annotated[list[int], operator.add]

    def work(state: Step) -> dict[str, Any]:
        # Mid-run, the worker extends its own claim: its writes keep the token.
        saver.renew("w", token, ttl=60)
        renewed.append(True)
        return {"n": [len(state.get("n", []))]}

    builder = StateGraph(Step)
    builder.add_node("work", work)
    builder.add_node("more", work)
    builder.add_edge(START, "work")
    builder.add_edge("work", "more")
    builder.add_edge("more", END)
    graph = builder.compile(checkpointer=saver)
    config = cfg("w", fence=token)
    assert graph.invoke({"n": []}, config, durability="sync") == {"n": [0, 1]}
    assert renewed == [True, True]
    # Another worker's claim fences the first for good; its renew is refused.
    newer = saver.claim("w", ttl=30)
    with pytest.raises(swarmstate.FencedError, match="not its newest claim"):
        saver.renew("w", token)
    with pytest.raises(swarmstate.FencedError):
        graph.invoke({"n": []}, config, durability="sync")
    assert saver.release("w", newer)
    with pytest.raises(swarmstate.FencedError, match="released"):
        saver.renew("w", newer)


# -- 6. reads while retention runs elsewhere ------------------------------------------


def test_a_list_racing_retention_skips_what_was_deleted_and_reports_no_damage(
    make_store: MakeStore,
) -> None:
    store = make_store()
    writer = SwarmStateSaver(store)
    graph = _chat(writer)
    for n in range(13):  # more checkpoints than one batch of a list's values
        _turn(graph, "race", n)
    expected = {t.checkpoint["id"] for t in writer.list(cfg("race"))}
    reader = SwarmStateSaver(store)  # a cold cache: its values come from the store
    pruner = SwarmStateSaver(store)
    found = []
    for i, row in enumerate(reader.list(cfg("race"))):
        found.append(row.checkpoint["id"])
        if i == 0:
            # Between the reader's batches of values, another handle keeps two.
            pruner.retain(keep_last=2)
    assert found
    assert set(found) <= expected
    assert reader.verify() == []
    assert len(list(SwarmStateSaver(store).list(cfg("race")))) == 2


# -- 8. retention bounds past what datetime holds --------------------------------------


@pytest.mark.parametrize(
    "older_than",
    [math.inf, 1e12, 1e18, datetime.timedelta.max, datetime.timedelta(days=999_999_999)],
)
def test_an_older_than_past_the_calendar_expires_nothing(
    make_store: MakeStore, older_than: Any
) -> None:
    saver = SwarmStateSaver(make_store())
    _turn(_chat(saver), "old", 0)
    report = saver.retain(older_than=older_than)
    assert (report.threads_deleted, report.checkpoints_deleted) == (0, 0)
    assert saver.list_threads() == ["old"]
    assert Retention(older_than=older_than).older_than == older_than
    for bad in (math.nan, -1, -math.inf):
        with pytest.raises(swarmstate.InvalidArgumentError, match="older_than"):
            saver.retain(older_than=bad)

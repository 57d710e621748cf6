"""Real LangGraph graphs (plain Python nodes) checkpointed by SwarmStateSaver on every backend."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import multiprocessing
import operator
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import entry, keys

# -- graphs --------------------------------------------------------------


class Steps(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    answer: str


def _step(name: str) -> Any:
    def node(state: Steps) -> dict[str, Any]:
        return {"steps": [name]}

    return node


def chain_graph(saver: Any) -> Any:
    """START -> a -> b -> c -> END, each node appending its name."""
    builder = StateGraph(Steps)
    for name in "abc":
        builder.add_node(name, _step(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def _ask(state: Steps) -> dict[str, Any]:
    answer = interrupt({"question": "proceed?"})
    return {"steps": ["asked"], "answer": answer}


def interrupt_graph(saver: Any) -> Any:
    """START -> a -> ask (interrupts) -> c."""
    builder = StateGraph(Steps)
    builder.add_node("a", _step("a"))
    builder.add_node("ask", _ask)
    builder.add_node("c", _step("c"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "ask")
    builder.add_edge("ask", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


# -- the basics ------------------------------------------------------------


def test_multi_step_invoke_checkpoints_every_superstep(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    assert graph.invoke({"steps": []}, cfg("t1")) == {"steps": ["a", "b", "c"]}
    assert graph.invoke({"steps": ["again"]}, cfg("t1"))["steps"] == [
        "a",
        "b",
        "c",
        "again",
        "a",
        "b",
        "c",
    ]
    history = list(graph.get_state_history(cfg("t1")))
    # Per run: the input, then one per superstep; newest first, each pointing at its parent.
    assert len(history) == 10
    assert [s.metadata["step"] for s in history] == [8, 7, 6, 5, 4, 3, 2, 1, 0, -1]
    ids = [s.config["configurable"]["checkpoint_id"] for s in history]
    assert ids == sorted(ids, reverse=True)
    for newer, older in itertools.pairwise(history):
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == (older.config["configurable"]["checkpoint_id"])
        )


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes_persist_the_final_state(saver: SwarmStateSaver, durability: str) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("d"), durability=durability)
    state = graph.get_state(cfg("d"))
    assert state.values == {"steps": ["a", "b", "c"]}
    assert state.next == ()
    count = len(list(saver.list(cfg("d"))))
    if durability == "exit":
        assert count == 1  # only the final checkpoint is written
    else:
        assert count == 5  # the input, then one per superstep


def test_interrupt_then_resume_with_command(saver: SwarmStateSaver) -> None:
    graph = interrupt_graph(saver)
    out = graph.invoke({"steps": []}, cfg("i"))
    assert out["__interrupt__"][0].value == {"question": "proceed?"}
    state = graph.get_state(cfg("i"))
    assert state.next == ("ask",)
    assert state.tasks[0].interrupts[0].value == {"question": "proceed?"}
    # A fresh saver on the same store resumes it: nothing lives in the saver object.
    resumed = interrupt_graph(SwarmStateSaver(saver.store))
    out = resumed.invoke(Command(resume="yes"), cfg("i"))
    assert out == {"steps": ["a", "asked", "c"], "answer": "yes"}


_calls: list[str] = []
_fail_once: dict[str, Any] = {"armed": True, "saver": None}


def _sibling(state: Steps) -> dict[str, Any]:
    _calls.append("sibling")
    return {"steps": ["sibling"]}


def _flaky(state: Steps) -> dict[str, Any]:
    _calls.append("flaky")
    if _fail_once["armed"]:
        _fail_once["armed"] = False
        # Fail only once the sibling's write is saved: a sibling still running
        # when the step fails has its writes dropped by the runtime, which
        # would make this test depend on thread timing.
        saver = _fail_once["saver"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = saver.get_tuple(cfg("f"))
            if found is not None and any(w[1] == "steps" for w in found.pending_writes or []):
                break
            time.sleep(0.002)
        raise RuntimeError("boom")
    return {"steps": ["flaky"]}


def test_failing_node_keeps_its_siblings_writes(saver: SwarmStateSaver) -> None:
    _calls.clear()
    _fail_once.update(armed=True, saver=saver)
    builder = StateGraph(Steps)
    builder.add_node("sibling", _sibling)
    builder.add_node("flaky", _flaky)
    builder.add_edge(START, "sibling")
    builder.add_edge(START, "flaky")
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="boom"):
        graph.invoke({"steps": []}, cfg("f"))
    latest = saver.get_tuple(cfg("f"))
    assert latest is not None
    channels = {(w[1]) for w in latest.pending_writes or []}
    assert "steps" in channels  # the sibling's successful write
    assert "__error__" in channels  # the failure, stored as a special write
    # Resuming reruns only the failed node; the sibling's write is reused.
    out = graph.invoke(None, cfg("f"))
    assert sorted(out["steps"]) == ["flaky", "sibling"]
    assert _calls.count("sibling") == 1
    assert _calls.count("flaky") == 2


class Fan(TypedDict, total=False):
    items: list[int]
    results: Annotated[list[int], operator.add]


def _square(arg: dict[str, int]) -> dict[str, Any]:
    return {"results": [arg["item"] ** 2]}


def test_send_fan_out_runs_every_branch(saver: SwarmStateSaver) -> None:
    builder = StateGraph(Fan)
    builder.add_node("square", _square)
    builder.add_conditional_edges(
        START, lambda s: [Send("square", {"item": i}) for i in s["items"]], ["square"]
    )
    graph = builder.compile(checkpointer=saver)
    out = graph.invoke({"items": list(range(8))}, cfg("fan"))
    assert sorted(out["results"]) == [i * i for i in range(8)]
    assert sorted(graph.get_state(cfg("fan")).values["results"]) == [i * i for i in range(8)]


def test_update_state_and_fork_from_an_older_checkpoint(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("fork"))
    history = list(graph.get_state_history(cfg("fork")))
    after_a = next(s for s in history if s.values.get("steps") == ["a"])
    assert after_a.next == ("b",)
    # Fork: rewrite the state as of "after a", then replay from the fork.
    forked = graph.update_state(after_a.config, {"steps": ["edited"]})
    assert (
        forked["configurable"]["checkpoint_id"] > history[0].config["configurable"]["checkpoint_id"]
    )
    out = graph.invoke(None, forked)
    assert out["steps"] == ["a", "edited", "b", "c"]
    # Replaying the original checkpoint re-runs b and c from it.
    replay = graph.invoke(None, after_a.config)
    assert replay["steps"] == ["a", "b", "c"]
    # The original branch is still there, untouched.
    original = graph.get_state(history[0].config)
    assert original.values == {"steps": ["a", "b", "c"]}


def _inner_node(state: Steps) -> dict[str, Any]:
    answer = interrupt("inner question")
    return {"steps": [f"inner:{answer}"]}


def test_subgraph_checkpoints_live_under_their_namespace(saver: SwarmStateSaver) -> None:
    inner = StateGraph(Steps)
    inner.add_node("inner_node", _inner_node)
    inner.add_edge(START, "inner_node")
    builder = StateGraph(Steps)
    builder.add_node("sub", inner.compile())
    builder.add_edge(START, "sub")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"steps": []}, cfg("sg"))
    state = graph.get_state(cfg("sg"), subgraphs=True)
    sub_state = state.tasks[0].state
    sub_ns = sub_state.config["configurable"]["checkpoint_ns"]
    assert sub_ns.startswith("sub:")
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(cfg("sg"))}
    assert namespaces == {"", sub_ns}
    only_root = {
        t.config["configurable"]["checkpoint_ns"] for t in saver.list(cfg("sg", checkpoint_ns=""))
    }
    assert only_root == {""}
    assert saver.get_tuple(cfg("sg", checkpoint_ns=sub_ns)) is not None
    out = graph.invoke(Command(resume="ok"), cfg("sg"))
    assert out["steps"] == ["inner:ok"]


def test_list_filters_by_metadata_before_and_limit(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("L"))
    graph.invoke({"steps": []}, cfg("other"))
    everything = list(saver.list(cfg("L")))
    assert len(everything) == 5
    inputs = list(saver.list(cfg("L"), filter={"source": "input"}))
    assert [t.metadata["step"] for t in inputs] == [-1]
    loops = list(saver.list(cfg("L"), filter={"source": "loop", "step": 1}))
    assert len(loops) == 1
    assert list(saver.list(cfg("L"), filter={"source": "nope"})) == []
    newest_two = list(saver.list(cfg("L"), limit=2))
    assert newest_two == everything[:2]
    before = list(saver.list(cfg("L"), before=everything[1].config, limit=1))
    assert [t.config for t in before] == [everything[2].config]
    assert len(list(saver.list(None))) == 10  # every thread
    assert len(list(saver.list(None, filter={"step": -1}))) == 2


@pytest.mark.parametrize(
    "key",
    [
        "x') OR 1=1 --",
        "$.source",
        "source\x00",
        "../../etc",
        '{"$ne": null}',
        "*",
        "%",
    ],
)
def test_hostile_filter_keys_neither_break_nor_leak(saver: SwarmStateSaver, key: str) -> None:
    chain_graph(saver).invoke({"steps": []}, cfg("h"))
    assert list(saver.list(cfg("h"), filter={key: "input"})) == []
    assert list(saver.list(None, filter={"source": "input", key: None})) == []
    assert len(list(saver.list(cfg("h"), filter={"source": "input"}))) == 1


def test_delete_thread_removes_only_that_thread(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    for thread in ("keep", "drop", "drop2"):
        graph.invoke({"steps": []}, cfg(thread))
    saver.delete_thread("drop")
    assert saver.get_tuple(cfg("drop")) is None
    assert list(saver.list(cfg("drop"))) == []
    assert graph.get_state(cfg("keep")).values == {"steps": ["a", "b", "c"]}
    assert graph.get_state(cfg("drop2")).values == {"steps": ["a", "b", "c"]}
    assert not any(ns.startswith(keys.thread_prefix("drop")) for ns in saver.store.namespaces())


async def test_async_graph_uses_the_async_methods(saver: SwarmStateSaver) -> None:
    graph = interrupt_graph(saver)
    out = await graph.ainvoke({"steps": []}, cfg("as"))
    assert "__interrupt__" in out
    state = await graph.aget_state(cfg("as"))
    assert state.next == ("ask",)
    out = await graph.ainvoke(Command(resume="async"), cfg("as"))
    assert out == {"steps": ["a", "asked", "c"], "answer": "async"}
    history = [s async for s in graph.aget_state_history(cfg("as"))]
    assert len(history) == 5
    assert (await saver.aget_tuple(cfg("as"))) is not None
    await saver.adelete_thread("as")
    assert (await graph.aget_state(cfg("as"))).values == {}


HOSTILE_IDS = [
    "",
    ",",
    "1:a,",
    "a",
    "a,",
    "a:b",
    "langgraph:t1:a,",
    "ü🦜 thread",
    "x\x01\x02y",
    "/",
    "a" * 500,
]


def test_hostile_thread_ids_never_collide(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    for thread in HOSTILE_IDS:
        graph.invoke({"steps": [thread]}, cfg(thread))
    for thread in HOSTILE_IDS:
        assert graph.get_state(cfg(thread)).values["steps"] == [thread, "a", "b", "c"]
        listed = {t.config["configurable"]["thread_id"] for t in saver.list(cfg(thread))}
        assert listed == {thread}
    saver.delete_thread("a")
    assert saver.get_tuple(cfg("a")) is None
    for thread in HOSTILE_IDS:
        if thread != "a":
            assert saver.get_tuple(cfg(thread)) is not None, thread
    saver.copy_thread("a,", "a")
    assert graph.get_state(cfg("a")).values["steps"] == ["a,", "a", "b", "c"]


def test_hostile_checkpoint_namespaces_never_collide(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("ns"))
    latest = saver.get_tuple(cfg("ns"))
    assert latest is not None
    for ns in HOSTILE_IDS[1:]:
        saver.put(cfg("ns", checkpoint_ns=ns), latest.checkpoint, {"source": "update"}, {})
    for ns in HOSTILE_IDS[1:]:
        got = saver.get_tuple(cfg("ns", checkpoint_ns=ns))
        assert got is not None
        assert got.config["configurable"]["checkpoint_ns"] == ns
        assert len(list(saver.list(cfg("ns", checkpoint_ns=ns)))) == 1
    assert len(list(saver.list(cfg("ns", checkpoint_ns="")))) == 5


# -- extended operations ----------------------------------------------------


def test_copy_thread_prune_keep_last_and_delete_for_runs(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke(
        {"steps": []}, {"configurable": {"thread_id": "src"}, "metadata": {"run_id": "r1"}}
    )
    graph.invoke(
        {"steps": []}, {"configurable": {"thread_id": "src"}, "metadata": {"run_id": "r2"}}
    )
    saver.copy_thread("src", "dst")
    src_ids = [t.checkpoint["id"] for t in saver.list(cfg("src"))]
    assert [t.checkpoint["id"] for t in saver.list(cfg("dst"))] == src_ids
    saver.prune(["dst"], keep_last=3)
    assert [t.checkpoint["id"] for t in saver.list(cfg("dst"))] == src_ids[:3]
    assert graph.get_state(cfg("dst")).values["steps"] == ["a", "b", "c"] * 2
    saver.delete_for_runs(["r2"])
    assert {t.metadata["run_id"] for t in saver.list(cfg("src"))} == {"r1"}
    # The copy was written by no run: deleting r2's checkpoints leaves it whole.
    assert [t.checkpoint["id"] for t in saver.list(cfg("dst"))] == src_ids[:3]
    saver.prune(["src"], strategy="delete_all")  # the Agent Server's name for "delete"
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["dst"] * 3
    assert saver.store.namespaces(keys.RUNS) == []  # src's run index went with it; dst has none
    saver.delete_thread("dst")
    # Index entries went with their threads; what stays is one small tombstone each,
    # and the saver's note that the store's indexes are complete.
    assert saver.store.namespaces() == ["langgraph:g", "langgraph:m"]
    assert saver.store.count("langgraph:g") == 2
    with pytest.raises(swarmstate.InvalidArgumentError, match="strategy"):
        saver.prune(["src"], strategy="keep_everything")
    with pytest.raises(swarmstate.InvalidArgumentError, match="keep_last"):
        saver.prune(["src"], keep_last=0)


def test_a_runs_checkpoints_carry_its_tag_and_only_they_and_delete_for_runs_finds_them(
    saver: SwarmStateSaver,
) -> None:
    graph = chain_graph(saver)
    run = {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "r1"}}
    graph.invoke({"steps": []}, run)
    checkpoints = len(list(saver.list(cfg("t"))))
    assert checkpoints > 2
    # Each checkpoint carries the run's tag on its own row: no row beside it.
    tagged = saver.store.tagged("group")
    assert {value for value, _, _ in tagged} == {keys.field("r1")}
    assert sorted(key for _, _, key in tagged) == sorted(
        keys.checkpoint_key(t.checkpoint["id"]) for t in saver.list(cfg("t"))
    )
    saver.delete_for_runs(["r1"])
    assert list(saver.list(cfg("t"))) == []
    assert saver.store.tagged("group") == []
    # The same run writing there again is found again.
    graph.invoke({"steps": []}, run)
    assert len(list(saver.list(cfg("t")))) == checkpoints
    saver.delete_for_runs(["r1"])
    assert list(saver.list(cfg("t"))) == []
    saver.delete_thread("t")
    # Only its tombstone is left, and the note that the store's checkpoints carry tags.
    assert saver.store.namespaces() == ["langgraph:g", "langgraph:m"]


class _TaggedSerde(JsonPlusSerializer):
    """LangGraph's msgpack under another type name, as an encrypting serializer would."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        return "tagged+" + kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        assert kind.startswith("tagged+"), kind  # every stored payload went through us
        return super().loads_typed((kind.removeprefix("tagged+"), payload))


def test_a_serializer_of_another_format_gets_the_typed_layout(
    make_store: Callable[[], swarmstate.BaseStore],
) -> None:
    saver = SwarmStateSaver(make_store(), serde=_TaggedSerde())
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "r"}})
    history = list(saver.list(cfg("t")))
    assert graph.get_state(cfg("t")).values["steps"] == ["a", "b", "c"]
    namespace = keys.scope("t", "")
    for key, data in saver.store.items(namespace, raw=True):
        if key.endswith(keys.CHECKPOINT):
            assert entry.inflated(data)[0] == 0x97  # typed pairs, not the serializer's own document
    looped = list(saver.list(cfg("t"), filter={"source": "loop"}))
    assert [t.checkpoint["id"] for t in looped] == [
        t.checkpoint["id"] for t in history if t.metadata["source"] == "loop"
    ]
    saver.delete_for_runs(["r"])
    assert list(saver.list(cfg("t"))) == []


def test_metadata_the_head_reader_cannot_revive_is_filtered_through_the_serializer(
    saver: SwarmStateSaver,
) -> None:
    # A datetime in metadata is a serializer extension: the filter must still match it.
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    for day in range(3):
        checkpoint = empty_checkpoint()
        when = start + datetime.timedelta(days=day)
        saver.put(cfg("dated"), checkpoint, {"source": "update", "step": day, "when": when}, {})
    found = list(saver.list(cfg("dated"), filter={"when": start + datetime.timedelta(days=1)}))
    assert [t.metadata["step"] for t in found] == [1]
    assert found[0].metadata["when"] == start + datetime.timedelta(days=1)
    assert len(list(saver.list(cfg("dated"), filter={"source": "update"}))) == 3


def test_saver_data_moves_between_backends_with_transfer(
    make_store: Callable[[], swarmstate.BaseStore], tmp_path: Path
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from swarmstate.backends.disk import DiskStore

    class Chat(TypedDict):
        messages: Annotated[list[Any], operator.add]

    def reply(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"seen {len(state['messages'])}")]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    source = SwarmStateSaver(make_store())
    builder.compile(checkpointer=source).invoke(
        {"messages": [HumanMessage(content="hi")]}, cfg("chat")
    )
    with DiskStore(tmp_path / "moved.db") as disk:
        assert swarmstate.transfer(source.store, disk) == len(source.store)
        target = SwarmStateSaver(disk)
        state = builder.compile(checkpointer=target).get_state(cfg("chat"))
        assert [type(m).__name__ for m in state.values["messages"]] == [
            "HumanMessage",
            "AIMessage",
        ]
        assert [t.checkpoint for t in target.list(cfg("chat"))] == [
            t.checkpoint for t in source.list(cfg("chat"))
        ]


@pytest.mark.parametrize("step", ["write"])
def test_a_put_racing_delete_thread_never_leaves_a_checkpoint_its_run_cannot_find(
    step: str,
) -> None:
    # A put of run R lands just before the one step of delete_thread (it reads
    # nothing first): whatever survives must still be found (and removed) by
    # delete_for_runs([R]).
    saver = SwarmStateSaver(swarmstate.Store())
    graph = chain_graph(saver)
    run = {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "R"}}
    graph.invoke({"steps": []}, run)
    store = saver.store
    real = getattr(store, step)
    fired = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(step)
            checkpoint = empty_checkpoint()
            saver.put(cfg("t"), checkpoint, {"source": "loop", "step": 9, "run_id": "R"}, {})
        return real(*args, **kwargs)

    setattr(store, step, racing)
    saver.delete_thread("t")
    setattr(store, step, real)
    assert fired == [step]
    saver.delete_for_runs(["R"])
    assert list(saver.list(cfg("t"))) == []


def test_checkpoints_in_the_earlier_typed_layout_are_still_read(saver: SwarmStateSaver) -> None:
    # Before this layout, 0.1.0 kept plain metadata as it is, with None for its type.
    checkpoint = empty_checkpoint()
    key = keys.checkpoint_key(checkpoint["id"])
    metadata = {"source": "input", "step": -1, "run_id": "old"}
    stored_entry = [*saver.serde.dumps_typed(checkpoint), None, metadata, None, "old"]
    saver.store.set(keys.scope("legacy", ""), key, stored_entry)
    found = saver.get_tuple(cfg("legacy"))
    assert found is not None
    assert (found.checkpoint["id"], found.metadata) == (checkpoint["id"], metadata)
    assert [t.metadata for t in saver.list(cfg("legacy"), filter={"run_id": "old"})] == [metadata]


def test_concurrent_put_writes_from_many_threads(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("cw"))
    config = saver.get_tuple(cfg("cw"))
    assert config is not None

    def writer(task: int) -> None:
        for idx in range(5):
            saver.put_writes(config.config, [("steps", [f"{task}-{idx}"])], f"task{task}-{idx}")

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    got = saver.get_tuple(config.config)
    assert got is not None
    assert len(got.pending_writes or []) == 40
    # Insert-or-ignore: the same (task, idx) again leaves the first value.
    saver.put_writes(config.config, [("steps", ["changed"])], "task0-0")
    again = saver.get_tuple(config.config)
    assert again is not None
    assert ("task0-0", "steps", ["0-0"]) in (again.pending_writes or [])


def test_store_snapshot_and_restore_roll_every_thread_back(saver: SwarmStateSaver) -> None:
    graph = chain_graph(saver)
    graph.invoke({"steps": []}, cfg("one"))
    snap = saver.store.snapshot()
    graph.invoke({"steps": ["more"]}, cfg("one"))
    graph.invoke({"steps": []}, cfg("two"))
    changes = saver.store.snapshot().diff(snap)
    assert changes["added"]
    assert not changes["removed"]
    saver.store.restore(snap)
    assert graph.get_state(cfg("one")).values == {"steps": ["a", "b", "c"]}
    assert graph.get_state(cfg("two")).values == {}


def test_checkpoint_ids_with_escaped_characters_read_back_exactly(
    saver: SwarmStateSaver,
) -> None:
    """Ids holding the key encoding's escape characters take the full parse."""
    from langgraph.checkpoint.base import empty_checkpoint

    ids = ["1-plain", "2-\x01", "3-\x00\x01\x02", "4-\x01\x01c"]
    parent: str | None = None
    for checkpoint_id in ids:
        checkpoint = {**empty_checkpoint(), "id": checkpoint_id}
        config = cfg("esc", checkpoint_ns="", **({"checkpoint_id": parent} if parent else {}))
        saver.put(config, checkpoint, {"step": 0}, {})
        parent = checkpoint_id
    saver.put_writes(cfg("esc", checkpoint_ns="", checkpoint_id=ids[-1]), [("x", 1)], "task")
    latest = saver.get_tuple(cfg("esc"))
    assert latest is not None
    assert latest.config["configurable"]["checkpoint_id"] == ids[-1]
    assert latest.pending_writes == [("task", "x", 1)]
    assert [t.checkpoint["id"] for t in saver.list(cfg("esc"))] == ids[::-1]
    assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("esc"))] == ids[::-1]
    listed = saver.list(cfg("esc"), before=cfg("esc", checkpoint_id=ids[-1]), limit=1)
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [ids[-2]]
    for checkpoint_id in ids:
        found = saver.get_tuple(cfg("esc", checkpoint_id=checkpoint_id))
        assert found is not None
        assert found.config["configurable"]["checkpoint_id"] == checkpoint_id


def test_metadata_round_trips_whether_plain_or_needing_the_serializer(
    saver: SwarmStateSaver,
) -> None:
    """Plain metadata is stored as it is; a datetime or an enum goes through serde."""
    import datetime
    import enum

    from langgraph.checkpoint.base import empty_checkpoint

    class Mood(enum.Enum):
        GOOD = "good"

    plain = {"step": 1, "source": "loop", "tags": ["a", "b"], "nested": {"x": 1.5}}
    rich = {"step": 2, "when": datetime.datetime(2026, 1, 2, 3, 4, 5), "mood": Mood.GOOD}
    saver.put(cfg("meta", checkpoint_ns=""), {**empty_checkpoint(), "id": "1"}, plain, {})
    saver.put(
        cfg("meta", checkpoint_ns="", checkpoint_id="1"),
        {**empty_checkpoint(), "id": "2"},
        rich,
        {},
    )
    first = saver.get_tuple(cfg("meta", checkpoint_id="1"))
    second = saver.get_tuple(cfg("meta", checkpoint_id="2"))
    assert first is not None
    assert second is not None
    assert {k: first.metadata[k] for k in plain} == plain  # type: ignore[literal-required]
    assert second.metadata["when"] == rich["when"]  # type: ignore[typeddict-item]
    assert second.metadata["mood"] in (Mood.GOOD, "good")  # type: ignore[typeddict-item]
    assert [t.metadata["step"] for t in saver.list(cfg("meta"), filter={"step": 2})] == [2]


def test_int_thread_ids_and_missing_namespace_take_the_checked_path(
    saver: SwarmStateSaver,
) -> None:
    chain_graph(saver).invoke({"steps": []}, {"configurable": {"thread_id": 7}})
    by_int = saver.get_tuple({"configurable": {"thread_id": 7, "checkpoint_ns": None}})
    by_str = saver.get_tuple(cfg("7"))
    assert by_int is not None
    assert by_int == by_str
    assert by_int.config["configurable"]["thread_id"] == "7"
    with pytest.raises(swarmstate.InvalidArgumentError, match="thread_id"):
        saver.get_tuple({"configurable": {"thread_id": 7.5}})
    with pytest.raises(swarmstate.InvalidArgumentError, match="checkpoint_ns"):
        saver.get_tuple({"configurable": {"thread_id": "7", "checkpoint_ns": 3}})


# -- safe deserialization ---------------------------------------------------


def _stored_entry(store: swarmstate.BaseStore, namespace: str, key: str) -> Any:
    """A checkpoint entry as stored, inflated if it was stored compressed."""
    ((found, data),) = store.items(namespace, start=key, limit=1, raw=True)
    assert found == key
    return swarmstate.loads(entry.inflated(data))


def _plant_constructor_call(saver: SwarmStateSaver, target: Path) -> Any:
    """Store a checkpoint whose channel value asks the loader to call os.mkdir(target)."""
    chain_graph(saver).invoke({"steps": []}, cfg("evil"))
    latest = saver.get_tuple(cfg("evil"))
    assert latest is not None
    # The value of channel "steps" rides in the checkpoint entry as [BLOB, type,
    # bytes]: the entry is [metadata, parent id, run id, checkpoint, inline forms].
    namespace, key = keys.scope("evil", ""), keys.checkpoint_key(latest.checkpoint["id"])
    stored_entry = _stored_entry(saver.store, namespace, key)
    assert stored_entry[4]["steps"][:2] == [0, "msgpack"]
    # Extension 0 is JsonPlusSerializer's "call module.name(arg)".
    call = ormsgpack.Ext(0, ormsgpack.packb(["os", "mkdir", str(target)]))
    stored_entry[4]["steps"] = [0, "msgpack", ormsgpack.packb(call)]
    saver.store.set(namespace, key, stored_entry)
    return latest.config


def test_strict_default_serializer_does_not_run_stored_calls(
    saver: SwarmStateSaver, tmp_path: Path
) -> None:
    target = tmp_path / "pwned"
    config = _plant_constructor_call(saver, target)
    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["steps"] == str(target)  # the raw argument
    assert not target.exists()
    # The same bytes through a permissive serializer do run the call: the payload is real.
    permissive = SwarmStateSaver(
        saver.store, serde=JsonPlusSerializer(allowed_msgpack_modules=True)
    )
    permissive.get_tuple(config)
    assert target.is_dir()


def test_pickle_payloads_are_refused(saver: SwarmStateSaver) -> None:
    chain_graph(saver).invoke({"steps": []}, cfg("pk"))
    latest = saver.get_tuple(cfg("pk"))
    assert latest is not None
    namespace, key = keys.scope("pk", ""), keys.checkpoint_key(latest.checkpoint["id"])
    # The layout of typed pairs (for serializers that are not plain msgpack),
    # here claiming a pickled checkpoint.
    metadata, parent_id, run_id, _, layout = _stored_entry(saver.store, namespace, key)
    stored_entry = [
        "pickle",
        b"\x80\x04N.",
        *saver.serde.dumps_typed(metadata),
        parent_id,
        run_id,
        layout,
    ]
    saver.store.set(namespace, key, stored_entry)
    with pytest.raises(swarmstate.CorruptDataError, match="pickle"):
        saver.get_tuple(cfg("pk"))


@dataclasses.dataclass
class Ticket:
    title: str
    priority: int


class TicketState(TypedDict, total=False):
    ticket: Ticket


def test_with_allowlist_admits_the_graphs_own_types(saver: SwarmStateSaver) -> None:
    builder = StateGraph(TicketState)
    builder.add_node("bump", lambda s: {"ticket": Ticket(s["ticket"].title, 2)})
    builder.add_edge(START, "bump")
    # Strict by default: a graph with its own types names them (LangGraph does this at
    # compile time by itself when LANGGRAPH_STRICT_MSGPACK=true).
    allowed = saver.with_allowlist([(Ticket.__module__, "Ticket")])
    assert allowed.store is saver.store
    graph = builder.compile(checkpointer=allowed)
    graph.invoke({"ticket": Ticket("t", 1)}, cfg("tk"))
    assert graph.get_state(cfg("tk")).values["ticket"] == Ticket("t", 2)
    # The saver it was cloned from revives Ticket too: the graph wrote it through
    # them (tests/langgraph/test_graph_types.py has the graphs that name no type).
    raw = saver.get_tuple(cfg("tk"))
    assert raw is not None
    assert raw.checkpoint["channel_values"]["ticket"] == Ticket("t", 2)


# -- two processes ------------------------------------------------------------


def _child_resume(path: str, queue: Any) -> None:
    from swarmstate.backends.disk import DiskStore

    with DiskStore(path) as store:
        graph = interrupt_graph(SwarmStateSaver(store))
        out = graph.invoke(Command(resume="from child"), cfg("proc"))
        queue.put(out)


@pytest.mark.slow
def test_a_run_paused_in_one_process_resumes_in_another(tmp_path: Path) -> None:
    from swarmstate.backends.disk import DiskStore

    path = tmp_path / "shared.db"
    with DiskStore(path) as store:
        graph = interrupt_graph(SwarmStateSaver(store))
        assert "__interrupt__" in graph.invoke({"steps": []}, cfg("proc"))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_resume, args=(str(path), queue))
    child.start()
    out = queue.get(timeout=120)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert out == {"steps": ["a", "asked", "c"], "answer": "from child"}
    with DiskStore(path) as store:
        state = interrupt_graph(SwarmStateSaver(store)).get_state(cfg("proc"))
        assert state.values == out
        assert state.next == ()


@pytest.mark.slow
def test_the_readme_demo_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    demo = Path(__file__).parents[2] / "examples" / "langgraph_demo.py"
    done = subprocess.run(
        [sys.executable, str(demo), str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "fork log: ['outline', 'write', 'review: reject', 'sent back']" in done.stdout
    assert "thread is waiting again at ['review']" in done.stdout


def test_strict_serializer_returns_json_values_as_plain_data(saver: SwarmStateSaver) -> None:
    # LangGraph's older "json" format can name a langchain constructor; strict
    # mode hands back the data, not the object it describes.
    chain_graph(saver).invoke({"steps": []}, cfg("js"))
    latest = saver.get_tuple(cfg("js"))
    assert latest is not None
    namespace, key = keys.scope("js", ""), keys.checkpoint_key(latest.checkpoint["id"])
    stored_entry = _stored_entry(saver.store, namespace, key)
    described = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "prompts", "prompt", "PromptTemplate"],
        "kwargs": {"template": "hi {x}", "input_variables": ["x"]},
    }
    stored_entry[4]["steps"] = [0, "json", json.dumps(described).encode()]
    saver.store.set(namespace, key, stored_entry)
    strict = saver.get_tuple(cfg("js"))
    assert strict is not None
    assert strict.checkpoint["channel_values"]["steps"] == described
    permissive = SwarmStateSaver(saver.store, serde=JsonPlusSerializer())
    revived = permissive.get_tuple(cfg("js"))
    assert revived is not None
    assert type(revived.checkpoint["channel_values"]["steps"]).__name__ == "PromptTemplate"


# -- lifecycle --------------------------------------------------------------


def test_from_conn_string_opens_the_store_and_the_saver_closes_it(
    tmp_path: Path, pg_conninfo: str
) -> None:
    from swarmstate.backends.disk import DiskStore
    from swarmstate.backends.postgres import PostgresStore

    path = tmp_path / "state.db"
    with SwarmStateSaver.from_conn_string(str(path), synchronous="FULL") as saver:
        assert isinstance(saver.store, DiskStore)
        assert saver.store.synchronous == "FULL"
        chain_graph(saver).invoke({"steps": []}, cfg("lc"))
    with pytest.raises(swarmstate.StoreClosedError):
        saver.store.get("x", "y")
    again = SwarmStateSaver.from_conn_string(str(path))
    assert chain_graph(again).get_state(cfg("lc")).values["steps"] == ["a", "b", "c"]
    again.close()
    memory = SwarmStateSaver.from_conn_string(":memory:")
    assert isinstance(memory.store, swarmstate.Store)
    schema = "lc_" + uuid.uuid4().hex[:12]
    with SwarmStateSaver.from_conn_string(pg_conninfo, schema=schema) as pg:
        assert isinstance(pg.store, PostgresStore)
        pg.setup()
        chain_graph(pg).invoke({"steps": []}, cfg("lc"))
        assert pg.get_tuple(cfg("lc")) is not None
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_conninfo, autocommit=True) as conn:  # leave the cluster as it was
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    with pytest.raises(swarmstate.InvalidArgumentError, match="conn_string"):
        SwarmStateSaver.from_conn_string("")


def test_a_saver_closes_only_a_store_it_opened(tmp_path: Path) -> None:
    from swarmstate.backends.disk import DiskStore

    store = DiskStore(tmp_path / "mine.db")
    with SwarmStateSaver(store) as saver:
        chain_graph(saver).invoke({"steps": []}, cfg("mine"))
    assert store.get_many([("x", "y")]) == [None]  # still open: the caller owns it
    store.close()


def test_a_store_class_with_its_own_write_gets_every_write_through_it() -> None:
    class Counting(swarmstate.Store):
        def __init__(self) -> None:
            super().__init__()
            self.batches = 0

        def write(self, transaction: Any) -> Any:
            self.batches += 1
            return super().write(transaction)

    store = Counting()
    saver = SwarmStateSaver(store)
    chain_graph(saver).invoke({"steps": []}, cfg("own"))
    puts = len(list(saver.list(cfg("own"))))
    assert puts >= 4
    assert store.batches >= puts  # every checkpoint (and pending write) went through it


async def test_async_with_closes_the_store_it_opened(tmp_path: Path) -> None:
    async with SwarmStateSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        graph = chain_graph(saver)
        out = await graph.ainvoke({"steps": []}, cfg("aw"))
        assert out["steps"] == ["a", "b", "c"]
    with pytest.raises(swarmstate.StoreClosedError):
        saver.store.get("x", "y")


def test_a_path_where_a_store_belongs_gets_the_line_that_opens_one(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    for wrong in (path, tmp_path / "state.db"):
        with pytest.raises(swarmstate.InvalidArgumentError, match=r"DiskStore\(.*from_conn_string"):
            SwarmStateSaver(wrong)  # type: ignore[arg-type]
    with pytest.raises(swarmstate.InvalidArgumentError, match="got dict"):
        SwarmStateSaver({"path": path})  # type: ignore[arg-type]
    assert not (tmp_path / "state.db").exists()

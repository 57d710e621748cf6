"""Checkpoints that cost the change: what is stored, what is shared, what comes back."""

from __future__ import annotations

import functools
import operator
import threading
import zlib
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver, sharing, values
from swarmstate.integrations.langgraph.format import entry, keys

MakeStore = Callable[[], swarmstate.BaseStore]


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    trim: bool


def _text(n: int) -> str:
    return " ".join(f"word{(n * 31 + i * 17) % 997}" for i in range(60))


def chat_graph(saver: Any) -> Any:
    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        out: list[Any] = [AIMessage(content=f"answer {n} {_text(n)}", id=f"ai-{n}")]
        if state.get("trim"):
            out.insert(0, RemoveMessage(id=state["messages"][0].id))
        return {"messages": out}

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def talk(graph: Any, thread: str, turns: int, start: int = 0, **state: Any) -> None:
    for turn in range(start, start + turns):
        user = HumanMessage(content=f"question {turn} {_text(turn)}", id=f"{thread}-u{turn}")
        graph.invoke({"messages": [user], **state}, cfg(thread), durability="sync")


def everything(saver: SwarmStateSaver) -> list[Any]:
    """Every checkpoint of every thread as a fresh saver (no cache) reads it."""
    fresh = SwarmStateSaver(saver.store)
    return [(t.config, t.checkpoint, t.metadata, t.pending_writes) for t in fresh.list(None)]


def thread_items(store: swarmstate.BaseStore, thread: str) -> list[tuple[str, str]]:
    """The stored chunks (and earlier-layout values and segments) of a thread."""
    pairs = []
    for ns in store.namespaces(keys.thread_prefix(thread)):
        if ns.endswith((keys.VALUES, keys.SEGMENTS, keys.CHUNKS)):
            pairs.extend((ns, key) for key in store.keys(ns))
    return pairs


def assert_every_item_is_needed(saver: SwarmStateSaver, thread: str) -> None:
    """Removing any one stored value or segment of ``thread`` breaks a read of its checkpoints.

    Checked without the saver's own bookkeeping: each item is deleted under a
    store snapshot, every checkpoint is read back by a fresh saver, and the
    snapshot is restored.
    """
    store = saver.store
    expected = everything(saver)
    items = thread_items(store, thread)
    assert items
    for ns, key in items:
        before = store.snapshot()
        store.delete(ns, key)
        try:
            broken = everything(saver) != expected
        except swarmstate.CorruptDataError:
            broken = True
        store.restore(before)
        assert broken, f"{key!r} in {ns!r} is referenced by no checkpoint"
    assert everything(saver) == expected


def test_a_growing_conversation_stores_each_message_about_once(make_store: MakeStore) -> None:
    ours = SwarmStateSaver(make_store())
    reference = InMemorySaver()
    for saver in (ours, reference):
        talk(chat_graph(saver), "grow", 40)
    stored = sum(
        len(value)
        for ns in ours.store.namespaces(keys.thread_prefix("grow"))
        for _, value in ours.store.items(ns, raw=True)
    )
    # The reference keeps every version of the list whole: 80 versions of up to
    # 80 messages. Sharing keeps each message a few times, not 40 on average.
    reference_blobs = sum(len(blob[1]) for blob in reference.blobs.values())
    assert stored < reference_blobs / 8


def test_prune_keeps_the_newest_and_leaves_no_unreferenced_item(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "p", 12)
    talk(graph, "keep", 3)
    latest = graph.get_state(cfg("p")).values
    untouched = [t.checkpoint for t in saver.list(cfg("keep"))]
    before = len(thread_items(saver.store, "p"))
    saver.prune(["p"], keep_last=2)
    assert len(list(saver.list(cfg("p")))) == 2
    assert graph.get_state(cfg("p")).values == latest
    assert len(thread_items(saver.store, "p")) < before
    assert_every_item_is_needed(saver, "p")
    assert [t.checkpoint for t in saver.list(cfg("keep"))] == untouched
    # The pruned thread goes on from its latest checkpoint.
    talk(graph, "p", 2, start=12)
    assert len(graph.get_state(cfg("p")).values["messages"]) == len(latest["messages"]) + 4


def test_delete_for_runs_frees_what_only_those_runs_referenced(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    for turn in range(6):
        user = HumanMessage(content=f"q {turn} {_text(turn)}", id=f"u{turn}")
        graph.invoke(
            {"messages": [user]},
            {"configurable": {"thread_id": "r"}, "metadata": {"run_id": f"run-{turn % 2}"}},
            durability="sync",
        )
    saver.delete_for_runs(["run-1"])
    assert {t.metadata["run_id"] for t in saver.list(cfg("r"))} == {"run-0"}
    assert_every_item_is_needed(saver, "r")


def test_delete_thread_leaves_nothing_of_it(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "gone", 6)
    talk(graph, "stays", 2)
    saver.delete_thread("gone")
    assert saver.store.namespaces(keys.thread_prefix("gone")) == []
    assert graph.get_state(cfg("stays")).values["messages"]


def test_a_copied_thread_survives_deleting_its_source(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "src", 8)
    history = [(s.values, s.next) for s in graph.get_state_history(cfg("src"))]
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    fresh = chat_graph(SwarmStateSaver(saver.store))
    assert [(s.values, s.next) for s in fresh.get_state_history(cfg("dst"))] == history
    talk(graph, "dst", 2, start=8)
    assert len(graph.get_state(cfg("dst")).values["messages"]) == 20


def test_removals_and_trims_read_back_exactly(make_store: MakeStore) -> None:
    ours = SwarmStateSaver(make_store())
    reference = InMemorySaver()
    for saver in (ours, reference):
        graph = chat_graph(saver)
        talk(graph, "trim", 6)
        talk(graph, "trim", 6, start=6, trim=True)
    ours_history = [
        (s.values, s.next)
        for s in chat_graph(SwarmStateSaver(ours.store)).get_state_history(cfg("trim"))
    ]
    reference_history = [
        (s.values, s.next) for s in chat_graph(reference).get_state_history(cfg("trim"))
    ]
    assert ours_history == reference_history


def test_concurrent_puts_into_one_thread_from_worker_threads(make_store: MakeStore) -> None:
    # Several branches of one thread written at once (forks of the same parent),
    # as workers of a runtime, or two runs, would: every branch reads back whole.
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "c", 4)
    root = graph.get_state(cfg("c")).config
    errors: list[BaseException] = []

    def branch(i: int) -> None:
        try:
            config = root
            for step in range(5):
                config = graph.update_state(
                    config,
                    {
                        "messages": [
                            AIMessage(content=f"b{i}s{step} {_text(i + step)}", id=f"b{i}-{step}")
                        ]
                    },
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=branch, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    fresh = SwarmStateSaver(saver.store)
    tips = [t for t in fresh.list(cfg("c")) if t.metadata.get("step", 0) >= 0]
    for i in range(4):
        ids = [f"b{i}-{s}" for s in range(5)]
        found = [
            t
            for t in tips
            if [m.id for m in t.checkpoint["channel_values"]["messages"][-5:]] == ids
        ]
        assert found, f"branch {i} lost its messages"
        assert len(found[0].checkpoint["channel_values"]["messages"]) == 8 + 5


class Steps(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def test_a_thread_in_the_earlier_layout_is_read_and_extended(make_store: MakeStore) -> None:
    # The layout before this one kept each checkpoint whole: [metadata, parent,
    # run, checkpoint with its channel values] in one serializer document.
    saver = SwarmStateSaver(make_store())
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"steps": ["old-1", "old-2"]}
    checkpoint["channel_versions"] = {"steps": saver.get_next_version(None)}
    metadata = {"source": "loop", "step": 0, "parents": {}}
    kind, data = saver.serde.dumps_typed([metadata, None, None, checkpoint])
    assert kind == "msgpack"
    assert data[0] == 0x94
    saver.store.set_many(
        [(keys.scope("old", ""), keys.checkpoint_key(checkpoint["id"]), bytes(data))], raw=True
    )
    builder = StateGraph(Steps)
    builder.add_node("a", lambda s: {"steps": ["new"]})
    builder.add_edge(START, "a")
    graph = builder.compile(checkpointer=saver)
    assert graph.get_state(cfg("old")).values == {"steps": ["old-1", "old-2"]}
    graph.invoke({"steps": ["input"]}, cfg("old"))
    fresh = builder.compile(checkpointer=SwarmStateSaver(saver.store))
    assert fresh.get_state(cfg("old")).values == {"steps": ["old-1", "old-2", "input", "new"]}
    assert len(list(fresh.get_state_history(cfg("old")))) == 4
    # The first checkpoint written on top of it stands alone: nothing it needs is old.
    saver.prune(["old"], keep_last=1)
    assert fresh.get_state(cfg("old")).values == {"steps": ["old-1", "old-2", "input", "new"]}


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    return functools.reduce(add_messages, writes, state)


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_fold, snapshot_frequency=4)]


def _delta_builder() -> Any:
    """One agent node over a DeltaChannel of messages."""

    def agent(state: DeltaChat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"a{n} {_text(n)}", id=f"a{n}")]}

    builder = StateGraph(DeltaChat)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder


def _direct_and_walked(saver: SwarmStateSaver, config: Any) -> tuple[Any, Any]:
    """The saver's direct chain read, and the contract's own get_tuple walk."""
    direct = saver.get_delta_channel_history(config=config, channels=["messages"])
    walked = BaseCheckpointSaver.get_delta_channel_history(
        saver, config=config, channels=["messages"]
    )
    return direct, walked


def test_delta_channel_history_matches_the_contracts_own_walk(make_store: MakeStore) -> None:
    builder = _delta_builder()
    ours = SwarmStateSaver(make_store())
    reference = InMemorySaver()
    for saver in (ours, reference):
        graph = builder.compile(checkpointer=saver)
        for turn in range(9):
            user = HumanMessage(content=f"u{turn}", id=f"u{turn}")
            graph.invoke({"messages": [user]}, cfg("d"), durability="sync")
        history = list(graph.get_state_history(cfg("d")))
        fork = graph.update_state(
            history[7].config, {"messages": [HumanMessage(content="f", id="f")]}
        )
        graph.invoke(None, fork, durability="sync")
    mine = [
        (s.values, s.next) for s in builder.compile(checkpointer=ours).get_state_history(cfg("d"))
    ]
    theirs = [
        (s.values, s.next)
        for s in builder.compile(checkpointer=reference).get_state_history(cfg("d"))
    ]
    assert mine == theirs
    # The direct read of the chain equals the contract's get_tuple walk, checkpoint by checkpoint.
    for found in ours.list(cfg("d")):
        direct, walked = _direct_and_walked(ours, found.config)
        assert direct == walked


def test_delta_channel_history_sees_what_changed_since_it_last_walked(
    make_store: MakeStore,
) -> None:
    ours = SwarmStateSaver(make_store())
    graph = _delta_builder().compile(checkpointer=ours)
    for turn in range(6):
        graph.invoke({"messages": [HumanMessage(content=f"u{turn}", id=f"u{turn}")]}, cfg("w"))

    def both(found: Any) -> tuple[Any, Any]:
        return _direct_and_walked(ours, found.config)

    tips = list(ours.list(cfg("w")))
    for found in tips:  # every ancestor's rows read (and remembered) once
        direct, walked = both(found)
        assert direct == walked
    # A write added later to an ancestor, by this saver or any other, is read.
    ancestor = tips[4]
    late = HumanMessage(content="late", id="late")
    SwarmStateSaver(ours.store).put_writes(ancestor.config, [("messages", [late])], "late-task")
    direct, walked = both(tips[0])
    assert direct == walked
    assert any(late in w[2] for w in direct["messages"]["writes"]), "the late write is read"
    # An ancestor put again under its id (here with no parent), through another
    # saver of the same store, cuts the chain there.
    again = ours.get_tuple(tips[2].config)
    assert again is not None
    root = {**again.config["configurable"]}
    root.pop("checkpoint_id")
    SwarmStateSaver(ours.store).put({"configurable": root}, again.checkpoint, again.metadata, {})
    direct, walked = both(tips[0])
    assert direct == walked
    assert not any(late in w[2] for w in direct["messages"]["writes"]), "older than the cut"
    # A copy replaces what the target held under the same keys: read as replaced.
    ours.copy_thread("w", "w2")
    copied = [t.config for t in ours.list(cfg("w2"))]
    for config in copied:  # walked (and remembered) once
        ours.get_delta_channel_history(config=config, channels=["messages"])
    ours.put({"configurable": {**root, "thread_id": "w"}}, tips[1].checkpoint, again.metadata, {})
    SwarmStateSaver(ours.store).copy_thread("w", "w2")
    for config in copied:
        direct, walked = _direct_and_walked(ours, config)
        assert direct == walked


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\x94",
        b"\x94\xdd\xff\xff\xff\xff",
        b"\xc1",
        b"\x94\x01\x02\x03\x04",
        b"\x95\x01\x02\x03\x04\x05",
    ],
)
def test_a_damaged_checkpoint_entry_raises_corrupt_data_naming_it(
    make_store: MakeStore, damage: bytes
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = chat_graph(saver)
    talk(graph, "bad", 2)
    latest = saver.get_tuple(cfg("bad"))
    assert latest is not None
    key = keys.checkpoint_key(latest.checkpoint["id"])
    # Damaged bytes in place: the row keeps its tags, as a damaged file's row would.
    tags = swarmstate.Tags(order=key[:-1])
    saver.store.write(
        swarmstate.Transaction(sets=[(keys.scope("bad", ""), key, damage, tags)], raw=True)
    )
    with pytest.raises(swarmstate.CorruptDataError, match=latest.checkpoint["id"]) as caught:
        SwarmStateSaver(saver.store).get_tuple(cfg("bad"))
    assert "'bad'" in str(caught.value)
    with pytest.raises(swarmstate.CorruptDataError):
        list(SwarmStateSaver(saver.store).list(None))


def test_a_missing_chunk_raises_corrupt_data_naming_the_channel(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    talk(chat_graph(saver), "seg", 6)
    latest = saver.store.items(keys.scope("seg", ""), reverse=True, limit=1, raw=True)[0][1]
    form = entry.decode(saver.serde, latest).forms["messages"]  # type: ignore[index]
    chunk = next(part[0] for part in form[3] if type(part) is list)
    saver.store.delete(keys.chunks("seg"), chunk)
    with pytest.raises(swarmstate.CorruptDataError, match="messages"):
        list(SwarmStateSaver(saver.store).list(cfg("seg")))


def _stored_entries(store: swarmstate.BaseStore, thread: str) -> list[bytes]:
    ns = keys.scope(thread, "")
    return [v for key, v in store.items(ns, raw=True) if key[-1] == keys.CHECKPOINT]


def _stored_writes(store: swarmstate.BaseStore, thread: str) -> list[tuple[str, list[Any]]]:
    ns = keys.scope(thread, "")
    return [
        (key, swarmstate.loads(v))
        for key, v in store.items(ns, raw=True)
        if key[-1] != keys.CHECKPOINT
    ]


def test_compressed_messages_read_back_exactly_and_any_saver_reads_them(
    make_store: MakeStore,
) -> None:
    ours = SwarmStateSaver(make_store(), compress=True)
    reference = InMemorySaver()
    for saver in (ours, reference):
        talk(chat_graph(saver), "zip", 5)
    forms = {len(write) for _, write in _stored_writes(ours.store, "zip")}
    assert forms == {6, 7}, "messages are packed, a small branch write is not"
    assert {layout[:1] for layout in _stored_entries(ours.store, "zip")} == {b"\x93"}, (
        "every checkpoint entry is stored deflated"
    )
    chunks = [swarmstate.loads(v) for _, v in ours.store.items(keys.chunks("zip"), raw=True)]
    assert any(type(c) is list for c in chunks), "a chunk of messages is packed"
    # A saver that does not compress extends the thread: its rows and the
    # packed ones read back together, by either kind of saver.
    plain = SwarmStateSaver(ours.store, compress=False)
    for saver in (plain, reference):
        talk(chat_graph(saver), "zip", 2, start=5)

    def writes(saver: Any) -> list[list[tuple[str, Any]]]:  # task ids are random per run
        return [[w[1:] for w in t.pending_writes or []] for t in saver.list(cfg("zip"))]

    def values(saver: Any) -> list[Any]:
        return [t.checkpoint["channel_values"] for t in saver.list(cfg("zip"))]

    assert {layout[:1] for layout in _stored_entries(ours.store, "zip")} == {b"\x93", b"\x95"}

    def loop_steps(saver: Any) -> list[Any]:  # a metadata filter reads each entry's head
        return [t.metadata["step"] for t in saver.list(cfg("zip"), filter={"source": "loop"})]

    for compress in (False, True):
        fresh = SwarmStateSaver(ours.store, compress=compress)
        assert writes(fresh) == writes(reference)
        assert values(fresh) == values(reference)
        assert loop_steps(fresh) == loop_steps(reference)
    assert sum(map(len, writes(reference))) >= 8
    # A copy re-tags each entry's metadata and keeps it stored as it was.
    ours.copy_thread("zip", "zip-copy")
    layouts = sorted(stored_entry[:1] for stored_entry in _stored_entries(ours.store, "zip"))
    assert (
        sorted(stored_entry[:1] for stored_entry in _stored_entries(ours.store, "zip-copy"))
        == layouts
    )
    copies = list(SwarmStateSaver(ours.store).list(cfg("zip-copy")))
    assert [t.checkpoint["channel_values"] for t in copies] == values(reference)


def test_compression_is_on_by_default_only_where_it_pays(make_store: MakeStore) -> None:
    store = make_store()
    expected = type(store).__name__ == "PostgresStore"
    assert SwarmStateSaver(store).compress is expected
    with pytest.raises(swarmstate.InvalidArgumentError, match="compress"):
        SwarmStateSaver(store, compress="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", ["truncate", "size", "huge size"])
def test_a_damaged_compressed_write_raises_corrupt_data(make_store: MakeStore, damage: str) -> None:
    saver = SwarmStateSaver(make_store(), compress=True)
    talk(chat_graph(saver), "zbad", 2)
    key, write = next((k, w) for k, w in _stored_writes(saver.store, "zbad") if len(w) == 7)
    if damage == "truncate":
        write[5] = write[5][:-4]
    elif damage == "size":
        write[6] += 1
    else:
        write[6] = 2**64 - 1
    saver.store.set(keys.scope("zbad", ""), key, write)
    with pytest.raises(swarmstate.CorruptDataError, match="inflate"):
        list(SwarmStateSaver(saver.store).list(cfg("zbad")))


@pytest.mark.parametrize("damage", ["truncate", "size", "nested"])
def test_a_damaged_compressed_entry_raises_corrupt_data(make_store: MakeStore, damage: str) -> None:
    saver = SwarmStateSaver(make_store(), compress=True)
    talk(chat_graph(saver), "zent", 2)
    ns = keys.scope("zent", "")
    key, stored = next(
        (k, v) for k, v in saver.store.items(ns, raw=True, reverse=True) if k[-1] == keys.CHECKPOINT
    )
    envelope = swarmstate.loads(stored)
    assert stored[:1] == b"\x93"
    assert envelope[0] == 1
    if damage == "truncate":
        envelope[1] = envelope[1][:-4]
    elif damage == "size":
        envelope[2] += 1
    else:  # a compressed entry inside a compressed entry is no layout
        envelope = [1, zlib.compress(stored), len(stored)]
    saver.store.set(ns, key, envelope)
    with pytest.raises(swarmstate.CorruptDataError, match="inflate"):
        SwarmStateSaver(saver.store).get_tuple(cfg("zent"))


def _previous_layout_graph(saver: Any) -> Any:
    """The graph that wrote ``data/previous-layout.sqlite`` (swarmstate 0.1.0's layout)."""
    from langgraph.types import interrupt

    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        content = f"answer {n} " + "lorem ipsum dolor " * 20
        return {"messages": [AIMessage(content=content, id=f"ai-{n}")]}

    def ask(state: Chat) -> dict[str, Any]:
        reply = interrupt("continue?")
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"resumed with {reply}", id=f"resume-{n}")]}

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_node("ask", ask)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def test_a_file_written_by_the_previous_layout_is_read_and_extended(
    make_store: MakeStore, tmp_path: Any
) -> None:
    import shutil
    from pathlib import Path

    from langgraph.types import Command

    from swarmstate.backends.disk import DiskStore

    # Written by swarmstate 0.1.0 (one entry per whole checkpoint): three turns,
    # the last one stopped at an interrupt.
    source = Path(__file__).parent / "data" / "previous-layout.sqlite"
    path = tmp_path / "old.db"
    shutil.copyfile(source, path)
    path.chmod(0o600)
    with DiskStore(path) as old:
        before = [
            (s.values, s.next)
            for s in _previous_layout_graph(SwarmStateSaver(old)).get_state_history(cfg("chat"))
        ]
        assert before[0][1] == ("ask",)
        assert len(before[0][0]["messages"]) == 8
        # On every backend: moved there as stored bytes, then resumed and extended.
        store = make_store()
        swarmstate.transfer(old, store)
    saver = SwarmStateSaver(store)
    graph = _previous_layout_graph(saver)
    assert [(s.values, s.next) for s in graph.get_state_history(cfg("chat"))] == before
    resumed = graph.invoke(Command(resume="after the upgrade"), cfg("chat"), durability="sync")
    assert resumed["messages"][-1].content == "resumed with after the upgrade"
    graph.invoke(
        {"messages": [HumanMessage(content="a new turn", id="u-new")]},
        cfg("chat"),
        durability="sync",
    )
    graph.invoke(Command(resume="again"), cfg("chat"), durability="sync")
    fresh = _previous_layout_graph(SwarmStateSaver(saver.store))
    history = [(s.values, s.next) for s in fresh.get_state_history(cfg("chat"))]
    assert history[-len(before) :] == before  # the old checkpoints read as they were
    assert len(history[0][0]["messages"]) == 12
    assert [m.id for m in history[0][0]["messages"][-4:]] == [
        "resume-8",
        "u-new",
        "ai-10",
        "resume-11",
    ]


@pytest.mark.parametrize("version", [True, (1, 2), None])
def test_a_channel_version_of_another_type_is_refused_and_nothing_is_stored(
    make_store: MakeStore, version: Any
) -> None:
    saver = SwarmStateSaver(make_store())
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"small": 1, "big": _text(4096)}
    checkpoint["channel_versions"] = {"small": version, "big": 1}
    with pytest.raises(swarmstate.InvalidArgumentError, match="channel 'small' has version"):
        # "big" first: its entries are built before the bad version is met.
        saver.put(cfg("t"), checkpoint, {"source": "loop", "step": 1}, {"big": 1, "small": version})
    assert saver.store.namespaces() == []


def test_a_none_value_is_stored_as_the_serializer_writes_it() -> None:
    """LangGraph's serializer writes None as ("null", b""): stored so without a call.

    Any other serializer is asked, every time, and what it wrote comes back.
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    plain = SwarmStateSaver(swarmstate.Store())
    assert plain._values.plain_none is plain.serde
    assert plain.serde.dumps_typed(None) == ("null", b"")

    class Counting(JsonPlusSerializer):
        calls = 0

        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            if obj is None:
                Counting.calls += 1
                return "null", b""
            return super().dumps_typed(obj)

    counted = SwarmStateSaver(swarmstate.Store(), serde=Counting())
    assert counted._values.plain_none is None
    for saver in (plain, counted):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"flag": None, "n": 1}
        checkpoint["channel_versions"] = {"flag": 1, "n": 1}
        config = saver.put(cfg("t"), checkpoint, {"step": 0}, {"flag": 1, "n": 1})
        got = saver.get_tuple(config)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"flag": None, "n": 1}
    assert Counting.calls == 1


class _Notes(TypedDict):
    brief: str
    scratch: str
    turn: int


def _notes_graph(saver: Any, brief: str) -> Any:
    """A brief set by the first input and never changed, and a scratchpad every node rewrites."""

    def node(name: str) -> Callable[[_Notes], dict[str, Any]]:
        def write(state: _Notes) -> dict[str, Any]:
            turn = state["turn"]
            return {"scratch": f"{name} {turn} " + _text(turn * 7 + len(name)) + _text(turn)}

        return write

    builder = StateGraph(_Notes)
    for name in ("plan", "act", "check"):
        builder.add_node(name, node(name))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "check")
    builder.add_edge("check", END)
    return builder.compile(checkpointer=saver)


def _run_notes(saver: Any, brief: str, turns: int) -> Any:
    graph = _notes_graph(saver, brief)
    for turn in range(turns):
        state: dict[str, Any] = {"turn": turn}
        if turn == 0:
            state["brief"] = brief
        graph.invoke(state, cfg("notes"))
    return graph


def test_a_text_under_the_sharing_size_is_stored_in_its_record_and_never_compared(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    reference = InMemorySaver()
    graphs = [_run_notes(s, "b", 8) for s in (saver, reference)]
    scratch = graphs[0].get_state(cfg("notes")).values["scratch"]
    assert 500 < len(scratch.encode()) < values.SHARE_AT
    # Rewritten by every node (24 versions): each rides inside its checkpoint's
    # record; only a version carried unchanged into the next turn's input
    # checkpoint becomes a chunk, once a turn.
    assert len(saver.store.keys(keys.chunks("notes"))) <= 8
    for ours, theirs in zip(
        graphs[0].get_state_history(cfg("notes")),
        graphs[1].get_state_history(cfg("notes")),
        strict=True,
    ):
        assert ours.values == theirs.values
    fresh = _notes_graph(SwarmStateSaver(saver.store), "b")
    assert fresh.get_state(cfg("notes")).values == graphs[1].get_state(cfg("notes")).values


def test_a_text_carried_unchanged_is_stored_once_not_copied_into_every_record(
    make_store: MakeStore,
) -> None:
    # Uncompressed, so the stored bytes can be searched for the text.
    saver = SwarmStateSaver(make_store(), compress=False)
    brief = "brief: " + " ".join(f"fact{i:05d}" for i in range(600))
    assert values.INLINE_MAX < len(brief) < values.SHARE_AT
    graph = _run_notes(saver, brief, 10)
    marker = brief.encode()[-200:]
    holding = [
        (ns, key)
        for ns in saver.store.namespaces(keys.thread_prefix("notes"))
        for key, data in saver.store.items(ns, raw=True)
        if marker in data
    ]
    # The input's record and its pending write, the record of the step that
    # set it, and the chunk every later record names: never once per
    # checkpoint (there are 50).
    assert len(holding) <= 4, holding
    assert len(list(saver.list(cfg("notes")))) == 50
    for snapshot in graph.get_state_history(cfg("notes")):
        if snapshot.values:
            assert snapshot.values["brief"] == brief
    fresh = SwarmStateSaver(saver.store)
    assert all(
        t.checkpoint["channel_values"].get("brief") == brief
        for t in fresh.list(cfg("notes"))
        if t.metadata and t.metadata.get("step", -1) >= 0
    )


class _Plan(TypedDict):
    plan: list[dict[str, Any]]
    turn: int


def test_a_list_whose_versions_share_nothing_is_compared_then_stored_whole_for_a_while(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[int] = []
    share = sharing.share

    def counted(data: bytes, base: Any) -> Any:
        compared.append(len(data))
        return share(data, base)

    monkeypatch.setattr(sharing, "share", counted)

    def regenerate(name: str) -> Callable[[_Plan], dict[str, Any]]:
        def node(state: _Plan) -> dict[str, Any]:
            turn = state["turn"]
            return {
                "plan": [{"step": f"{name}-{turn}-{i}", "why": _text(turn + i)} for i in range(6)]
            }

        return node

    def build(saver: Any) -> Any:
        builder = StateGraph(_Plan)
        for name in ("draft", "revise"):
            builder.add_node(name, regenerate(name))
        builder.add_edge(START, "draft")
        builder.add_edge("draft", "revise")
        builder.add_edge("revise", END)
        return builder.compile(checkpointer=saver)

    saver = SwarmStateSaver(make_store())
    graphs = [build(s) for s in (saver, InMemorySaver())]
    for graph in graphs:
        for turn in range(12):
            graph.invoke({"turn": turn}, cfg("plan"))
    plan = graphs[0].get_state(cfg("plan")).values["plan"]
    assert values.INLINE_MAX < len(swarmstate.dumps(plan)) < values.SHARE_AT
    # 24 versions, none sharing with the one before: after a comparison finds
    # that, the next versions ride inside their records, never compared.
    assert 0 < len(compared) <= 8
    for ours, theirs in zip(
        graphs[0].get_state_history(cfg("plan")),
        graphs[1].get_state_history(cfg("plan")),
        strict=True,
    ):
        assert ours.values == theirs.values
    fresh = build(SwarmStateSaver(saver.store))
    assert fresh.get_state(cfg("plan")).values == graphs[1].get_state(cfg("plan")).values

"""A put writes one row (its checkpoint, carrying its tags), plus the chunks of large values.

Counted on every store, namespace by namespace, before and after; and the
limits of what a tag holds (a checkpoint id too long is refused before
anything is written, a run id of any length still finds its checkpoints).
"""

from __future__ import annotations

import operator
import random
import string
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys
from tests.support.checkpoints import put_value, store_calls

MakeStore = Callable[[], swarmstate.BaseStore]


def _counts(store: swarmstate.BaseStore) -> dict[str, int]:
    return {namespace: store.count(namespace) for namespace in store.namespaces()}


def _put(saver: SwarmStateSaver, thread_id: str, value: Any, **given: Any) -> str:
    # The channel "x", in run "r1" unless told otherwise.
    return put_value(saver, thread_id, value, **{"run_id": "r1", **given})


def _changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        ns: after.get(ns, 0) - before.get(ns, 0)
        for ns in before.keys() | after.keys()
        if after.get(ns, 0) != before.get(ns, 0)
    }


def test_a_put_writes_exactly_its_checkpoint_row_on_every_store(make_store: MakeStore) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    before = _counts(saver.store)
    first = _put(saver, "t", {"a": 1})  # a new thread, a new run
    assert _changed(before, _counts(saver.store)) == {keys.scope("t", ""): 1}
    before = _counts(saver.store)
    second = _put(saver, "t", {"a": 2}, parent=first, run_id="r2")  # the next run
    assert _changed(before, _counts(saver.store)) == {keys.scope("t", ""): 1}
    before = _counts(saver.store)
    _put(saver, "u", {"a": 3}, run_id=None)  # another thread, no run
    assert _changed(before, _counts(saver.store)) == {keys.scope("u", ""): 1}
    # What the rows beside it said is on its own row.
    assert [(v, ns, key) for v, ns, key in saver.store.tagged("group")] == [
        (keys.field("r1"), keys.scope("t", ""), keys.checkpoint_key(first)),
        (keys.field("r2"), keys.scope("t", ""), keys.checkpoint_key(second)),
    ]
    assert len(saver.store.tagged("order")) == 3


def test_a_put_of_a_large_value_writes_its_checkpoint_row_and_chunks_only(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    rnd = random.Random(7)
    text = "".join(rnd.choices(string.ascii_letters + " ", k=200_000))
    before = _counts(saver.store)
    _put(saver, "big", text)
    changed = _changed(before, _counts(saver.store))
    assert changed.pop(keys.scope("big", "")) == 1
    assert set(changed) == {keys.chunks("big")}
    assert (
        saver.get_tuple({"configurable": {"thread_id": "big"}}).checkpoint[  # type: ignore[union-attr]
            "channel_values"
        ]["x"]
        == text
    )


def test_the_first_put_on_a_new_store_also_marks_it_in_the_same_write() -> None:
    store = swarmstate.Store()
    writes: list[Any] = []
    real = store.write

    def counted(transaction: Any) -> Any:
        writes.append(transaction)
        return real(transaction)

    store.write = counted  # type: ignore[method-assign]
    saver = SwarmStateSaver(store)
    _put(saver, "t", 1)
    assert len(writes) == 1
    assert sorted(ns for ns in store.namespaces()) == [keys.META, keys.scope("t", "")]


def test_a_checkpoint_id_too_long_for_its_order_tag_is_refused_before_anything_is_written(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    before = _counts(saver.store)
    with pytest.raises(swarmstate.InvalidArgumentError, match="512"):
        _put(saver, "t", 1, checkpoint_id="x" * 600)
    assert _counts(saver.store) == before
    _put(saver, "t", 1, checkpoint_id="x" * 500)  # under the limit: stored and listed
    assert [t.checkpoint["id"] for t in saver.list(None)] == ["x" * 500]


@pytest.mark.parametrize("run_id", ["r" * 256, "r" * 257, "é" * 200])
def test_a_run_id_of_any_length_finds_its_checkpoints(make_store: MakeStore, run_id: str) -> None:
    saver = SwarmStateSaver(make_store())
    first = _put(saver, "t", 1, run_id="kept")
    _put(saver, "t", 2, parent=first, run_id=run_id)
    _put(saver, "u", 3, run_id=run_id + "x")  # a run whose id starts with the other's
    saver.delete_for_runs([run_id])
    assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t"}})] == [first]
    assert len(list(saver.list({"configurable": {"thread_id": "u"}}))) == 1


class Steps(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _with_subgraph(saver: Any) -> Any:
    inner = StateGraph(Steps)
    inner.add_node("deep", lambda s: {"log": ["deep"]})
    inner.add_edge(START, "deep")
    inner.add_edge("deep", END)
    builder = StateGraph(Steps)
    builder.add_node("one", lambda s: {"log": ["one"]})
    builder.add_node("sub", inner.compile())
    builder.add_edge(START, "one")
    builder.add_edge("one", "sub")
    builder.add_edge("sub", END)
    return builder.compile(checkpointer=saver)


def test_list_of_every_thread_holds_what_in_memory_saver_holds_newest_first(
    make_store: MakeStore,
) -> None:
    ours, peer = SwarmStateSaver(make_store()), InMemorySaver()
    graphs = [_with_subgraph(ours), _with_subgraph(peer)]
    for turn in range(3):
        for thread in ("a", "b", "c"):
            config = {
                "configurable": {"thread_id": thread},
                "metadata": {"run_id": f"{thread}-{turn}"},
            }
            for graph in graphs:
                graph.invoke({"log": []}, config, durability="sync")

    def seen(saver: Any, **options: Any) -> list[tuple[Any, ...]]:
        return [
            (
                t.config["configurable"]["thread_id"],
                t.config["configurable"]["checkpoint_ns"].split(":")[0],
                t.metadata["step"],
                t.metadata["source"],
                t.metadata.get("run_id"),
            )
            for t in saver.list(None, **options)
        ]

    assert sorted(seen(ours)) == sorted(seen(peer))
    assert sorted(seen(ours, filter={"source": "loop"})) == sorted(
        seen(peer, filter={"source": "loop"})
    )
    ids = [t.checkpoint["id"] for t in ours.list(None)]
    assert ids == sorted(ids, reverse=True)
    assert [t.checkpoint["id"] for t in ours.list(None, limit=4)] == ids[:4]
    before = {"configurable": {"checkpoint_id": ids[5]}}
    assert [t.checkpoint["id"] for t in ours.list(None, before=before)] == ids[6:]
    # A run rolled back: what is left is what the peer holds without that run.
    ours.delete_for_runs(["b-1"])
    assert sorted(seen(ours)) == sorted(row for row in seen(peer) if row[4] != "b-1")


def test_delete_thread_of_a_thread_never_claimed_is_one_write_that_reads_nothing_first(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    parent = _put(saver, "t", {"a": 1})
    _put(saver, "t", {"a": 2}, parent=parent)
    _put(saver, "u", {"a": 3})
    calls = store_calls(saver.store, monkeypatch)
    saver.delete_thread("t")
    assert calls == ["write"]  # the tombstone and the thread's entries, together
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert saver.get_tuple({"configurable": {"thread_id": "u"}}) is not None


def test_delete_thread_of_a_claimed_thread_reads_its_guard_and_keeps_its_tokens(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    _put(saver, "t", {"a": 1})
    assert saver.claim("t", ttl=60) == 1
    calls = store_calls(saver.store, monkeypatch)
    saver.delete_thread("t")
    # The first attempt assumed no guard and was refused whole; the guard was read.
    assert calls == ["write", "items", "write"]
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    saver.delete_thread("t")  # deleted again: its tombstone is found the same way
    assert saver.claim("t", ttl=60) == 2  # the counter outlived both deletions


def test_a_listing_keeps_no_head_and_a_put_on_a_listed_checkpoint_still_builds_on_it(
    make_store: MakeStore,
) -> None:
    store = make_store()
    writer = SwarmStateSaver(store)
    items = [f"item {i} " + "x" * 200 for i in range(8)]
    first = _put(writer, "t", items)
    second = _put(writer, "t", [*items, "more " * 40], parent=first)
    reader = SwarmStateSaver(store)  # a new process: nothing cached
    listed = list(reader.list({"configurable": {"thread_id": "t"}}))
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [second, first]
    assert reader._values.heads == {}  # listing many checkpoints evicts no head a put needs
    # A put on a checkpoint only listed reads its head from the store.
    fork = _put(reader, "t", [*items, "fork"], parent=first)
    got = reader.get_tuple(
        {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": fork}}
    )
    assert got is not None
    assert got.checkpoint["channel_values"] == {"x": [*items, "fork"]}
    assert got.parent_config is not None
    assert got.parent_config["configurable"]["checkpoint_id"] == first
    assert len(reader._values.heads) == 2  # the fork's parent, read for the put, and the fork

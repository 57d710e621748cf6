"""copy_thread and delete_for_runs as the Agent Server's built-in checkpointer does them.

The Agent Server (``langgraph dev``, langgraph-api) puts the thread id into
every checkpoint's metadata, copies a thread with ``acopy_thread`` and rolls
a run back with ``adelete_for_runs``. Its own checkpointer's copy names the
copy in ``metadata["thread_id"]``, and rolling back a run of the source
leaves the copy alone; so must ours, on every backend. End to end through
the server itself: ``tests/agent_server/``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import entry, keys

MakeStore = Callable[[], swarmstate.BaseStore]


class ServerLikeSaver(SwarmStateSaver):
    """Adds the thread id to each checkpoint's metadata, as the Agent Server's adapter does."""

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        thread_id = config["configurable"]["thread_id"]
        return super().put(config, checkpoint, {**metadata, "thread_id": thread_id}, new_versions)


class Steps(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def _ask(state: Steps) -> dict[str, Any]:
    return {"steps": [f"asked:{interrupt('proceed?')}"]}


def _graph(saver: SwarmStateSaver) -> Any:
    """START -> a -> sub (a subgraph that interrupts) -> b."""
    inner = StateGraph(Steps)
    inner.add_node("ask", _ask)
    inner.add_edge(START, "ask")
    builder = StateGraph(Steps)
    builder.add_node("a", lambda s: {"steps": ["a"]})
    builder.add_node("sub", inner.compile())
    builder.add_node("b", lambda s: {"steps": ["b"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "sub")
    builder.add_edge("sub", "b")
    return builder.compile(checkpointer=saver)


def run(thread_id: str, run_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}, "metadata": {"run_id": run_id}}


def cfg(thread_id: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, **extra}}


def _by_id(saver: SwarmStateSaver, thread_id: str) -> dict[str, Any]:
    return {t.checkpoint["id"]: t for t in saver.list(cfg(thread_id))}


def test_a_copy_names_itself_in_its_checkpoints_metadata(make_store: MakeStore) -> None:
    saver = ServerLikeSaver(make_store())
    graph = _graph(saver)
    graph.invoke({"steps": []}, run("src", "r1"))  # paused inside the subgraph
    source = _by_id(saver, "src")
    assert {t.config["configurable"]["checkpoint_ns"] for t in source.values()} > {""}
    assert {t.metadata["thread_id"] for t in source.values()} == {"src"}

    saver.copy_thread("src", "dst")

    copied = _by_id(saver, "dst")
    assert copied.keys() == source.keys()
    for checkpoint_id, original in source.items():
        copy = copied[checkpoint_id]
        assert copy.metadata == {**original.metadata, "thread_id": "dst"}
        assert copy.checkpoint == original.checkpoint
        assert copy.pending_writes == original.pending_writes
        assert (
            copy.config["configurable"]["checkpoint_ns"]
            == (original.config["configurable"]["checkpoint_ns"])
        )
    # A history filter on the copy's id finds every copied checkpoint; the source's, none.
    assert len(list(saver.list(cfg("dst"), filter={"thread_id": "dst"}))) == len(source)
    assert list(saver.list(cfg("dst"), filter={"thread_id": "src"})) == []
    assert {t.metadata["thread_id"] for t in saver.list(cfg("src"))} == {"src"}
    # The entries keep the saver's own layout; a fresh saver reads and resumes the copy.
    for key, data in saver.store.items(keys.scope("dst", ""), raw=True):
        if key.endswith(keys.CHECKPOINT):
            assert entry.inflated(data)[0] == 0x95
    fresh = _graph(ServerLikeSaver(saver.store))
    resumed = fresh.invoke(Command(resume="yes"), cfg("dst"))
    assert "asked:yes" in resumed["steps"]
    assert graph.get_state(cfg("src")).next == ("sub",)
    assert graph.invoke(Command(resume="yes"), cfg("src")) == resumed


def test_deleting_a_runs_checkpoints_leaves_the_copies_of_them_alone(
    make_store: MakeStore,
) -> None:
    saver = ServerLikeSaver(make_store())
    graph = _graph(saver)
    graph.invoke({"steps": []}, run("src", "r1"))
    saver.copy_thread("src", "dst")  # copied while run r1 waits on its interrupt
    copied = _by_id(saver, "dst")

    saver.delete_for_runs(["r1"])  # what the Agent Server's rollback of r1 calls

    assert list(saver.list(cfg("src"))) == []
    assert _by_id(saver, "dst").keys() == copied.keys()
    # The copy's own runs are indexed as usual, and only the copy has them.
    graph.invoke(Command(resume="yes"), run("dst", "r2"))
    graph.invoke({"steps": []}, run("src", "r3"))
    saver.delete_for_runs(["r2"])
    assert _by_id(saver, "dst").keys() == copied.keys()
    assert {t.metadata["run_id"] for t in saver.list(cfg("src"))} == {"r3"}
    # The copy's checkpoints carry no run's tag of the source; the source's carry r3's.
    grouped = {(value, keys.parse_scope(ns)[0]) for value, ns, _ in saver.store.tagged("group")}  # type: ignore[index]
    assert grouped == {(keys.field("r3"), "src")}
    saver.delete_thread("src")
    saver.delete_thread("dst")
    assert saver.store.tagged("group") == []
    assert saver.store.tagged("order") == []


@dataclasses.dataclass
class Ticket:
    title: str


class _OtherFormat(JsonPlusSerializer):
    """Writes LangGraph's msgpack under another type name, as an encrypting serializer would."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        return "other+" + kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        return super().loads_typed((kind.removeprefix("other+"), payload))


def _earlier_layouts(saver: SwarmStateSaver) -> dict[str, bytes]:
    """One checkpoint in each layout the saver reads; the two whole ones hold a value it blocks."""
    serde = saver.serde
    entries = {}
    for name in ("0x94", "0x95", "0x96", "0x97"):
        checkpoint = empty_checkpoint()
        checkpoint["channel_versions"] = {"ticket": saver.get_next_version(None, None)}
        metadata = {"source": "update", "step": 1, "parents": {}, "thread_id": "old"}
        if name in ("0x94", "0x96"):  # values inside the checkpoint
            checkpoint["channel_values"] = {"ticket": Ticket("kept as written")}
        else:
            del checkpoint["channel_values"]
        if name == "0x94":
            data = serde.dumps_typed([metadata, None, "r0", checkpoint])[1]
        elif name == "0x96":
            data = swarmstate.dumps(
                [*serde.dumps_typed(checkpoint), *serde.dumps_typed(metadata), None, "r0"]
            )
        else:
            encoded = entry.encode(
                serde, checkpoint, metadata, None, "r0", {}, typed=name == "0x97"
            )
            assert encoded is not None
            data = encoded
        assert data[0] == int(name, 16)
        entries[checkpoint["id"]] = bytes(data)
    return entries


@pytest.mark.parametrize("later_serde", [None, _OtherFormat()], ids=["same", "other-format"])
def test_a_copy_rewrites_only_the_metadata_of_every_layout(
    make_store: MakeStore, later_serde: Any
) -> None:
    writer = SwarmStateSaver(make_store())
    entries = _earlier_layouts(writer)
    writer.store.set_many(
        [(keys.scope("old", ""), keys.checkpoint_key(i), data) for i, data in entries.items()],
        raw=True,
    )
    saver = SwarmStateSaver(writer.store, serde=later_serde)
    saver.copy_thread("old", "new")
    for checkpoint_id, original in entries.items():
        pair = (keys.scope("new", ""), keys.checkpoint_key(checkpoint_id))
        data = saver.store.get_many([pair], raw=True)[0]
        metadata = entry.head(writer.serde, original)[0]
        assert entry.head(saver.serde, data)[0] == {**metadata, "thread_id": "new"}
        # Nothing but the metadata changed: the checkpoint, with a value the
        # serializer would block (never decoded here), keeps its bytes.
        if later_serde is None or original[0] in (0x96, 0x97):
            assert data[0] == original[0]
            assert entry.with_metadata(writer.serde, data, metadata) == original
        else:  # metadata the serializer writes in another format: typed pairs
            assert data[0] == original[0] + 2
            assert swarmstate.loads(data)[1] in original  # the checkpoint's msgpack, as it was

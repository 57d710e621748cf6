"""copy_thread is one store transaction: one ``write``, and a copy that fails writes nothing.

The store is a real one of each backend; its write methods are wrapped on the
instance to count the calls (and, for the races, to let another writer land
just before the copy's write), and every call goes on to the store itself.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys

MakeStore = Callable[[], swarmstate.BaseStore]

WRITES = ("write", "set", "set_many", "delete", "delete_many", "delete_prefix", "copy_prefix")
"""Every method of the store contract that writes."""


class Spied:
    """The write methods of one real store, counted; ``before`` runs once, just before the
    next ``write`` (itself writing through the store, uncounted)."""

    def __init__(self, store: swarmstate.BaseStore) -> None:
        self.store = store
        self.calls: list[str] = []
        self.conflicts = 0
        self.before: Callable[[], None] | None = None
        self.at_conflict: list[dict[str, list[tuple[str, Any]]]] = []
        self._inside = False
        for name in WRITES:
            setattr(store, name, self._spy(name, getattr(store, name)))

    def _spy(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            if self._inside:
                return real(*args, **kwargs)
            before, self.before = (self.before, None) if name == "write" else (None, self.before)
            if before is not None:
                self._inside = True
                try:
                    before()
                finally:
                    self._inside = False
            self.calls.append(name)
            try:
                return real(*args, **kwargs)
            except swarmstate.ConflictError:
                self.conflicts += 1
                self.at_conflict.append(contents(self.store, "dst"))
                raise

        return spy


class NamingSaver(SwarmStateSaver):
    """Names the thread in each checkpoint's metadata, as the Agent Server does."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        thread_id = config["configurable"]["thread_id"]
        return super().put(config, checkpoint, {**metadata, "thread_id": thread_id}, new_versions)


class Chat(TypedDict, total=False):
    turns: Annotated[list[str], operator.add]
    note: str


def graph(saver: SwarmStateSaver) -> Any:
    """START -> ask -> answer, each adding a turn of 3 kB (so the list is stored as chunks)."""
    builder = StateGraph(Chat)
    builder.add_node("ask", lambda s: {"turns": ["q" * 3000], "note": "asked"})
    builder.add_node("answer", lambda s: {"turns": ["a" * 3000]})
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "answer")
    return builder.compile(checkpointer=saver)


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def contents(store: swarmstate.BaseStore, thread_id: str) -> dict[str, list[tuple[str, Any]]]:
    """Every entry of a thread's namespaces, as stored."""
    return {
        namespace: store.items(namespace, raw=True)
        for namespace in store.namespaces(keys.thread_prefix(thread_id))
    }


def ids(saver: SwarmStateSaver, thread_id: str) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list(cfg(thread_id))]


def filled(make_store: MakeStore) -> tuple[SwarmStateSaver, Spied]:
    """A saver whose thread ``src`` has 4 turns (checkpoints, writes, chunks), its store spied."""
    saver = NamingSaver(make_store())
    chat = graph(saver)
    for turn in range(4):
        config = {**cfg("src"), "metadata": {"run_id": f"r{turn}"}}
        chat.invoke({"turns": [f"hello {turn}"]}, config)
    assert keys.chunks("src") in saver.store.namespaces(keys.thread_prefix("src"))
    return saver, Spied(saver.store)


def test_copy_thread_is_one_write(make_store: MakeStore) -> None:
    saver, spied = filled(make_store)
    source = ids(saver, "src")

    saver.copy_thread("src", "dst")

    assert spied.calls == ["write"]  # main: copy_prefix, then the checkpoints set again
    assert ids(saver, "dst") == source
    assert {t.metadata["thread_id"] for t in saver.list(cfg("dst"))} == {"dst"}
    assert graph(saver).get_state(cfg("dst")).values == graph(saver).get_state(cfg("src")).values
    # The copy's checkpoints are listed across threads by their order tag, and carry no run's.
    ordered = [(value, keys.parse_scope(ns)) for value, ns, _ in saver.store.tagged("order")]
    assert sorted(scope[0] for _, scope in ordered if scope) == sorted(["src", "dst"] * len(source))
    grouped = {keys.parse_scope(ns)[0] for _, ns, _ in saver.store.tagged("group")}  # type: ignore[index]
    assert grouped == {"src"}
    # Nothing to copy: nothing written.
    spied.calls.clear()
    saver.copy_thread("nothing", "dst2")
    saver.copy_thread("src", "src")
    assert spied.calls == []


def test_a_copy_that_meets_a_damaged_checkpoint_leaves_the_target_as_it_was(
    make_store: MakeStore,
) -> None:
    saver, spied = filled(make_store)
    graph(saver).invoke({"turns": ["mine"]}, cfg("dst"))  # the target holds a thread of its own
    namespace = keys.scope("src", "")
    newest = [key for key in saver.store.keys(namespace) if key[-1] == keys.CHECKPOINT][-1]
    saver.store.set_many([(namespace, newest, b"\x94\xc1")], raw=True)
    target = contents(saver.store, "dst")
    orders = saver.store.tagged("order")
    spied.calls.clear()

    with pytest.raises(swarmstate.CorruptDataError):
        saver.copy_thread("src", "dst")

    assert contents(saver.store, "dst") == target  # main: the entries before it were copied
    assert saver.store.tagged("order") == orders
    assert spied.calls == []


def _new_checkpoint(saver: SwarmStateSaver) -> Callable[[], None]:
    def put() -> None:
        latest = saver.get_tuple(cfg("src"))
        assert latest is not None
        checkpoint = {**empty_checkpoint(), "channel_values": {"note": "late"}}
        checkpoint["channel_versions"] = {"note": "late-1"}
        saver.put(latest.config, checkpoint, {"source": "update", "step": 99}, {"note": "late-1"})

    return put


def _late_write(saver: SwarmStateSaver) -> Callable[[], None]:
    tasks = itertools.count()

    def write() -> None:  # a pending write of the oldest checkpoint: a key between others
        oldest = list(saver.list(cfg("src")))[-1]
        saver.put_writes(oldest.config, [("note", "late")], f"late-{next(tasks)}")

    return write


def _deletion(saver: SwarmStateSaver) -> Callable[[], None]:
    return lambda: saver.delete_for_runs(["r3"])


@pytest.mark.parametrize("change", [_new_checkpoint, _late_write, _deletion])
def test_a_source_changed_during_the_copy_is_read_again_and_copied_as_it_is_then(
    make_store: MakeStore, change: Callable[[SwarmStateSaver], Callable[[], None]]
) -> None:
    saver, spied = filled(make_store)
    before = contents(saver.store, "src")
    spied.before = change(saver)  # lands after the source was read, before the copy's write

    saver.copy_thread("src", "dst")

    assert contents(saver.store, "src") != before  # it did change
    assert spied.calls == ["write", "write"]
    assert spied.conflicts == 1
    assert spied.at_conflict == [{}]  # the refused write wrote nothing
    assert ids(saver, "dst") == ids(saver, "src")
    for copy, original in zip(saver.list(cfg("dst")), saver.list(cfg("src")), strict=True):
        assert copy.pending_writes == original.pending_writes
        assert copy.checkpoint == original.checkpoint


def test_a_source_that_keeps_changing_ends_the_copy_with_nothing_written(
    make_store: MakeStore,
) -> None:
    saver, spied = filled(make_store)
    late = _late_write(saver)
    rounds = 0

    def again() -> None:
        nonlocal rounds
        rounds += 1
        late()
        spied.before = again

    spied.before = again

    with pytest.raises(swarmstate.ConflictError, match="kept changing"):
        saver.copy_thread("src", "dst")

    assert spied.conflicts == rounds == len(spied.calls) > 1
    assert contents(saver.store, "dst") == {}
    assert spied.at_conflict == [{}] * rounds

"""More corners where a saver could return the wrong state without an error.

Real graphs with plain Python nodes, compared with LangGraph's ``InMemorySaver``
where one applies: a ``__copy__`` fork of a checkpoint read by a resume, a
``DeltaChannel`` whose stored seed lost its chunks, and a state history read
while retention runs through another handle on the same store.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

import swarmstate
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys

MakeStore = Callable[[], swarmstate.BaseStore]


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


# -- 1. a __copy__ fork of a checkpoint a resume went on from ---------------------------


class Steps(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    last: str


def _stopping_graph(saver: Any) -> Any:
    """``a`` then ``b``, stopping before ``b``; ``b``'s value depends on ``a``'s."""
    builder = StateGraph(Steps)
    builder.add_node("a", lambda state: {"items": ["a"], "last": "A"})
    builder.add_node("b", lambda state: {"items": ["b"], "last": "B" + state["last"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=saver, interrupt_before=["b"])


def _fork_after_resume(saver: Any) -> tuple[Any, Any, list[Any]]:
    graph = _stopping_graph(saver)
    graph.invoke({"items": ["question"]}, cfg("f"))
    graph.invoke(None, cfg("f"))  # b runs, from the checkpoint this saver just read
    latest = graph.get_state(cfg("f"))
    fork = graph.update_state(latest.config, None, as_node="__copy__")
    history = [(s.values, s.next) for s in graph.get_state_history(cfg("f"))]
    return fork, graph.get_state(fork), history


def test_a_copy_fork_after_a_resume_holds_the_values_the_resume_wrote(
    make_store: MakeStore,
) -> None:
    store = make_store()
    fork, ours, history = _fork_after_resume(SwarmStateSaver(store))
    _, reference, reference_history = _fork_after_resume(InMemorySaver())
    assert reference.values == {"items": ["question", "a", "b"], "last": "BA"}
    assert (ours.values, ours.next) == (reference.values, reference.next)
    assert history == reference_history
    # What was stored, not what a cache holds: a new saver reads the same.
    again = _stopping_graph(SwarmStateSaver(store)).get_state(fork)
    assert again.values == reference.values


async def test_an_async_copy_fork_after_a_resume_matches_the_reference(
    make_store: MakeStore,
) -> None:
    found = []
    for saver in (SwarmStateSaver(make_store()), InMemorySaver()):
        graph = _stopping_graph(saver)
        await graph.ainvoke({"items": ["question"]}, cfg("f"))
        await graph.ainvoke(None, cfg("f"))
        latest = await graph.aget_state(cfg("f"))
        fork = await graph.aupdate_state(latest.config, None, as_node="__copy__")
        found.append((await graph.aget_state(fork)).values)
    assert found[0] == found[1] == {"items": ["question", "a", "b"], "last": "BA"}


# -- 2. a DeltaChannel whose seed lost its chunks -------------------------------------


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    out = list(state)
    for write in writes:
        out.extend(write if isinstance(write, list) else [write])
    return out


class Items(TypedDict, total=False):
    items: Annotated[list[Any], DeltaChannel(_fold, snapshot_frequency=5)]


def _delta_graph(saver: Any) -> Any:
    """One node appending a line longer than a value kept inline, over a DeltaChannel."""
    builder = StateGraph(Items)
    builder.add_node("agent", lambda state: {"items": [f"a{len(state['items'])} " + "x" * 60]})
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _fill(saver: Any, thread: str, turns: int) -> Any:
    graph = _delta_graph(saver)
    for turn in range(turns):
        graph.invoke({"items": [f"u{turn}"]}, cfg(thread), durability="sync")
    return graph


def _drop_chunks(store: swarmstate.BaseStore, thread: str) -> None:
    """Delete every chunk row of a thread, through the store's own API."""
    namespace = keys.chunks(thread)
    rows = store.keys(namespace)
    assert rows, "the snapshot's bytes are stored as chunks"
    store.delete_many([(namespace, key) for key in rows])


def _snapshot_holders(saver: SwarmStateSaver, thread: str) -> list[Any]:
    return [t for t in saver.list(cfg(thread)) if "items" in t.checkpoint["channel_values"]]


def test_a_delta_channel_whose_seed_chunks_are_missing_raises_on_every_read(
    make_store: MakeStore,
) -> None:
    store = make_store()
    writer = SwarmStateSaver(store)
    _fill(writer, "d", 7)
    assert len(_delta_graph(writer).get_state(cfg("d")).values["items"]) == 14
    holders = _snapshot_holders(writer, "d")
    assert holders, "some checkpoint stores the channel's snapshot"
    _drop_chunks(store, "d")
    reader = SwarmStateSaver(store)  # nothing cached: what the store holds
    graph = _delta_graph(reader)
    assert reader.verify(["d"]), "verify sees the damage"
    with pytest.raises(swarmstate.CorruptDataError, match="'items'"):
        graph.get_state(cfg("d"))
    with pytest.raises(swarmstate.CorruptDataError, match="'items'"):
        reader.get_delta_channel_history(config=cfg("d"), channels=["items"])
    with pytest.raises(swarmstate.CorruptDataError):
        list(graph.get_state_history(cfg("d")))
    with pytest.raises(swarmstate.CorruptDataError):
        reader.get_tuple(holders[0].config)
    with pytest.raises(swarmstate.CorruptDataError):
        list(reader.list(cfg("d")))


async def test_a_delta_channel_whose_seed_chunks_are_missing_raises_when_read_async(
    make_store: MakeStore,
) -> None:
    store = make_store()
    _fill(SwarmStateSaver(store), "d", 7)
    _drop_chunks(store, "d")
    graph = _delta_graph(SwarmStateSaver(store))
    with pytest.raises(swarmstate.CorruptDataError, match="'items'"):
        await graph.aget_state(cfg("d"))


@pytest.mark.parametrize("backend", ["disk", "postgres"])
def test_show_reports_a_delta_channel_whose_seed_chunks_are_missing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: Any
) -> None:
    store: swarmstate.BaseStore
    if backend == "disk":
        from swarmstate.backends.disk import DiskStore

        store = DiskStore(tmp_path / "show.db")
        target = [str(tmp_path / "show.db")]
    else:
        store = request.getfixturevalue("pg_store_factory")()
        target = [request.getfixturevalue("pg_conninfo"), "--schema", store.schema]  # type: ignore[attr-defined]
    _fill(SwarmStateSaver(store), "d", 7)
    assert main(["show", target[0], "d", "--json", *target[1:]]) == 0
    capsys.readouterr()
    _drop_chunks(store, "d")
    code = main(["show", target[0], "d", "--json", *target[1:]])
    out = capsys.readouterr()
    assert code != 0
    assert "damaged" in out.err, out.err
    assert "'items'" in out.err, out.err
    store.close()


# -- 3. a state history read while retention runs through another handle ---------------


@pytest.fixture(params=["memory", "disk", "postgres"])
def handles(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[type | None], swarmstate.BaseStore]]:
    """``open(cls=None)``: another handle on one store (of ``cls``, a subclass of the backend's).

    On memory every handle is the one ``Store``; on a file, another ``DiskStore``
    of the same path; on PostgreSQL, another ``PostgresStore`` of the same schema.
    """
    opened: list[swarmstate.BaseStore] = []
    shared: dict[str, Any] = {}

    def open_handle(cls: type | None = None) -> swarmstate.BaseStore:
        store: Any
        if request.param == "memory":
            if "store" not in shared:
                shared["store"] = (cls or swarmstate.Store)()
            return shared["store"]  # type: ignore[no-any-return]
        if request.param == "disk":
            from swarmstate.backends.disk import DiskStore

            store = (cls or DiskStore)(tmp_path / "two.db")
        else:
            from swarmstate.backends.postgres import PostgresStore

            if "schema" not in shared:
                shared["schema"] = request.getfixturevalue("pg_store_factory")().schema
            conninfo = request.getfixturevalue("pg_conninfo")
            store = (cls or PostgresStore)(conninfo, schema=shared["schema"])
        opened.append(store)
        return store  # type: ignore[no-any-return]

    open_handle.backend = request.param  # type: ignore[attr-defined]
    yield open_handle
    for store in opened:
        store.close()


def _ident(state: Any) -> str:
    return str(state.config["configurable"]["checkpoint_id"])


def test_a_state_history_read_during_retention_never_returns_a_checkpoint_emptied(
    handles: Any,
) -> None:
    writer = SwarmStateSaver(handles())
    _fill(writer, "d", 7)
    # LangGraph's own reading of every checkpoint before retention.
    expected = {_ident(s): s.values for s in _delta_graph(writer).get_state_history(cfg("d"))}
    reader = SwarmStateSaver(handles())  # nothing cached: what the store holds
    pruner = SwarmStateSaver(handles())
    states = _delta_graph(reader).get_state_history(cfg("d"))
    seen = [next(states)]  # LangGraph has listed every checkpoint by now
    report = pruner.retain(keep_last=1)
    assert report.checkpoints_deleted > 0
    kept = {t.checkpoint["id"] for t in SwarmStateSaver(handles()).list(cfg("d"))}
    # A checkpoint deleted after it was listed cannot be rebuilt: the read says
    # so instead of returning it with its DeltaChannel short.
    with pytest.raises(swarmstate.CheckpointDeletedError, match="deleted after it was read"):
        seen.extend(states)
    assert len(seen) > 1
    for state in seen:
        assert state.values == expected[_ident(state)], _ident(state)
    # Read again, the history is what retention kept, every checkpoint whole.
    again = list(_delta_graph(reader).get_state_history(cfg("d")))
    assert {_ident(s) for s in again} == kept
    for state in again:
        assert state.values == expected[_ident(state)]


def _pausing(base: type) -> type:
    """``base`` whose first ``delete_many`` after ``pause_after`` is set runs it once, then."""

    class Pausing(base):  # type: ignore[misc, valid-type]
        pause_after: Callable[[], None] | None = None

        def delete_many(self, pairs: Any) -> int:
            count: int = super().delete_many(pairs)
            hook, self.pause_after = self.pause_after, None
            if hook is not None:
                hook()
            return count

    return Pausing


def test_a_checkpoint_read_between_retentions_batches_is_whole_or_reported_deleted(
    handles: Any,
) -> None:
    from swarmstate.integrations.langgraph.retention import BATCH

    if handles.backend == "memory":
        base: type = swarmstate.Store
    elif handles.backend == "disk":
        from swarmstate.backends.disk import DiskStore

        base = DiskStore
    else:
        from swarmstate.backends.postgres import PostgresStore

        base = PostgresStore
    pruning_store = handles(_pausing(base))
    writer = SwarmStateSaver(handles())
    graph = _fill(writer, "d", 80)
    states = list(graph.get_state_history(cfg("d")))
    entries = len(writer.store.keys(keys.scope("d", "")))
    assert entries > BATCH + 100, "retention deletes in several batches"
    reader = _delta_graph(SwarmStateSaver(handles()))
    checked: list[str] = []

    def read_everything() -> None:
        # Between two of retention's batches: each checkpoint reads whole, or
        # reads as absent, or reports that it was deleted while it was read.
        present = 0
        for state in states:
            try:
                got = reader.get_state(state.config)
            except swarmstate.CheckpointDeletedError:
                checked.append("deleted")
                continue
            if got.metadata is None:
                checked.append("absent")
                continue
            present += 1
            assert got.values == state.values, _ident(state)
            checked.append("whole")
        assert 1 < present < len(states), "the read ran between two batches"

    pruning_store.pause_after = read_everything  # type: ignore[attr-defined]
    assert SwarmStateSaver(pruning_store).retain(keep_last=1).checkpoints_deleted > 0
    assert checked, "the read ran"
    assert "whole" in checked

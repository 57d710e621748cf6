"""The checkpoints' tags: what list(None), thread listings and idle-thread sweeps read.

They must answer exactly what a scan of every thread would, and keep doing so
through every operation that adds or removes checkpoints and threads; a
store of the release before tags reads the same before and after its
conversion.
"""

from __future__ import annotations

import datetime
import operator
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

import swarmstate
from swarmstate.integrations.langgraph import Retention, SwarmStateSaver
from swarmstate.integrations.langgraph.format import entry, keys

MakeStore = Callable[[], swarmstate.BaseStore]


class Steps(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _graph(saver: Any) -> Any:
    builder = StateGraph(Steps)
    builder.add_node("one", lambda s: {"log": [f"one {len(s.get('log', []))}"]})
    builder.add_node("two", lambda s: {"log": [f"two {len(s.get('log', []))}"]})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder.compile(checkpointer=saver)


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def _scanned(saver: SwarmStateSaver) -> list[tuple[str, str, str]]:
    """Every checkpoint newest first, read thread by thread (no store-wide index)."""
    rows = [
        (
            t.checkpoint["id"],
            t.config["configurable"]["thread_id"],
            t.config["configurable"]["checkpoint_ns"],
        )
        for thread in saver.list_threads()
        for t in saver.list(cfg(thread))
    ]
    return sorted(rows, reverse=True)


def _listed(saver: SwarmStateSaver, **options: Any) -> list[tuple[str, str, str]]:
    return [
        (
            t.checkpoint["id"],
            t.config["configurable"]["thread_id"],
            t.config["configurable"]["checkpoint_ns"],
        )
        for t in saver.list(None, **options)
    ]


def test_list_of_every_thread_reads_the_index_and_agrees_with_a_scan(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = _graph(saver)
    for thread in ("a", "b", "c", "d"):
        for turn in range(2):
            run = {**cfg(thread), "run_id": uuid.UUID(int=ord(thread) * 10 + turn)}
            graph.invoke({"log": []}, run, durability="sync")
    assert _listed(saver) == _scanned(saver)
    every = _listed(saver)
    assert _listed(saver, limit=5) == every[:5]
    assert _listed(saver, before={"configurable": {"checkpoint_id": every[6][0]}}) == every[7:]
    assert [t.metadata["step"] for t in saver.list(None, filter={"step": 1})] == [1] * 4
    # Every change of the threads keeps the index exact.
    saver.copy_thread("a", "a2")
    saver.prune(["b"], keep_last=2)
    saver.delete_thread("c")
    saver.delete_for_runs([str(uuid.UUID(int=ord("d") * 10 + 1))])
    assert _listed(saver) == _scanned(saver)
    assert {row[1] for row in _listed(saver)} == {"a", "a2", "b", "d"}
    assert saver.thread_count() == 4
    assert saver.list_threads() == ["a", "a2", "b", "d"]


def test_threads_by_last_activity_come_newest_first_a_page_at_a_time(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = _graph(saver)
    for thread in ("x", "y", "z", "w"):
        graph.invoke({"log": []}, cfg(thread), durability="sync")
    graph.invoke({"log": []}, cfg("y"), durability="sync")  # y is the newest now
    page = saver.recent_threads(limit=10)
    assert [row.thread_id for row in page] == ["y", "w", "z", "x"]
    assert all(row.last_activity is not None for row in page)
    assert page[0].checkpoint_id == saver.get_tuple(cfg("y")).checkpoint["id"]  # type: ignore[union-attr]
    assert [row.thread_id for row in saver.recent_threads(limit=2, offset=1)] == ["w", "z"]
    saver.delete_thread("w")
    assert [row.thread_id for row in saver.recent_threads()] == ["y", "z", "x"]
    assert saver.thread_count() == 3
    # Nothing of the deleted thread is left in the tags.
    assert not any(keys.parse_scope(ns)[0] == "w" for _, ns, _ in saver.store.tagged("order"))  # type: ignore[index]


def _id_at(period: int, count: int) -> str:
    """A LangGraph-shaped checkpoint id (UUIDv6) in activity period ``period``."""
    return f"{period:08x}-{count:04x}-6000-8000-000000000000"


def test_threads_by_activity_rank_across_periods_and_within_the_one_that_fills_the_page(
    make_store: MakeStore,
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = SwarmStateSaver(make_store())
    newest: dict[str, str] = {}
    count = 0
    # Three periods; many threads in each, some written again in a later one.
    for period, threads in ((0x1F000001, "abcdefgh"), (0x1F000002, "ijklmn"), (0x1F000003, "cjop")):
        for thread in threads:
            count += 1
            checkpoint = {**empty_checkpoint(), "id": _id_at(period, count)}
            saver.put(cfg(thread), checkpoint, {"step": count}, {})
            newest[thread] = checkpoint["id"]
    expected = sorted(newest, key=lambda t: (newest[t], t), reverse=True)
    assert [r.thread_id for r in saver.recent_threads(limit=None)] == expected
    for offset in range(0, len(expected) + 1):
        for limit in (1, 2, 3, 5, 8, 20):
            page = saver.recent_threads(limit=limit, offset=offset)
            assert [r.thread_id for r in page] == expected[offset : offset + limit]
            assert [r.checkpoint_id for r in page] == [newest[r.thread_id] for r in page]
    saver.delete_thread("o")  # the newest: the rest move up
    assert [r.thread_id for r in saver.recent_threads(limit=4)] == [
        t for t in expected if t != "o"
    ][:4]


def test_a_sweep_for_idle_threads_reads_the_activity_index_and_deletes_only_idle_threads(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = _graph(saver)
    for thread in ("old", "live"):
        graph.invoke({"log": []}, cfg(thread), durability="sync")
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)
    dry = saver.retain(older_than=datetime.timedelta(days=3), now=later, dry_run=True)
    assert dry.threads_deleted == 0
    plan = saver.retain(older_than=datetime.timedelta(days=1), now=later, dry_run=True)
    assert plan.threads_deleted == 2
    graph.invoke({"log": []}, cfg("live"), durability="sync")
    report = saver.retain(older_than=datetime.timedelta(days=1), now=later)
    assert report.threads_deleted == 2  # both were idle as of ``later``
    assert saver.list_threads() == []
    assert saver.store.tagged("order") == []
    # A thread active after the cutoff is kept.
    graph.invoke({"log": []}, cfg("again"), durability="sync")
    assert saver.retain(older_than=3600).threads_deleted == 0
    assert saver.list_threads() == ["again"]


def test_a_keep_last_policy_keeps_each_thread_near_its_limit_from_the_start(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store(), retention=Retention(keep_last=2))
    graph = _graph(saver)
    for _ in range(10):  # 40 puts
        graph.invoke({"log": []}, cfg("t"), durability="sync")
        assert len(list(saver.list(cfg("t")))) <= 2 + Retention(keep_last=2).every
    assert len(graph.get_state(cfg("t")).values["log"]) == 20


def _downgrade(store: swarmstate.BaseStore, serde: Any) -> None:
    """Make a store what the release before tags left: checkpoint entries without tags, and
    its rows beside them (checkpoint index, activity, periods, registry, run index)."""
    for namespace in store.namespaces(keys.THREADS):
        scope = keys.parse_scope(namespace)
        if scope is None:
            continue
        thread_id, checkpoint_ns = scope
        for key, data in store.items(namespace, raw=True):
            if key[-1] != keys.CHECKPOINT:
                continue
            store.set_many([(namespace, key, data)], raw=True)  # the same bytes, no tags
            checkpoint_id = keys.checkpoint_id_of(key)
            thread, ns_field = keys.field(thread_id), keys.field(checkpoint_ns)
            period = checkpoint_id[:8]
            store.set(keys.INDEX, keys.ordered(checkpoint_id) + thread + ns_field, None)
            store.set(keys.ACTIVITY, period + thread, None)
            store.set(keys.THREADS + thread + keys.PERIODS, period, None)
            store.set(keys.REGISTRY, thread, None)
            run_id = entry.head(serde, data)[2]
            if type(run_id) is str:
                store.set(keys.RUNS + keys.field(run_id), thread + ns_field, None)
                store.set(namespace[:-1] + "r", keys.field(run_id), None)
    store.delete_many([(keys.META, "tags"), (keys.META, "sweep")])
    store.set(keys.META, "indexes", 1)


def _everything(store: swarmstate.BaseStore) -> dict[tuple[str, str], bytes]:
    return {
        (namespace, key): data
        for namespace in store.namespaces()
        for key, data in store.items(namespace, raw=True)
    }


def _answers(saver: SwarmStateSaver) -> Any:
    return (
        _listed(saver),
        _listed(saver, limit=3),
        [(t.checkpoint["id"], t.metadata) for t in saver.list(None, filter={"step": 1})],
        [(r.thread_id, r.checkpoint_id) for r in saver.recent_threads(limit=None)],
        [(r.thread_id, r.checkpoint_id) for r in saver.recent_threads(limit=2, offset=1)],
        saver.list_threads(),
        saver.thread_count(),
    )


def test_a_store_of_the_release_before_tags_reads_the_same_before_and_after_setup(
    make_store: MakeStore,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    graph = _graph(saver)
    for thread in ("p", "q", "s"):
        run = {**cfg(thread), "metadata": {"run_id": f"run-{thread}"}}
        graph.invoke({"log": []}, run, durability="sync")
    expected = _answers(saver)
    checkpoints = len(expected[0])
    _downgrade(store, saver.serde)
    assert store.tagged("order") == []
    before = _everything(store)
    reader = SwarmStateSaver(store)
    assert _answers(reader) == expected  # read by scanning the threads
    assert _everything(store) == before, "a read writes nothing"
    reader.setup()
    # Every checkpoint carries its tags, with its bytes unchanged; the old rows are gone.
    assert len(store.tagged("order")) == checkpoints
    assert len(store.tagged("group")) == checkpoints
    after = _everything(store)
    assert {k: v for k, v in after.items() if k[0].startswith(keys.THREADS)} == {
        k: v
        for k, v in before.items()
        if k[0].startswith(keys.THREADS) and keys.parse_scope(k[0]) is not None
    }
    for gone in (keys.INDEX, keys.ACTIVITY, keys.REGISTRY, keys.RUNS):
        assert store.namespaces(gone) == []
    assert _answers(SwarmStateSaver(store)) == expected
    # The runs are found by their tags now.
    SwarmStateSaver(store).delete_for_runs(["run-q"])
    assert SwarmStateSaver(store).list_threads() == ["p", "s"]


def test_the_first_put_of_a_saver_converts_a_store_of_the_release_before_tags(
    make_store: MakeStore,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    graph = _graph(saver)
    for thread in ("p", "q"):
        graph.invoke({"log": []}, cfg(thread), durability="sync")
    _downgrade(store, saver.serde)
    expected = _scanned(saver)
    writer = SwarmStateSaver(store)
    _graph(writer).invoke({"log": []}, cfg("r"), durability="sync")  # the first put converts
    assert len(store.tagged("order")) == len(expected) + 4
    assert store.namespaces(keys.INDEX) == []
    assert _listed(SwarmStateSaver(store)) == _scanned(writer)
    assert SwarmStateSaver(store).recent_threads(limit=1)[0].thread_id == "r"


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_paging_arguments_are_checked(make_store: MakeStore, bad: Any) -> None:
    saver = SwarmStateSaver(make_store())
    with pytest.raises(swarmstate.InvalidArgumentError, match="limit"):
        saver.recent_threads(limit=bad)
    with pytest.raises(swarmstate.InvalidArgumentError, match="offset"):
        saver.recent_threads(offset=bad)


def test_delete_thread_is_one_transaction_that_leaves_nothing_of_the_thread(
    make_store: MakeStore,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    graph = _graph(saver)
    for thread in ("a", "b"):
        for turn in range(2):
            run = {**cfg(thread), "run_id": uuid.UUID(int=ord(thread) * 10 + turn)}
            graph.invoke({"log": []}, run, durability="sync")
    kept = [row for row in _listed(saver) if row[1] == "b"]
    tagged = len(store.tagged("order"))
    calls: list[str] = []
    for name in ("set", "set_many", "delete", "delete_many", "delete_prefix", "write"):
        method = getattr(store, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **options: Any) -> Any:
            calls.append(_name)
            return _method(*args, **options)

        setattr(store, name, counted)

    saver.delete_thread("a")

    assert calls == ["write"]  # the tombstone and every deletion, all or nothing
    assert store.namespaces(keys.thread_prefix("a")) == []
    assert tagged > len(kept)
    assert len(store.tagged("order")) == len(kept)  # the tags went with a's checkpoints
    assert saver.list_threads() == ["b"]
    assert [row for row in _listed(saver) if row[1] == "b"] == kept
    assert [row for row in _listed(saver) if row[1] == "a"] == []


def test_a_read_only_file_of_the_release_before_tags_is_read_by_scanning(tmp_path: Any) -> None:
    from swarmstate.backends.disk import DiskStore

    path = tmp_path / "old.db"
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        graph = _graph(saver)
        for thread in ("p", "q"):
            graph.invoke({"log": []}, {**cfg(thread), "metadata": {"run_id": thread}})
        expected = _answers(saver)
        _downgrade(store, saver.serde)
        before = _everything(store)
    with DiskStore(path, readonly=True) as reader:
        assert _answers(SwarmStateSaver(reader)) == expected
        assert _everything(reader) == before
    with DiskStore(path) as store:
        assert _everything(store) == before, "the read-only reader wrote nothing"
        SwarmStateSaver(store).setup()
        assert _answers(SwarmStateSaver(store)) == expected

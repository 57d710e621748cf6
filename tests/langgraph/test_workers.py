"""Several workers on one thread: tombstones and fencing tokens, across processes and in one.

The two-process tests run a real graph in a spawned process whose middle
node waits on an event, while this process deletes or claims the thread;
on DiskStore (one file) and on PostgreSQL (a pool per process).
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver

BACKENDS = ["disk", "postgres"]


class Steps(TypedDict, total=False):
    steps: Annotated[list[str], lambda a, b: a + b]


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def slow_graph(saver: Any, gate: Any = None, reached: Any = None) -> Any:
    """START -> a -> wait (blocks on ``gate``) -> c -> END."""

    def wait(state: Steps) -> dict[str, Any]:
        if gate is not None:
            reached.set()
            assert gate.wait(60), "the test never opened the gate"
        return {"steps": ["wait"]}

    builder = StateGraph(Steps)
    builder.add_node("a", lambda s: {"steps": ["a"]})
    builder.add_node("wait", wait)
    builder.add_node("c", lambda s: {"steps": ["c"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "wait")
    builder.add_edge("wait", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


def open_store(where: dict[str, str]) -> swarmstate.BaseStore:
    if "path" in where:
        from swarmstate.backends.disk import DiskStore

        return DiskStore(where["path"])
    from swarmstate.backends.postgres import PostgresStore

    return PostgresStore(where["conninfo"], schema=where["schema"])


def _worker(where: dict[str, str], config: Any, gate: Any, reached: Any, out: Any) -> None:
    """Process A: run the slow graph; report how its run ended."""
    store = open_store(where)
    try:
        graph = slow_graph(SwarmStateSaver(store), gate, reached)
        graph.invoke({"steps": []}, config, durability="sync")
        out.put(("finished", ""))
    except swarmstate.SwarmStateError as exc:
        out.put((type(exc).__name__, str(exc)))
    except BaseException as exc:  # reported to the test
        out.put(("unexpected", repr(exc)))
    finally:
        store.close()


@pytest.fixture(params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Where two processes find one store: a file, or a PostgreSQL schema."""
    if request.param == "disk":
        yield {"path": str(tmp_path / "shared.db")}
        return
    factory = request.getfixturevalue("pg_store_factory")
    store = factory()
    yield {"conninfo": factory.conninfo, "schema": store.schema}


def _start(where: dict[str, str], config: Any) -> tuple[Any, Any, Any, Any]:
    ctx = multiprocessing.get_context("spawn")
    gate, reached, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_worker, args=(where, config, gate, reached, out))
    proc.start()
    assert reached.wait(120), "process A never reached the slow node"
    return proc, gate, out, ctx


@pytest.mark.slow
def test_a_run_writing_into_a_thread_deleted_meanwhile_is_refused(
    shared: dict[str, str],
) -> None:
    proc, gate, out, _ = _start(shared, cfg("t"))
    store = open_store(shared)
    try:
        saver = SwarmStateSaver(store)
        assert saver.get_tuple(cfg("t")) is not None
        saver.delete_thread("t")  # process B, while A waits in its node
        gate.set()
        status, detail = out.get(timeout=120)
        proc.join(60)
        assert status == "ThreadDeletedError", detail
        assert saver.list_threads() == []  # A's late writes did not bring it back
        assert list(saver.list(cfg("t"))) == []
        # A new run under the same id starts afresh and goes on.
        graph = slow_graph(saver)
        assert graph.invoke({"steps": []}, cfg("t"))["steps"] == ["a", "wait", "c"]
        assert graph.invoke({"steps": []}, cfg("t"))["steps"] == ["a", "wait", "c"] * 2
    finally:
        store.close()


@pytest.mark.slow
def test_a_run_whose_claim_was_taken_over_is_fenced(shared: dict[str, str]) -> None:
    store = open_store(shared)
    try:
        saver = SwarmStateSaver(store)
        first = saver.claim("t", ttl=60)
        run_a = {**cfg("t", fence=first), "metadata": {"run_id": "A"}}
        proc, gate, out, _ = _start(shared, run_a)
        before = {c.checkpoint["id"] for c in saver.list(cfg("t"))}
        assert before, "A wrote its first checkpoints"
        second = saver.claim("t", ttl=60)  # process B takes the thread over
        assert second > first
        graph = slow_graph(saver)
        graph.invoke({"steps": []}, {**cfg("t", fence=second), "metadata": {"run_id": "B"}})
        gate.set()
        status, detail = out.get(timeout=120)
        proc.join(60)
        assert status == "FencedError", detail
        # Nothing of A's was written after B's claim: A's checkpoints are the ones before it.
        history = list(saver.list(cfg("t")))
        by_a = {c.checkpoint["id"] for c in history if c.metadata.get("run_id") == "A"}
        assert by_a == before
        assert {c.metadata.get("run_id") for c in history} == {"A", "B"}
        assert graph.get_state(cfg("t")).values["steps"][-3:] == ["a", "wait", "c"]
        assert saver.release("t", second)
    finally:
        store.close()


def _put(saver: SwarmStateSaver, thread: str, parent: str | None = None, **conf: Any) -> str:
    config = cfg(thread, checkpoint_ns="", **conf)
    if parent:
        config["configurable"]["checkpoint_id"] = parent
    checkpoint = empty_checkpoint()
    saver.put(config, checkpoint, {"source": "loop", "step": 0}, {})
    return str(checkpoint["id"])


def test_unfenced_writes_to_a_claimed_thread_wait_for_release_or_ttl(
    make_store: Callable[[], swarmstate.BaseStore],
) -> None:
    saver = SwarmStateSaver(make_store())
    clock = [1_000.0]
    saver._guards.clock = lambda: clock[0]  # the claim's ttl, without sleeping
    parent = _put(saver, "t")  # a thread never claimed: no token needed
    token = saver.claim("t", ttl=30)
    with pytest.raises(swarmstate.FencedError, match="is claimed"):
        _put(saver, "t", parent)
    with pytest.raises(swarmstate.FencedError, match="is claimed"):
        saver.put_writes(cfg("t", checkpoint_id=parent), [("steps", ["x"])], "task")
    fenced = _put(saver, "t", parent, fence=token)
    assert saver.release("t", token)
    _put(saver, "t", fenced)  # released: unfenced writes are accepted again
    newer = saver.claim("t", ttl=30)
    clock[0] += 31  # the claim's ttl passed
    _put(saver, "t", fenced)
    with pytest.raises(swarmstate.FencedError, match="claimed again"):
        _put(saver, "t", fenced, fence=token)  # an older token stays refused
    _put(saver, "t", fenced, fence=newer)
    with pytest.raises(swarmstate.FencedError, match="never issued"):
        _put(saver, "t", fenced, fence=newer + 5)
    with pytest.raises(swarmstate.InvalidArgumentError, match="fence"):
        _put(saver, "t", fenced, fence="7")
    assert not saver.release("t", token)  # not the newest claim: nothing changes
    with pytest.raises(swarmstate.InvalidArgumentError, match="ttl"):
        saver.claim("t", ttl=0)


def test_a_put_with_no_parent_restarts_a_deleted_thread_and_late_writes_stay_refused(
    make_store: Callable[[], swarmstate.BaseStore],
) -> None:
    saver = SwarmStateSaver(make_store())
    old = _put(saver, "t")
    saver.delete_thread("t")
    with pytest.raises(swarmstate.ThreadDeletedError):
        _put(saver, "t", old)
    with pytest.raises(swarmstate.ThreadDeletedError):
        saver.put_writes(cfg("t", checkpoint_id=old), [("steps", ["late"])], "task")
    assert saver.list_threads() == []
    fresh = _put(saver, "t")
    _put(saver, "t", fresh)  # the new incarnation goes on
    assert len(list(saver.list(cfg("t")))) == 2
    with pytest.raises(swarmstate.ThreadDeletedError):
        _put(saver, "t", old)


async def test_aclaim_and_arelease(make_store: Callable[[], swarmstate.BaseStore]) -> None:
    saver = SwarmStateSaver(make_store())
    token = await saver.aclaim("a", ttl=10)
    assert await saver.aclaim("a", ttl=10) == token + 1
    assert await saver.arelease("a", token + 1)


def test_no_accepted_write_carries_a_token_older_than_the_newest_claim_before_it(
    make_store: Callable[[], swarmstate.BaseStore],
) -> None:
    # Workers interleave claims, releases, puts (with their token, a stale one,
    # or none) and deletes, with no lock of the test's own. A claim is committed
    # when claim() returns, and a write commits after put() is called: so a
    # claim that returned before a write started must be seen by that write.
    saver = SwarmStateSaver(make_store())
    claims: list[tuple[float, int]] = []  # (when it had returned, token)
    writes: list[tuple[float, int]] = []  # (when it was called, token) of accepted writes
    refused = [0]
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mine: int | None = None
        try:
            for _ in range(40):
                action = rng.random()
                if action < 0.2:
                    mine = saver.claim("t", ttl=600)
                    claims.append((time.monotonic(), mine))
                elif action < 0.3 and mine is not None:
                    saver.release("t", mine)
                elif action < 0.35:
                    saver.delete_thread("t")
                else:
                    fence = mine if rng.random() < 0.8 else None
                    latest = saver.get_tuple(cfg("t"))
                    parent = latest.checkpoint["id"] if latest is not None else None
                    started = time.monotonic()
                    try:
                        _put(saver, "t", parent, **({"fence": fence} if fence else {}))
                    except (swarmstate.FencedError, swarmstate.ThreadDeletedError):
                        refused[0] += 1
                        continue
                    if fence is not None:
                        writes.append((started, fence))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert writes, "some fenced writes were accepted"
    assert refused[0], "some writes were refused"
    for started, token in writes:
        newest_before = max((t for done, t in claims if done < started), default=0)
        assert token >= newest_before

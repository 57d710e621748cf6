"""Checkpointers measured side by side on the recorded conversation, call by call.

Shared by ``benchmarks/run.py`` (its memory, durable and PostgreSQL
sections) and ``swarmstate benchmark`` (:func:`saver_rows`), so both feed
every saver the same runtime call pattern (:mod:`swarmstate._bench.conversation`).
Only the public checkpointer API is used: ``put``, ``put_writes``,
``get_tuple``, ``list`` and ``get_next_version``.

Savers of one group are timed in the same interleaved rounds, so a ratio
between two of them (or between a saver and a floor the caller adds) can be
taken round by round.

LangGraph, and the recorded conversation that needs it, are imported inside
the calls that measure a saver: importing this module imports neither.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarmstate._bench.timing import Op, interleave_rounds, round_stats

__all__ = ["Group", "Measured", "saver_rows", "sqlite_saver"]

Rounds = list[list[int]]


@dataclass
class Measured:
    """Per-round samples of one group: ``latest[(label, n)]``, ``listed``, ``put``, ``writes``.

    ``extra`` holds the caller's extra ops by name; ``pending_on_latest`` the
    number of pending writes the latest checkpoint of each thread carries.
    """

    latest: dict[tuple[str, int], Rounds] = field(default_factory=dict)
    listed: dict[str, Rounds] = field(default_factory=dict)
    put: dict[str, Rounds] = field(default_factory=dict)
    writes: dict[str, Rounds] = field(default_factory=dict)
    extra: dict[str, Rounds] = field(default_factory=dict)
    pending_on_latest: dict[int, int] = field(default_factory=dict)


@dataclass
class Group:
    """Savers measured together: same conversation, same thread lengths, interleaved rounds.

    ``extra_latest``, ``extra_list`` and ``extra_put`` are ops (floors) timed
    in the same rounds as the savers' latest reads (keyed by thread length),
    lists and puts; their samples come back under the op's name.
    """

    savers: dict[str, Any]
    lengths: list[int]
    calls: int
    rounds: int
    warmup: int
    prefix: str = ""
    list_calls: int | None = None
    after_fill: Callable[[], None] | None = None
    extra_latest: dict[int, Op] = field(default_factory=dict)
    extra_list: list[Op] = field(default_factory=list)
    extra_put: list[Op] = field(default_factory=list)

    def thread(self, what: object) -> str:
        return f"{self.prefix}{what}"

    def steps_needed(self) -> int:
        """How many recorded checkpoints :meth:`run` replays at most."""
        return max(max(self.lengths), self.calls + self.warmup + 2)

    def run(self, conversation: Any) -> Measured:
        from swarmstate._bench.conversation import Replay

        out = Measured()
        longest = max(self.lengths)
        for saver in self.savers.values():
            for n in self.lengths:
                Replay(conversation, saver, self.thread(f"grow-{n}")).fill(n)
        if self.after_fill is not None:
            self.after_fill()
        for n in self.lengths:
            out.pending_on_latest[n] = sum(len(t.writes) for t in conversation.steps[n - 1].tasks)

        def reader(saver: Any, n: int) -> Callable[[int], object]:
            config = {"configurable": {"thread_id": self.thread(f"grow-{n}"), "checkpoint_ns": ""}}
            return lambda i: saver.get_tuple(config)

        ops = [
            Op(f"{label}|{n}", reader(saver, n))
            for label, saver in self.savers.items()
            for n in self.lengths
        ]
        ops += [op for n, op in sorted(self.extra_latest.items())]
        got = interleave_rounds(ops, calls=self.calls, rounds=self.rounds, warmup=self.warmup)
        for label in self.savers:
            for n in self.lengths:
                out.latest[(label, n)] = got[f"{label}|{n}"]
        out.extra.update({op.name: got[op.name] for op in self.extra_latest.values()})

        def lister(saver: Any) -> Callable[[int], object]:
            config = {"configurable": {"thread_id": self.thread(f"grow-{longest}")}}
            return lambda i: list(saver.list(config, limit=10))

        list_calls = self.list_calls or max(self.rounds, self.calls // 5)
        ops = [Op(label, lister(saver)) for label, saver in self.savers.items()]
        ops += self.extra_list
        got = interleave_rounds(ops, calls=list_calls, rounds=self.rounds, warmup=5)
        out.listed.update({label: got[label] for label in self.savers})
        out.extra.update({op.name: got[op.name] for op in self.extra_list})

        ops = []
        for label, saver in self.savers.items():
            ops += _put_ops(label, Replay(conversation, saver, self.thread("put")))
            ops += _writes_ops(label, Replay(conversation, saver, self.thread("writes")))
        ops += self.extra_put
        got = interleave_rounds(ops, calls=self.calls, rounds=self.rounds, warmup=self.warmup)
        for label in self.savers:
            out.put[label] = got[f"put|{label}"]
            out.writes[label] = got[f"writes|{label}"]
        out.extra.update({op.name: got[op.name] for op in self.extra_put})
        return out


def _put_ops(label: str, replay: Any) -> list[Op]:
    """``put`` of checkpoint ``i + 1``; the writes made from checkpoint ``i`` go first, untimed."""
    args: list[Any] = []
    replay.put(0)

    def setup(i: int) -> None:
        replay.writes_of(i)
        args[:] = replay.put_args(i + 1)

    put = replay.saver.put
    return [Op(f"put|{label}", lambda i: put(*args), setup)]


def _writes_ops(label: str, replay: Any) -> list[Op]:
    """The ``i``-th ``put_writes`` call; the puts it follows go first, untimed."""
    args: list[Any] = []
    done = [0]  # checkpoints put so far

    def setup(j: int) -> None:
        k = replay.tasks[j][0]
        while done[0] <= k:
            replay.put(done[0])
            done[0] += 1
        args[:] = replay.writes_args(j)

    put_writes = replay.saver.put_writes
    return [Op(f"writes|{label}", lambda i: put_writes(*args), setup)]


def sqlite_saver(path: Path, synchronous: str | None) -> tuple[Any, str]:
    """LangGraph's SqliteSaver on a file, and its synchronous level as SQLite reports it.

    ``synchronous=None`` leaves the connection as shipped.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous={synchronous}")
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return saver, names.get(level, str(level))


@contextmanager
def _closing(savers: dict[str, Any]) -> Iterator[None]:
    try:
        yield
    finally:
        for saver in savers.values():
            store = getattr(saver, "store", None)
            conn = getattr(saver, "conn", None)
            close = getattr(store, "close", None) or getattr(conn, "close", None)
            if close is not None:
                close()


def saver_rows(
    tmp: Path, *, calls: int, lengths: list[int], rounds: int, seed: object = 7
) -> tuple[dict[str, Any], dict[str, str]]:
    """``swarmstate benchmark``'s checkpointer rows: ours and LangGraph's, side by side.

    In memory (``SwarmStateSaver(Store)`` and ``InMemorySaver``) and durable
    at NORMAL (``SwarmStateSaver(DiskStore)`` and ``SqliteSaver``), each pair
    in its own interleaved rounds, on the recorded conversation. Returns the
    rows (``"group/saver"`` to op to latency stats) and what was skipped.
    """
    skipped: dict[str, str] = {}
    try:
        from langgraph.checkpoint.memory import InMemorySaver

        from swarmstate._bench.conversation import Conversation
        from swarmstate.integrations.langgraph import SwarmStateSaver
    except ImportError as exc:
        skipped["savers"] = f'{exc} (install it with: pip install "pyswarmstate[langgraph]")'
        return {}, skipped
    from swarmstate.backends.memory import Store

    groups: dict[str, dict[str, Any]] = {
        "memory": {
            "SwarmStateSaver(Store)": SwarmStateSaver(Store()),
            "InMemorySaver": InMemorySaver(),
        }
    }
    try:
        from swarmstate.backends.disk import DiskStore

        durable: dict[str, Any] = {
            "SwarmStateSaver(DiskStore NORMAL)": SwarmStateSaver(
                DiskStore(tmp / "saver.db", synchronous="NORMAL")
            )
        }
        try:
            durable["SqliteSaver NORMAL"] = sqlite_saver(tmp / "peer.sqlite", "NORMAL")[0]
        except ImportError as exc:
            skipped["SqliteSaver"] = f"{exc} (pip install langgraph-checkpoint-sqlite)"
        groups["durable"] = durable
    except ImportError as exc:
        skipped["durable savers"] = f'{exc} (install it with: pip install "pyswarmstate[disk]")'
    rows: dict[str, Any] = {}
    conversation = None
    for name, savers in groups.items():
        group = Group(savers, lengths, calls, rounds, warmup=min(20, calls))
        if conversation is None:
            conversation = Conversation.record(seed, group.steps_needed())
        with _closing(savers):
            got = group.run(conversation)
        for label in savers:
            row: dict[str, Any] = {
                f"latest_{n}": round_stats(got.latest[(label, n)]) for n in lengths
            }
            row["list10"] = round_stats(got.listed[label])
            row["put"] = round_stats(got.put[label])
            row["put_writes"] = round_stats(got.writes[label])
            rows[f"{name}/{label}"] = row
    return rows, skipped

"""Ad-hoc probe: SwarmStateSaver against LangGraph's savers on realistic checkpoints.

Not the benchmark of record (that is benchmarks/run.py); a quick way to see
per-call p50s while changing the saver. Usage:

    python benchmarks/saver_probe.py [--n 2000] [--backends memory,disk]
"""

from __future__ import annotations

import argparse
import operator
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from swarmstate import Store
from swarmstate.integrations.langgraph import SwarmStateSaver


class LcState(TypedDict):
    messages: Annotated[list[Any], add_messages]
    turns: Annotated[int, operator.add]
    topic: str


class DictState(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]
    turns: Annotated[int, operator.add]
    topic: str


def _text(seed: int, alphabet: str) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(480))


def build_checkpoint(saver: BaseCheckpointSaver[Any], lc: bool) -> tuple[Any, Any, dict[str, Any]]:
    """Run a real graph until the state holds ~20 messages of ~500 B."""

    def chat(state: Any) -> dict[str, Any]:
        text = _text(len(state["messages"]), "abcdefghij ")
        msg: Any = AIMessage(content=text) if lc else {"role": "ai", "content": text}
        return {"messages": [msg], "turns": 1, "topic": "probe"}

    builder = StateGraph(LcState if lc else DictState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "seed"}}
    for i in range(10):
        text = _text(i, "klmnopqrst ")
        msg: Any = HumanMessage(content=text) if lc else {"role": "human", "content": text}
        graph.invoke({"messages": [msg]}, config)
    tup = saver.get_tuple(config)
    assert tup is not None
    assert len(tup.checkpoint["channel_values"]["messages"]) == 20
    return tup.checkpoint, tup.metadata, tup.config


def p50s(fns: list[Callable[[], Any]], runs: int) -> list[float]:
    """Median microseconds of each callable, calls interleaved so load drift hits all alike."""
    for _ in range(min(50, runs)):
        for fn in fns:
            fn()
    samples: list[list[int]] = [[] for _ in fns]
    clock = time.perf_counter_ns
    for _ in range(runs):
        for fn, out in zip(fns, samples, strict=False):
            t0 = clock()
            fn()
            out.append(clock() - t0)
    return [statistics.median(s) / 1000.0 for s in samples]


class Feeder:
    """Puts successive checkpoints of one thread the way the runtime does."""

    def __init__(self, saver: BaseCheckpointSaver[Any], base: Any, meta: Any, tid: str) -> None:
        self.saver, self.base, self.meta = saver, base, meta
        self.config: dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        self.versions = dict(base["channel_versions"])

    def put(self) -> None:
        cp = copy_checkpoint(self.base)
        cp["id"] = str(uuid6(clock_seq=0))
        new = {}
        for ch in ("messages", "turns", "branch:to:chat"):
            if ch in self.versions:
                self.versions[ch] = new[ch] = self.saver.get_next_version(self.versions[ch], None)
        cp["channel_versions"] = dict(self.versions)
        self.config = self.saver.put(self.config, cp, self.meta, new)


def probe(
    makers: dict[str, Callable[[], BaseCheckpointSaver[Any]]], base: Any, meta: Any, n: int
) -> dict[str, dict[str, float]]:
    """p50 of put, get_tuple(latest) at 5/50/n checkpoints and list(limit=10) at n."""
    names = list(makers)
    out: dict[str, dict[str, float]] = {name: {} for name in names}
    feeders = [Feeder(makers[name](), base, meta, "put") for name in names]
    for name, value in zip(names, p50s([f.put for f in feeders], 500), strict=False):
        out[name]["put"] = value
    for size in (5, 50, n):
        savers = []
        for name in names:
            saver = makers[name]()
            f = Feeder(saver, base, meta, f"t{size}")
            for _ in range(size):
                f.put()
            savers.append(saver)
        cfg: Any = {"configurable": {"thread_id": f"t{size}", "checkpoint_ns": ""}}
        gets = [lambda s=s, c=cfg: s.get_tuple(c) for s in savers]
        for name, value in zip(names, p50s(gets, 500), strict=False):
            out[name][f"get@{size}"] = value
        if size == n:
            lists = [lambda s=s, c=cfg: list(s.list(c, limit=10)) for s in savers]
            for name, value in zip(names, p50s(lists, 100), strict=False):
                out[name][f"list10@{size}"] = value
    for name in names:
        print(f"{name:24s}", {k: round(v, 1) for k, v in out[name].items()}, flush=True)
    return out


def ratios(ours: dict[str, float], peer: dict[str, float], label: str) -> None:
    print(f"  {label}: " + ", ".join(f"{k} {ours[k] / peer[k]:.2f}x" for k in ours if k in peer))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--backends", default="memory,disk")
    ap.add_argument("--lc", action="store_true", help="LangChain message objects, not dicts")
    args = ap.parse_args()
    base, meta, _ = build_checkpoint(InMemorySaver(), args.lc)
    backends = args.backends.split(",")
    if "memory" in backends:
        r = probe(
            {"InMemorySaver": InMemorySaver, "ours-memory": lambda: SwarmStateSaver(Store())},
            base,
            meta,
            args.n,
        )
        ratios(r["ours-memory"], r["InMemorySaver"], "memory vs InMemorySaver")
        own = r["ours-memory"]
        print(f"  own latest read {args.n} vs 5: {own[f'get@{args.n}'] / own['get@5']:.2f}x")
    if "disk" in backends:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        tmp = Path(tempfile.mkdtemp())
        counter = iter(range(10**6))

        def sqlite(sync: str) -> BaseCheckpointSaver[Any]:
            conn = sqlite3.connect(tmp / f"s{next(counter)}.db", check_same_thread=False)
            saver = SqliteSaver(conn)
            saver.setup()
            if sync:
                conn.execute(f"PRAGMA synchronous={sync}")
            return saver

        makers: dict[str, Callable[[], BaseCheckpointSaver[Any]]] = {
            "SqliteSaver shipped": lambda: sqlite(""),
            "SqliteSaver NORMAL": lambda: sqlite("NORMAL"),
        }
        try:
            from swarmstate.backends.disk import DiskStore

            def disk(sync: str) -> BaseCheckpointSaver[Any]:
                return SwarmStateSaver(DiskStore(tmp / f"d{next(counter)}.db", synchronous=sync))

            makers["ours disk NORMAL"] = lambda: disk("NORMAL")
            makers["ours disk FULL"] = lambda: disk("FULL")
        except ImportError:
            print("DiskStore not available yet")
        r = probe(makers, base, meta, args.n)
        if "ours disk NORMAL" in r:
            normal, full = r["ours disk NORMAL"], r["ours disk FULL"]
            ratios(normal, r["SqliteSaver NORMAL"], "disk NORMAL vs SqliteSaver NORMAL")
            ratios(normal, r["SqliteSaver shipped"], "disk NORMAL vs SqliteSaver shipped")
            ratios(full, r["SqliteSaver shipped"], "disk FULL vs SqliteSaver shipped")
            print(
                f"  own latest read {args.n} vs 5: {normal[f'get@{args.n}'] / normal['get@5']:.2f}x"
            )


if __name__ == "__main__":
    main()

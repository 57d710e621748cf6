"""Floors for the one-record checkpoint: what the cheapest honest put, read and delete cost.

The runtime's own calls are captured first: eight real LangGraph graphs of
plain Python nodes (no model) run 60 turns each with ``durability="sync"``
over a recording ``InMemorySaver`` that deep-copies every ``put`` and
``put_writes``. Those calls (every turn, in order) are then replayed against
each candidate in rounds, the candidates' order rotated every round, and the
puts and pending writes of turns 20-59 are timed one call at a time. A round
writes a new thread and deletes it afterwards (untimed), so every round and
candidate starts from the same state.

Candidates (see :data:`MEMORY` and :data:`FILE`):

* in memory, beside ``InMemorySaver().put``: M1, the serializer over the
  changed channels and one dict insert of a record tuple (what
  ``InMemorySaver`` does, minus its one insert per blob); M2, the same bytes
  packed into one msgpack record set into a ``swarmstate.Store``; M3, today's
  ``SwarmStateSaver(Store())``;
* on a file, beside ``SqliteSaver`` (a ``sqlite3`` connection in WAL, NORMAL
  and FULL): D1, one INSERT of the record into a rowid table through apsw
  (WAL, NORMAL); D2, D1 with indexes on ``(id)`` and ``(run, id)``; D3, D2
  with the tombstone guard as a condition of the same INSERT; D4, D3 with every
  value above a threshold stored once as a content-addressed chunk row
  (INSERT OR IGNORE) in the same transaction; D5, today's
  ``SwarmStateSaver(DiskStore(path))``.

A record holds the whole checkpoint: the changed channels serialized by this
put, the unchanged ones' bytes (or chunk references) taken from the parent's
record, which the writer keeps from the thread's previous put (the runtime
always puts on top of the last one), so a latest read is one row plus its
pending writes. Then the latest read (50 and 2,000 checkpoints), the put
of pending writes (one row), ``delete_thread`` over many threads (one
transaction), and the bytes each layout stores after 60 turns.

Run from the repository root (PYTHONPATH at the repository)::

    python -m benchmarks.floors --quick        # a few minutes
    python -m benchmarks.floors                # the full run, 20,000 threads

The result goes to ``benchmarks/floors.json`` (``--out`` to change it).
"""

import argparse
import copy
import gc
import hashlib
import importlib.metadata
import json
import operator
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import pairwise
from typing import Annotated, Any, TypedDict

import apsw
import ormsgpack
from langgraph.checkpoint.base import get_checkpoint_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from swarmstate import Store
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver

TURNS = 60
TIMED_FROM = 20  # turns 20-59 are timed
VOCABULARY = 4_000
THRESHOLDS = (512, 2_048, 8_192)

# ---------------------------------------------------------------- the shapes


class Words:
    """Seeded, non-repetitive text (PostgreSQL's TOAST and zlib would squeeze repeats)."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = [
            "".join(self.rng.choices(letters, k=self.rng.randint(2, 10))) for _ in range(VOCABULARY)
        ]

    def text(self, size: int) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            sentence = " ".join(self.rng.choices(self.words, k=self.rng.randint(6, 16)))
            out.append(sentence.capitalize() + self.rng.choice(".,;?!"))
            length += len(out[-1]) + 1
        return " ".join(out)[:size]


def _chain(state: Any, nodes: dict[str, Any]) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(state)
    names = list(nodes)
    for name in names:
        builder.add_node(name, nodes[name])
    builder.add_edge(START, names[0])
    for a, b in pairwise(names):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


def _window(size: int) -> Callable[[list[Any], list[Any]], list[Any]]:
    def keep(old: list[Any], new: list[Any]) -> list[Any]:
        return (old + new)[-size:]

    return keep


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {**old, **new}


def shape_stream(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    """A window of 20 dict messages of ~200 bytes; each step writes 3 pending writes."""

    class State(TypedDict, total=False):
        messages: Annotated[list[dict[str, str]], _window(20)]
        notes: dict[str, str]
        turn: int

    def node(role: str) -> Callable[[Any], dict[str, Any]]:
        def run(state: Any) -> dict[str, Any]:
            notes = dict(state.get("notes") or {})
            notes[f"fact-{w.rng.randrange(6)}"] = w.text(60)
            return {"messages": [{"role": role, "content": w.text(200)}], "notes": notes}

        return run

    nodes = {"agent": node("assistant"), "tool": node("tool"), "answer": node("assistant")}

    def turn_input(turn: int) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": w.text(200)}], "turn": turn}

    return _chain(State, nodes), turn_input


def _dict_messages(w: Words, reducer: Any) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    class State(TypedDict):
        messages: Annotated[list[dict[str, str]], reducer]
        turn: int

    def node(role: str, size: int) -> Callable[[Any], dict[str, Any]]:
        def run(state: Any) -> dict[str, Any]:
            return {"messages": [{"role": role, "content": w.text(size)}]}

        return run

    nodes = {
        "agent": node("assistant", 150),
        "tool": node("tool", 300),
        "answer": node("assistant", 250),
    }

    def turn_input(turn: int) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": w.text(200)}], "turn": turn}

    return _chain(State, nodes), turn_input


def _lc_state() -> Any:
    from langchain_core.messages import AnyMessage
    from langgraph.graph.message import add_messages

    class Chat(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]
        turn: int

    return Chat


def _lc_node(w: Words, name: str, size: int) -> Callable[[Any], dict[str, Any]]:
    from langchain_core.messages import AIMessage

    def run(state: Any) -> dict[str, Any]:
        turn = state["turn"]
        return {"messages": [AIMessage(content=w.text(size), id=f"{name}-{turn}")]}

    return run


def _lc_input(w: Words) -> Callable[[int], dict[str, Any]]:
    from langchain_core.messages import HumanMessage

    def turn_input(turn: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(content=w.text(200), id=f"user-{turn}")], "turn": turn}

    return turn_input


def shape_lc_grow(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    nodes = {n: _lc_node(w, n, s) for n, s in (("agent", 150), ("tool", 300), ("answer", 250))}
    return _chain(_lc_state(), nodes), _lc_input(w)


def shape_subgraph(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    state = _lc_state()
    inner = _chain(state, {"think": _lc_node(w, "think", 150), "call": _lc_node(w, "call", 80)})
    nodes = {
        "agent": inner.compile(),
        "tool": _lc_node(w, "tool", 300),
        "answer": _lc_node(w, "answer", 250),
    }
    return _chain(state, nodes), _lc_input(w)


def shape_docs(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    class State(TypedDict):
        docs: Annotated[dict[str, str], _merge]
        turn: int

    def edit(state: Any) -> dict[str, Any]:
        return {"docs": {f"doc-{w.rng.randrange(60):02d}": w.text(1_000)}}

    first = {f"doc-{k:02d}": w.text(1_000) for k in range(60)}

    def turn_input(turn: int) -> dict[str, Any]:
        return {"docs": dict(first), "turn": turn} if turn == 0 else {"turn": turn}

    return _chain(State, {"agent": edit, "tool": edit, "answer": edit}), turn_input


def shape_plan(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    class State(TypedDict):
        plan: list[dict[str, Any]]
        turn: int

    def item(k: int) -> dict[str, Any]:
        return {
            "id": f"step-{k:02d}",
            "title": w.text(40),
            "status": w.rng.choice(("todo", "doing", "done", "blocked")),
            "detail": w.text(200),
        }

    def regenerate(state: Any) -> dict[str, Any]:
        # Wholesale: new objects throughout, a third of the items rewritten.
        changed = set(w.rng.sample(range(30), 10))
        return {"plan": [item(k) if k in changed else dict(i) for k, i in enumerate(state["plan"])]}

    first = [item(k) for k in range(30)]

    def turn_input(turn: int) -> dict[str, Any]:
        return {"plan": [dict(i) for i in first], "turn": turn} if turn == 0 else {"turn": turn}

    return _chain(State, {"agent": regenerate, "tool": regenerate, "answer": regenerate}), (
        turn_input
    )


def shape_draft(w: Words) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    class State(TypedDict):
        draft: str
        turn: int

    def rewrite(state: Any) -> dict[str, Any]:
        middle = state["draft"][400:-400]
        return {"draft": w.text(400) + middle + w.text(400)}

    first = w.text(40_000)

    def turn_input(turn: int) -> dict[str, Any]:
        return {"draft": first, "turn": turn} if turn == 0 else {"turn": turn}

    return _chain(State, {"agent": rewrite, "tool": rewrite, "answer": rewrite}), turn_input


SHAPES: dict[str, tuple[str, Callable[[Words], tuple[Any, Callable[[int], dict[str, Any]]]]]] = {
    "stream": ("plain-dict stream: window of 20 dict messages, 3 writes a step", shape_stream),
    "dict_grow": (
        "dict messages growing (`operator.add`)",
        lambda w: _dict_messages(w, operator.add),
    ),
    "lc_grow": ("pydantic messages growing (`add_messages`)", shape_lc_grow),
    "dict_window": ("window of 24 dict messages", lambda w: _dict_messages(w, _window(24))),
    "docs": ("dict of 60 ~1 kB documents, one rewritten per node", shape_docs),
    "plan": ("30-item plan regenerated wholesale per node", shape_plan),
    "draft": ("40 kB plain-text scratchpad rewritten at its ends", shape_draft),
    "subgraph": ("`add_messages`, the agent a compiled subgraph", shape_subgraph),
}

# ------------------------------------------------------------ the recording


def _config_copy(config: Any) -> dict[str, Any]:
    """A deep copy of what a saver reads from a config (a subgraph's also holds the runtime's
    locks and callbacks under ``__``-prefixed keys, which no saver stores)."""
    conf = {k: v for k, v in config["configurable"].items() if not k.startswith("__")}
    return copy.deepcopy(
        {**{k: config[k] for k in ("metadata",) if k in config}, "configurable": conf}
    )


class Recorder(InMemorySaver):
    """InMemorySaver that keeps a deep copy of every put and put_writes, with its turn."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []
        self.turn = 0

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(
            (
                "put",
                self.turn,
                _config_copy(config),
                copy.deepcopy(checkpoint),
                copy.deepcopy(metadata),
                copy.deepcopy(new_versions),
            )
        )
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(
            ("writes", self.turn, _config_copy(config), copy.deepcopy(writes), task_id, task_path)
        )
        super().put_writes(config, writes, task_id, task_path)


_RECORDED: dict[tuple[str, int], list[tuple[Any, ...]]] = {}


def record(shape: str, seed: int) -> list[tuple[Any, ...]]:
    """The calls of ``shape``'s 60 turns (recorded once per process)."""
    if (shape, seed) not in _RECORDED:
        _RECORDED[shape, seed] = _record(shape, seed)
    return _RECORDED[shape, seed]


def _record(shape: str, seed: int) -> list[tuple[Any, ...]]:
    words = Words(f"{seed}:{shape}")
    builder, turn_input = SHAPES[shape][1](words)
    recorder = Recorder()
    graph = builder.compile(checkpointer=recorder)
    config = {"configurable": {"thread_id": f"capture-{shape}"}}
    for turn in range(TURNS):
        recorder.turn = turn
        graph.invoke(turn_input(turn), config, durability="sync")
    return recorder.calls


def for_thread(calls: list[tuple[Any, ...]], thread: str) -> list[tuple[Any, ...]]:
    """The calls with their thread id replaced (made before any timing)."""
    out = []
    for call in calls:
        config = dict(call[2])
        config["configurable"] = {**config["configurable"], "thread_id": thread}
        out.append((call[0], call[1], config, *call[3:]))
    return out


# ---------------------------------------------------------------- candidates

SERDE = JsonPlusSerializer()
_dumps = SERDE.dumps_typed
_loads = SERDE.loads_typed
_pack = ormsgpack.packb
_unpack = ormsgpack.unpackb


def _skeleton(checkpoint: Any) -> dict[str, Any]:
    return {k: v for k, v in checkpoint.items() if k != "channel_values"}


class Candidate:
    name = ""
    peer = False

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        raise NotImplementedError

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        raise NotImplementedError

    def drop(self, thread: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Saver(Candidate):
    """A checkpointer as it is."""

    def __init__(self, name: str, saver: Any, peer: bool, close: Callable[[], None]) -> None:
        self.name, self.saver, self.peer, self._close = name, saver, peer, close
        self.put = saver.put  # type: ignore[method-assign]
        self.put_writes = saver.put_writes  # type: ignore[method-assign]

    def drop(self, thread: str) -> None:
        self.saver.delete_thread(thread)

    def close(self) -> None:
        self._close()


class Records:
    """What a one-record writer needs: the values of each thread's last record."""

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.misses = 0

    def values(
        self, thread: str, ns: str, parent: str | None, checkpoint: Any, new_versions: Any, ser: Any
    ) -> dict[str, Any]:
        """Every channel's stored form: new ones from ``ser``, the others from the parent."""
        channel_values = checkpoint["channel_values"]
        out = {k: ser(channel_values[k]) for k in new_versions if k in channel_values}
        if len(out) < len(channel_values):
            held = self.last.get((thread, ns))
            if held is None or held[0] != parent:
                # A real writer reads the parent record here; the replay never needs to.
                self.misses += 1
                held = (parent or "", {})
            before = held[1]
            for k in channel_values:
                if k not in out and k in before:
                    out[k] = before[k]
        self.last[(thread, ns)] = (checkpoint["id"], out)
        return out


class M1(Candidate):
    name = "M1 serialize + 1 dict insert"

    def __init__(self) -> None:
        self.records: dict[tuple[str, str, str], Any] = {}
        self.writes: dict[tuple[str, str, str, str], Any] = {}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        c = checkpoint.copy()
        values = c.pop("channel_values")
        blobs = {k: _dumps(values[k]) if k in values else ("empty", b"") for k in new_versions}
        self.records[(conf["thread_id"], conf["checkpoint_ns"], checkpoint["id"])] = (
            _dumps(c),
            _dumps(get_checkpoint_metadata(config, metadata)),
            conf.get("checkpoint_id"),
            blobs,
        )

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        key = (conf["thread_id"], conf["checkpoint_ns"], conf["checkpoint_id"], task_id)
        self.writes[key] = (task_path, [(c, _dumps(v)) for c, v in writes])

    def drop(self, thread: str) -> None:
        for d in (self.records, self.writes):
            for k in [k for k in d if k[0] == thread]:
                del d[k]


class M2(Candidate):
    name = "M2 one msgpack record in Store"

    def __init__(self) -> None:
        self.store = Store()
        self.held = Records()

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        thread, ns = conf["thread_id"], conf["checkpoint_ns"]
        parent = conf.get("checkpoint_id")
        values = self.held.values(thread, ns, parent, checkpoint, new_versions, _dumps)
        md = _dumps(get_checkpoint_metadata(config, metadata))[1]
        self.store.set(
            f"cp\x1f{thread}\x1f{ns}", checkpoint["id"], [md, parent, _skeleton(checkpoint), values]
        )

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        row = [task_path, [(c, *_dumps(v)) for c, v in writes]]
        key = f"{conf['checkpoint_id']}\x1f{task_id}"
        self.store.set(f"w\x1f{conf['thread_id']}\x1f{conf['checkpoint_ns']}", key, row)

    def drop(self, thread: str) -> None:
        self.store.delete_prefix(f"cp\x1f{thread}\x1f")
        self.store.delete_prefix(f"w\x1f{thread}\x1f")

    def latest(self, thread: str, ns: str) -> Any:
        found = self.store.items(f"cp\x1f{thread}\x1f{ns}", reverse=True, limit=1)
        ((cid, (md, parent, skeleton, values)),) = found
        checkpoint = dict(skeleton)
        checkpoint["channel_values"] = {k: _loads(tuple(v)) for k, v in values.items()}
        pending = []
        for _key, (_path, rows) in self.store.items(
            f"w\x1f{thread}\x1f{ns}", start=f"{cid}\x1f", stop=f"{cid}\x20"
        ):
            pending.extend((c, _loads((t, b))) for c, t, b in rows)
        return checkpoint, _loads(("msgpack", md)), parent, pending


SCHEMA = """
CREATE TABLE IF NOT EXISTS records(
  thread TEXT NOT NULL, ns TEXT NOT NULL, id TEXT NOT NULL, parent TEXT, run TEXT,
  record BLOB NOT NULL, PRIMARY KEY (thread, ns, id));
CREATE TABLE IF NOT EXISTS writes(
  thread TEXT NOT NULL, ns TEXT NOT NULL, id TEXT NOT NULL, task TEXT NOT NULL,
  record BLOB NOT NULL, PRIMARY KEY (thread, ns, id, task));
CREATE TABLE IF NOT EXISTS tombstones(thread TEXT PRIMARY KEY, at INTEGER) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, hash BLOB NOT NULL, data BLOB NOT NULL);
"""
INDEXES = """
CREATE INDEX IF NOT EXISTS records_by_id ON records(id);
CREATE INDEX IF NOT EXISTS records_by_run ON records(run, id);
"""


def _apsw(path: str, synchronous: str = "NORMAL") -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


class D(Candidate):
    """D1 (``indexes=False``), D2 (``indexes``), D3 (``guard``), D4 (``threshold``)."""

    def __init__(
        self, name: str, path: str, indexes: bool, guard: bool, threshold: int | None
    ) -> None:
        self.name, self.path = name, path
        self.conn = _apsw(path)
        self.conn.execute(SCHEMA + (INDEXES if indexes else ""))
        if guard:
            # Tombstones of other threads, so the guard's lookup is a real B-tree probe.
            self.conn.execute("BEGIN")
            for k in range(1_000):
                self.conn.execute("INSERT OR IGNORE INTO tombstones VALUES(?, 0)", (f"gone-{k}",))
            self.conn.execute("COMMIT")
        self.guard, self.threshold = guard, threshold
        self.held = Records()
        self.insert = (
            "INSERT INTO records SELECT ?1, ?2, ?3, ?4, ?5, ?6"
            " WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE thread = ?1)"
            if guard
            else "INSERT INTO records VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        )
        self.chunked = 0

    def _form(self, value: Any) -> Any:
        kind, data = _dumps(value)
        if self.threshold is None or len(data) < self.threshold:
            return (kind, data)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        self.new_chunks.append((digest, data))
        return (kind, None, digest)

    def _chunks(self) -> None:
        execute = self.conn.execute
        for digest, data in self.new_chunks:
            # The rowid is the hash's first 8 bytes: one B-tree, no index; the full
            # hash in the row tells a collision (which would need a second slot).
            execute(
                "INSERT OR IGNORE INTO chunks VALUES (?, ?, ?)",
                (int.from_bytes(digest[:8], "big", signed=True), digest, data),
            )
        self.chunked += len(self.new_chunks)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        thread, ns = conf["thread_id"], conf["checkpoint_ns"]
        parent = conf.get("checkpoint_id")
        self.new_chunks: list[tuple[bytes, bytes]] = []
        values = self.held.values(thread, ns, parent, checkpoint, new_versions, self._form)
        md = get_checkpoint_metadata(config, metadata)
        run = md.get("run_id")
        row = _pack([_dumps(md)[1], _skeleton(checkpoint), values])
        args = (thread, ns, checkpoint["id"], parent, run, row)
        if self.new_chunks:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self._chunks()
                self.conn.execute(self.insert, args)
                if self.guard and not self.conn.changes():
                    raise RuntimeError(f"thread {thread!r} was deleted")
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
        else:
            self.conn.execute(self.insert, args)
            if self.guard and not self.conn.changes():
                raise RuntimeError(f"thread {thread!r} was deleted")

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        self.new_chunks = []
        row = _pack([task_path, [(c, *self._form(v)) for c, v in writes]])
        args = (conf["thread_id"], conf["checkpoint_ns"], conf["checkpoint_id"], task_id, row)
        sql = "INSERT OR IGNORE INTO writes VALUES (?, ?, ?, ?, ?)"
        if self.new_chunks:
            self.conn.execute("BEGIN IMMEDIATE")
            self._chunks()
            self.conn.execute(sql, args)
            self.conn.execute("COMMIT")
        else:
            self.conn.execute(sql, args)

    def drop(self, thread: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("DELETE FROM records WHERE thread = ?", (thread,))
        self.conn.execute("DELETE FROM writes WHERE thread = ?", (thread,))
        self.conn.execute("COMMIT")

    def clear_chunks(self) -> None:
        self.conn.execute("DELETE FROM chunks")

    def stored(self, thread: str) -> dict[str, int]:
        q = self.conn.execute
        records = q(
            "SELECT total(length(record) + ifnull(length(parent), 0) + ifnull(length(run), 0))"
            " FROM records WHERE thread=?",
            (thread,),
        )
        writes = q("SELECT total(length(record)) FROM writes WHERE thread=?", (thread,))
        # With the guard, the file also holds 1,000 tombstones of other threads (~20 kB).
        chunks = q("SELECT total(length(data) + length(hash) + 8) FROM chunks")
        out = {
            "records": int(next(records)[0]),
            "writes": int(next(writes)[0]),
            "chunks": int(next(chunks)[0]),
        }
        out["total"] = out["records"] + out["writes"] + out["chunks"]
        out["file"] = _file_bytes(lambda sql: next(q(sql))[0])
        return out

    def latest(self, thread: str, ns: str) -> Any:
        found = self.conn.execute(
            "SELECT id, parent, record FROM records"
            " WHERE thread=? AND ns=? ORDER BY id DESC LIMIT 1",
            (thread, ns),
        ).fetchone()
        cid, parent, row = found
        md, skeleton, values = _unpack(row)
        checkpoint = dict(skeleton)
        checkpoint["channel_values"] = {k: _loads(tuple(v)) for k, v in values.items()}
        pending = []
        for (data,) in self.conn.execute(
            "SELECT record FROM writes WHERE thread=? AND ns=? AND id=? ORDER BY task",
            (thread, ns, cid),
        ):
            _path, rows = _unpack(data)
            pending.extend((c, _loads((t, b))) for c, t, b in rows)
        return checkpoint, _loads(("msgpack", md)), parent, pending

    def close(self) -> None:
        self.conn.close()


def sqlite_saver(name: str, path: str, synchronous: str) -> Saver:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    saver = SqliteSaver(conn)
    saver.setup()
    return Saver(name, saver, True, conn.close)


def _file_bytes(one: Callable[[str], Any]) -> int:
    """Pages in use (the WAL's newer pages included), times the page size."""
    return int((one("PRAGMA page_count") - one("PRAGMA freelist_count")) * one("PRAGMA page_size"))


def sqlite_stored(saver: Any, thread: str) -> dict[str, int]:
    """The peer's payload: what its columns hold beside the keys (a record carries the same)."""
    cur = saver.conn.execute(
        "SELECT total(length(checkpoint) + length(metadata) + length(type)"
        " + ifnull(length(parent_checkpoint_id), 0)) FROM checkpoints WHERE thread_id=?",
        (thread,),
    )
    cps = int(cur.fetchone()[0])
    cur = saver.conn.execute(
        "SELECT total(length(value) + length(type) + length(channel) + length(task_path) + 8)"
        " FROM writes WHERE thread_id=?",
        (thread,),
    )
    writes = int(cur.fetchone()[0])
    out = {"records": cps, "writes": writes, "chunks": 0, "total": cps + writes}
    out["file"] = _file_bytes(lambda sql: saver.conn.execute(sql).fetchone()[0])
    return out


PEER_MEMORY = "InMemorySaver"
PEER_NORMAL = "SqliteSaver NORMAL"
PEER_FULL = "SqliteSaver FULL"
D_NAMES = {
    "D1": "D1 one INSERT (rowid table)",
    "D2": "D2 + indexes (id), (run, id)",
    "D3": "D3 + tombstone guard in the INSERT",
    "D5": "D5 SwarmStateSaver(DiskStore)",
}


def d4_name(threshold: int) -> str:
    return f"D4 + chunks >= {threshold} B"


def make_memory() -> list[Candidate]:
    peer = InMemorySaver()
    return [
        Saver(PEER_MEMORY, peer, True, lambda: None),
        M1(),
        M2(),
        Saver("M3 SwarmStateSaver(Store)", SwarmStateSaver(Store()), False, lambda: None),
    ]


def make_file(root: str) -> list[Candidate]:
    def p(name: str) -> str:
        return os.path.join(root, name)

    out: list[Candidate] = [
        sqlite_saver(PEER_NORMAL, p("peer-normal.sqlite"), "NORMAL"),
        sqlite_saver(PEER_FULL, p("peer-full.sqlite"), "FULL"),
        D(D_NAMES["D1"], p("d1.sqlite"), indexes=False, guard=False, threshold=None),
        D(D_NAMES["D2"], p("d2.sqlite"), indexes=True, guard=False, threshold=None),
        D(D_NAMES["D3"], p("d3.sqlite"), indexes=True, guard=True, threshold=None),
    ]
    for t in THRESHOLDS:
        out.append(D(d4_name(t), p(f"d4-{t}.sqlite"), indexes=True, guard=True, threshold=t))
    store = DiskStore(p("d5.swarm"))
    out.append(Saver(D_NAMES["D5"], SwarmStateSaver(store), False, store.close))
    return out


def item_chunk_bytes(calls: list[tuple[Any, ...]], inline_below: int = 512) -> dict[str, int]:
    """Bytes if values were shared item by item (not timed: what sharing inside a value saves).

    A list's items (a dict's entries) are serialized one by one and grouped into
    content-defined chunks (a chunk ends after an item whose hash's first byte is
    below 64: four items on average), each stored once under its 16-byte hash; a
    record holds its small values and the hashes of its chunks. A string is one
    chunk. A growing list then stores each item about once.
    """
    seen: set[bytes] = set()
    chunk_bytes = record_bytes = 0
    for call in calls:
        if call[0] != "put":
            continue
        checkpoint, metadata = call[3], call[4]
        record_bytes += len(_dumps(metadata)[1]) + len(_pack(_skeleton(checkpoint)))
        for value in checkpoint["channel_values"].values():
            whole = _dumps(value)[1]
            if len(whole) < inline_below:
                record_bytes += len(whole) + 10
                continue
            if isinstance(value, list):
                parts = [_dumps(v)[1] for v in value]
            elif isinstance(value, dict):
                parts = [_dumps([k, v])[1] for k, v in value.items()]
            else:
                parts = [whole]
            group: list[bytes] = []
            for part in parts:
                group.append(part)
                if hashlib.blake2b(part, digest_size=16).digest()[0] < 64 or part is parts[-1]:
                    data = b"".join(group)
                    digest = hashlib.blake2b(data, digest_size=16).digest()
                    if digest not in seen:
                        seen.add(digest)
                        chunk_bytes += len(data) + 16
                    record_bytes += 16
                    group = []
    return {"records": record_bytes, "chunks": chunk_bytes, "total": record_bytes + chunk_bytes}


def hash_costs(calls: list[tuple[Any, ...]], rounds: int) -> dict[str, Any]:
    """What content addressing costs a put: hashing its changed values at or above each threshold.

    The serializer's bytes are made first; each round times every hash over the
    timed puts' values, the functions interleaved.
    """
    timed = [c for c in calls if c[0] == "put" and c[1] >= TIMED_FROM]
    values = [
        [_dumps(c[3]["channel_values"][k])[1] for k in c[5] if k in c[3]["channel_values"]]
        for c in timed
    ]
    hashes: dict[str, Callable[[bytes], Any]] = {
        "blake2b-128": lambda b: hashlib.blake2b(b, digest_size=16).digest(),
        "sha1": lambda b: hashlib.sha1(b).digest(),
        "sha256": lambda b: hashlib.sha256(b).digest(),
    }
    out: dict[str, Any] = {}
    clock = time.perf_counter_ns
    for threshold in THRESHOLDS:
        times: dict[str, list[list[int]]] = {k: [] for k in hashes}
        names = list(hashes)
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                fn, got = hashes[name], []
                for put in values:
                    t0 = clock()
                    for data in put:
                        if len(data) >= threshold:
                            fn(data)
                    got.append(clock() - t0)
                times[name].append(got)
        out[f">= {threshold} B"] = {
            name: round(statistics.median(t for r in rounds_ for t in r) / 1_000, 2)
            for name, rounds_ in times.items()
        }
    out["unit"] = "p50 µs per put"
    return out


# ------------------------------------------------------------------- timing


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(times: dict[str, list[list[int]]], peers: list[str]) -> dict[str, dict[str, Any]]:
    """p50/p90/p99 per candidate (µs), and the ratio of p50s to each peer with its spread."""
    out: dict[str, dict[str, Any]] = {}
    for name, rounds in times.items():
        flat = [t / 1_000 for r in rounds for t in r]
        entry: dict[str, Any] = {
            "n": len(flat),
            "p50_us": round(statistics.median(flat), 2),
            "p90_us": round(pct(flat, 0.9), 2),
            "p99_us": round(pct(flat, 0.99), 2),
        }
        for peer in peers:
            base = [t / 1_000 for r in times[peer] for t in r]
            per_round = sorted(
                statistics.median(a) / statistics.median(b)
                for a, b in zip(rounds, times[peer], strict=True)
                if a and b
            )
            entry[f"vs {peer}"] = {
                "ratio": round(statistics.median(flat) / statistics.median(base), 3),
                "round_median": round(statistics.median(per_round), 3),
                "min": round(per_round[0], 3),
                "max": round(per_round[-1], 3),
            }
        out[name] = entry
    return out


def replay_rounds(
    shape: str,
    calls: list[tuple[Any, ...]],
    candidates: list[Candidate],
    rounds: int,
    on_first: Callable[[Candidate, str], None] | None = None,
) -> tuple[dict[str, list[list[int]]], dict[str, list[list[int]]]]:
    """Each round, each candidate (rotated order) replays every call in a new thread."""
    puts: dict[str, list[list[int]]] = {c.name: [] for c in candidates}
    writes: dict[str, list[list[int]]] = {c.name: [] for c in candidates}
    clock = time.perf_counter_ns
    for r in range(rounds):
        thread = f"{shape}-round-{r}"
        own = for_thread(calls, thread)
        order = candidates[r % len(candidates) :] + candidates[: r % len(candidates)]
        for cand in order:
            put_times: list[int] = []
            write_times: list[int] = []
            gc.collect()
            put, put_writes = cand.put, cand.put_writes
            for call in own:
                timed = call[1] >= TIMED_FROM
                if call[0] == "put":
                    t0 = clock()
                    put(call[2], call[3], call[4], call[5])
                    t1 = clock()
                    if timed:
                        put_times.append(t1 - t0)
                else:
                    t0 = clock()
                    put_writes(call[2], call[3], call[4], call[5])
                    t1 = clock()
                    if timed:
                        write_times.append(t1 - t0)
            puts[cand.name].append(put_times)
            writes[cand.name].append(write_times)
            if r == 0 and on_first is not None:
                on_first(cand, thread)
            cand.drop(thread)
            if isinstance(cand, D):
                cand.clear_chunks()
    return puts, writes


def run_shape(shape: str, seed: int, rounds: int, root: str, quick: bool) -> dict[str, Any]:
    t0 = time.time()
    calls = record(shape, seed)
    n_puts = sum(1 for c in calls if c[0] == "put")
    n_writes = [len(c[3]) for c in calls if c[0] == "writes" and c[1] >= TIMED_FROM]
    timed_puts = [c for c in calls if c[0] == "put" and c[1] >= TIMED_FROM]
    changed = [len(c[5]) for c in timed_puts]
    sizes = [sum(len(_dumps(v)[1]) for v in c[3]["channel_values"].values()) for c in timed_puts]
    out: dict[str, Any] = {
        "title": SHAPES[shape][0],
        "captured": {
            "puts": n_puts,
            "put_writes": sum(1 for c in calls if c[0] == "writes"),
            "timed_puts_per_round": len(timed_puts),
            "writes_per_put_writes_median": statistics.median(n_writes) if n_writes else 0,
            "changed_channels_median": statistics.median(changed),
            "state_bytes_p50": statistics.median(sizes),
            "state_bytes_max": max(sizes),
        },
    }
    memory = make_memory()
    puts, writes = replay_rounds(shape, calls, memory, rounds)
    out["memory_put"] = summary(puts, [PEER_MEMORY])
    out["memory_put_writes"] = summary(writes, [PEER_MEMORY]) if any(n_writes) else {}
    for c in memory:
        c.close()

    folder = tempfile.mkdtemp(prefix=f"floors-{shape}-", dir=root)
    stored: dict[str, dict[str, int]] = {}

    def measure_bytes(cand: Candidate, thread: str) -> None:
        if isinstance(cand, D):
            stored[cand.name] = cand.stored(thread)
        elif cand.name in (PEER_NORMAL,):
            stored[cand.name] = sqlite_stored(cand.saver, thread)  # type: ignore[attr-defined]
        elif cand.name == D_NAMES["D5"]:
            # Today's layout, for reference: the pages of its file (it holds this thread only).
            reader = apsw.Connection(
                os.path.join(folder, "d5.swarm"), flags=apsw.SQLITE_OPEN_READONLY
            )
            size = _file_bytes(lambda sql: next(reader.execute(sql))[0])
            reader.close()
            stored[cand.name] = {"records": 0, "writes": 0, "chunks": 0, "total": 0, "file": size}

    files = make_file(folder)
    try:
        puts, writes = replay_rounds(shape, calls, files, rounds, measure_bytes)
        peers = [PEER_NORMAL, PEER_FULL]
        out["file_put"] = summary(puts, peers)
        out["file_put_writes"] = summary(writes, peers) if any(n_writes) else {}
        peer_total = stored[PEER_NORMAL]["total"]
        peer_file = stored[PEER_NORMAL]["file"]
        out["bytes"] = {
            name: {
                **b,
                "vs peer": round(b["total"] / peer_total, 4),
                "file vs peer": round(b["file"] / peer_file, 4),
            }
            for name, b in stored.items()
        }
        items = item_chunk_bytes(calls)
        items["vs peer checkpoints"] = round(items["total"] / stored[PEER_NORMAL]["records"], 4)
        out["bytes_item_chunks"] = items
        out["chunks_written_per_round"] = {
            c.name: c.chunked // rounds for c in files if isinstance(c, D) and c.threshold
        }
    finally:
        for c in files:
            c.close()
        shutil.rmtree(folder, ignore_errors=True)
    out["seconds"] = round(time.time() - t0, 1)
    return out


# ------------------------------------------------------------- reads, deletes


def _interleave(
    fns: dict[str, Callable[[], Any]], rounds: int, per_round: int
) -> dict[str, list[list[int]]]:
    times: dict[str, list[list[int]]] = {k: [] for k in fns}
    names = list(fns)
    clock = time.perf_counter_ns
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fn = fns[name]
            gc.collect()
            got = []
            for _ in range(per_round):
                t0 = clock()
                fn()
                got.append(clock() - t0)
            times[name].append(got)
    return times


def _stream_calls(seed: int) -> list[tuple[Any, ...]]:
    return record("stream", seed)


def _fill(cands: list[Candidate], calls: list[tuple[Any, ...]], thread: str, count: int) -> None:
    """``count`` checkpoints in one thread: the stream's puts again, under new ids in order."""
    puts = [c for c in calls if c[0] == "put"]
    last_writes = [c for c in calls if c[0] == "writes"][-1:]  # one task's 3 writes
    parent = None
    for i in range(count):
        _, _, config, checkpoint, metadata, versions = puts[i % len(puts)]
        cid = f"1f0{i:013x}-0000-6000-8000-000000000000"
        conf = {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": parent}
        cp = {**checkpoint, "id": cid}
        # Every put writes every channel, so no value is carried from a record not written.
        nv = dict.fromkeys(cp["channel_values"], "1")
        for cand in cands:
            cand.put({**config, "configurable": conf}, cp, metadata, nv if i == 0 else versions)
        parent = cid
    for _, _, config, writes, task_id, path in last_writes:
        conf = {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": parent}
        for cand in cands:
            cand.put_writes({**config, "configurable": conf}, writes, task_id, path)


def run_reads(seed: int, rounds: int, root: str) -> dict[str, Any]:
    calls = _stream_calls(seed)
    out: dict[str, Any] = {}
    for count in (50, 2_000):
        folder = tempfile.mkdtemp(prefix="floors-read-", dir=root)
        try:
            peer_n = sqlite_saver(PEER_NORMAL, os.path.join(folder, "peer.sqlite"), "NORMAL")
            d3 = D(D_NAMES["D3"], os.path.join(folder, "d3.sqlite"), True, True, None)
            mem_peer = InMemorySaver()
            m2 = M2()
            mem = Saver(PEER_MEMORY, mem_peer, True, lambda: None)
            thread = f"read-{count}"
            _fill([peer_n, d3, mem, m2], calls, thread, count)
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            want = peer_n.saver.get_tuple(config)
            got = d3.latest(thread, "")
            assert got[0]["channel_values"] == want.checkpoint["channel_values"], "read differs"
            assert [w[0] for w in got[3]] == [w[1] for w in want.pending_writes], "writes differ"
            assert m2.latest(thread, "")[0]["channel_values"] == want.checkpoint["channel_values"]
            file_times = _interleave(
                {
                    PEER_NORMAL: partial(peer_n.saver.get_tuple, config),
                    "floor: record + writes, apsw": partial(d3.latest, thread, ""),
                },
                rounds,
                40,
            )
            mem_times = _interleave(
                {
                    PEER_MEMORY: partial(mem_peer.get_tuple, config),
                    "floor: record + writes, Store": partial(m2.latest, thread, ""),
                },
                rounds,
                40,
            )
            out[f"file_{count}"] = summary(file_times, [PEER_NORMAL])
            out[f"memory_{count}"] = summary(mem_times, [PEER_MEMORY])
            peer_n.close()
            d3.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return out


DELETE_FLOORS = {
    # label: (schema as D1 or D3, the tombstone written in the same transaction)
    "floor: D1 schema, one transaction": ("D1", False),
    "floor: D1 schema + tombstone, one transaction": ("D1", True),
    "floor: D2 schema (indexes), one transaction": ("D2", False),
    "floor: D3 schema + tombstone, one transaction": ("D3", True),
}


def run_deletes(seed: int, threads: int, samples: int, rounds: int, root: str) -> dict[str, Any]:
    """``delete_thread`` among ``threads`` threads of 5 checkpoints and 3 writes each."""
    calls = _stream_calls(seed)
    puts = [c for c in calls if c[0] == "put"][20:25]
    write = [c for c in calls if c[0] == "writes"][-1]
    folder = tempfile.mkdtemp(prefix="floors-delete-", dir=root)
    try:
        peer = sqlite_saver(PEER_NORMAL, os.path.join(folder, "peer.sqlite"), "NORMAL")
        floors = {
            label: D(
                label,
                os.path.join(folder, f"{k}.sqlite"),
                indexes=schema != "D1",
                guard=schema == "D3",
                threshold=None,
            )
            for k, (label, (schema, _)) in enumerate(DELETE_FLOORS.items())
        }
        # The rows each would write, made once, then inserted in bulk: the same rows
        # as their puts write, without spending the run on 100,000 puts.
        peer_rows, peer_writes, d_rows, d_writes = [], [], [], []
        for config, checkpoint, metadata in (c[2:5] for c in puts):
            kind, blob = _dumps(checkpoint)
            md = json.dumps(get_checkpoint_metadata(config, metadata)).encode()
            peer_rows.append((kind, blob, md))
            held = Records()
            values = held.values("t", "", None, checkpoint, checkpoint["channel_values"], _dumps)
            row = _pack([_dumps(metadata)[1], _skeleton(checkpoint), values])
            d_rows.append((metadata.get("run_id"), row))
        for idx, (channel, value) in enumerate(write[3]):
            peer_writes.append((write[4], idx, channel, *_dumps(value)))
        d_writes.append((write[4], _pack(["", [(c, *_dumps(v)) for c, v in write[3]]])))
        pc = peer.saver.conn
        for t in range(threads):
            th = f"thread-{t:06d}"
            # Ids ordered by time, as uuid6 ids are: threads written one after another.
            ids = [f"1f0{t:08x}-{i:04x}-6000-8000-000000000000" for i in range(len(puts))]
            parents = [None, *ids[:-1]]
            pc.executemany(
                "INSERT INTO checkpoints VALUES (?, '', ?, ?, ?, ?, ?)",
                [(th, i, p, *r) for i, p, r in zip(ids, parents, peer_rows, strict=True)],
            )
            pc.executemany(
                "INSERT INTO writes VALUES (?, '', ?, ?, '', ?, ?, ?, ?)",
                [(th, ids[-1], *w) for w in peer_writes],
            )
            for f in floors.values():
                if t % 500 == 0:
                    f.conn.execute("BEGIN")
                f.conn.executemany(
                    "INSERT INTO records VALUES (?, '', ?, ?, ?, ?)",
                    [(th, i, p, *r) for i, p, r in zip(ids, parents, d_rows, strict=True)],
                )
                f.conn.executemany(
                    "INSERT INTO writes VALUES (?, '', ?, ?, ?)",
                    [(th, ids[-1], *w) for w in d_writes],
                )
                if t % 500 == 499 or t == threads - 1:
                    f.conn.execute("COMMIT")
        pc.commit()
        rng = random.Random(seed)
        ways = 1 + len(floors)
        victims = rng.sample(range(threads), min(threads, samples * rounds * ways))
        queue = {name: iter(victims[k::ways]) for k, name in enumerate([PEER_NORMAL, *floors])}

        def floor_delete(f: D, tomb: bool) -> Callable[[], None]:
            def run() -> None:
                th = f"thread-{next(queue[f.name]):06d}"
                f.conn.execute("BEGIN IMMEDIATE")
                f.conn.execute("DELETE FROM records WHERE thread = ?", (th,))
                f.conn.execute("DELETE FROM writes WHERE thread = ?", (th,))
                if tomb:
                    f.conn.execute("INSERT OR REPLACE INTO tombstones VALUES (?, 1)", (th,))
                f.conn.execute("COMMIT")

            return run

        def peer_delete() -> None:
            peer.saver.delete_thread(f"thread-{next(queue[PEER_NORMAL]):06d}")

        fns: dict[str, Callable[[], None]] = {PEER_NORMAL: peer_delete}
        for label, (_, tomb) in DELETE_FLOORS.items():
            fns[label] = floor_delete(floors[label], tomb)
        out = summary(_interleave(fns, rounds, samples), [PEER_NORMAL])
        peer.close()
        for f in floors.values():
            f.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"threads": threads, "checkpoints_per_thread": 5, "times": out}


# ----------------------------------------------------------------- PostgreSQL

PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS records(
  thread TEXT NOT NULL, ns TEXT NOT NULL, id TEXT NOT NULL, parent TEXT, run TEXT,
  record BYTEA NOT NULL, PRIMARY KEY (thread, ns, id));
CREATE TABLE IF NOT EXISTS writes(
  thread TEXT NOT NULL, ns TEXT NOT NULL, id TEXT NOT NULL, task TEXT NOT NULL,
  record BYTEA NOT NULL, PRIMARY KEY (thread, ns, id, task));
CREATE TABLE IF NOT EXISTS tombstones(thread TEXT PRIMARY KEY, at BIGINT);
"""


def _pg_connect(dsn: str, schema: str) -> Any:
    import psycopg
    from psycopg.rows import dict_row

    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.execute(f"CREATE SCHEMA {schema}")
    admin.close()
    return psycopg.connect(
        dsn,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )


class P(Candidate):
    """P1 (one INSERT, one round trip) or P3 (indexes, the guard inside the INSERT)."""

    def __init__(self, name: str, dsn: str, schema: str, guard: bool) -> None:
        self.name, self.guard = name, guard
        self.conn = _pg_connect(dsn, schema)
        for statement in filter(str.strip, PG_SCHEMA.split(";")):
            self.conn.execute(statement)
        if guard:
            self.conn.execute("CREATE INDEX ON records(id)")
            self.conn.execute("CREATE INDEX ON records(run, id)")
            self.conn.execute(
                "INSERT INTO tombstones SELECT 'gone-' || k, 0 FROM generate_series(1, 1000) k"
            )
        self.held = Records()
        self.insert = (
            "INSERT INTO records SELECT %(t)s, %(n)s, %(i)s, %(p)s, %(r)s, %(b)s"
            " WHERE NOT EXISTS (SELECT 1 FROM tombstones WHERE thread = %(t)s)"
            if guard
            else "INSERT INTO records VALUES (%(t)s, %(n)s, %(i)s, %(p)s, %(r)s, %(b)s)"
        )

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        thread, ns = conf["thread_id"], conf["checkpoint_ns"]
        parent = conf.get("checkpoint_id")
        values = self.held.values(thread, ns, parent, checkpoint, new_versions, _dumps)
        md = get_checkpoint_metadata(config, metadata)
        row = _pack([_dumps(md)[1], _skeleton(checkpoint), values])
        args = {"t": thread, "n": ns, "i": checkpoint["id"], "p": parent, "r": md.get("run_id")}
        cur = self.conn.execute(self.insert, {**args, "b": row})
        if self.guard and cur.rowcount != 1:
            raise RuntimeError(f"thread {thread!r} was deleted")

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        row = _pack([task_path, [(c, *_dumps(v)) for c, v in writes]])
        self.conn.execute(
            "INSERT INTO writes VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (conf["thread_id"], conf["checkpoint_ns"], conf["checkpoint_id"], task_id, row),
        )

    def drop(self, thread: str) -> None:
        with self.conn.transaction():
            self.conn.execute("DELETE FROM records WHERE thread = %s", (thread,))
            self.conn.execute("DELETE FROM writes WHERE thread = %s", (thread,))

    def stored(self, thread: str) -> dict[str, int]:
        one = self.conn.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(record)), 0) FROM records"
            " WHERE thread = %(t)s) AS r, (SELECT coalesce(sum(pg_column_size(record)), 0)"
            " FROM writes WHERE thread = %(t)s) AS w",
            {"t": thread},
        ).fetchone()
        return {
            "records": int(one["r"]),
            "writes": int(one["w"]),
            "chunks": 0,
            "total": int(one["r"]) + int(one["w"]),
        }

    def close(self) -> None:
        self.conn.close()


def postgres_stored(saver: Any, thread: str) -> dict[str, int]:
    one = saver.conn.execute(
        "SELECT (SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)"
        " FROM checkpoints WHERE thread_id = %(t)s) AS c,"
        " (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM checkpoint_blobs"
        " WHERE thread_id = %(t)s) AS b,"
        " (SELECT coalesce(sum(pg_column_size(blob)), 0) FROM checkpoint_writes"
        " WHERE thread_id = %(t)s) AS w",
        {"t": thread},
    ).fetchone()
    cps = int(one["c"]) + int(one["b"])
    return {"records": cps, "writes": int(one["w"]), "chunks": 0, "total": cps + int(one["w"])}


PEER_PG = "PostgresSaver"


def run_postgres(dsn: str, shapes: list[str], seed: int, rounds: int) -> dict[str, Any]:
    """P1 and P3 beside ``PostgresSaver`` on the server at ``dsn`` (tables in new schemas)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    out: dict[str, Any] = {}
    for shape in shapes:
        print(f"[floors] postgres {shape} ...", file=sys.stderr, flush=True)
        calls = record(shape, seed)
        conn = _pg_connect(dsn, "floors_peer")
        peer = PostgresSaver(conn)
        peer.setup()
        cands: list[Candidate] = [
            Saver(PEER_PG, peer, True, conn.close),
            P("P1 one INSERT", dsn, "floors_p1", guard=False),
            P("P3 + indexes + guard in the INSERT", dsn, "floors_p3", guard=True),
        ]
        stored: dict[str, dict[str, int]] = {}

        def measure(cand: Candidate, thread: str, into: dict[str, Any] = stored) -> None:
            if isinstance(cand, P):
                into[cand.name] = cand.stored(thread)
            else:
                into[cand.name] = postgres_stored(cand.saver, thread)  # type: ignore[attr-defined]

        try:
            puts, writes = replay_rounds(shape, calls, cands, rounds, measure)
        finally:
            for c in cands:
                c.close()
        peer_total = stored[PEER_PG]["total"]
        out[shape] = {
            "put": summary(puts, [PEER_PG]),
            "put_writes": summary(writes, [PEER_PG]),
            "bytes": {
                n: {**b, "vs peer": round(b["total"] / peer_total, 4)} for n, b in stored.items()
            },
        }
    return out


# ---------------------------------------------------------------------- main


def environment() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "langgraph": version("langgraph"),
        "langgraph-checkpoint": version("langgraph-checkpoint"),
        "langgraph-checkpoint-sqlite": version("langgraph-checkpoint-sqlite"),
        "langchain-core": version("langchain-core"),
        "ormsgpack": version("ormsgpack"),
        "apsw": apsw.apsw_version(),
        "sqlite (apsw)": apsw.sqlite_lib_version(),
        "sqlite (sqlite3)": sqlite3.sqlite_version,
    }


@contextmanager
def load_note(result: dict[str, Any]) -> Iterator[None]:
    result["load_average_start"] = [round(x, 2) for x in os.getloadavg()]
    yield
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]


def _cell(entry: dict[str, Any], peer: str) -> str:
    r = entry[f"vs {peer}"]
    return f"{r['ratio']:.2f} [{r['min']:.2f}-{r['max']:.2f}]"


def report(result: dict[str, Any]) -> str:
    """The result as markdown tables: ratio of p50s to the peer [min-max of per-round ratios]."""
    lines: list[str] = []

    def table(head: list[str], rows: list[list[str]]) -> None:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines.extend("| " + " | ".join(row) + " |" for row in rows)
        lines.append("")

    shapes = result.get("shapes", {})
    if shapes:
        mem = [n for n in next(iter(shapes.values()))["memory_put"] if n != PEER_MEMORY]
        lines.append("Put in memory, vs `InMemorySaver.put`:\n")
        rows = []
        for shape, r in shapes.items():
            m = r["memory_put"]
            rows.append(
                [shape, f"{m[PEER_MEMORY]['p50_us']:.0f}"] + [_cell(m[n], PEER_MEMORY) for n in mem]
            )
        table(["shape", "peer p50 µs", *[n.split()[0] for n in mem]], rows)
        files = [
            n for n in next(iter(shapes.values()))["file_put"] if n not in (PEER_NORMAL, PEER_FULL)
        ]
        short = [n.split()[0] + (f" {n.split()[-2]}" if n.startswith("D4") else "") for n in files]
        for peer in (PEER_NORMAL, PEER_FULL):
            lines.append(f"Put on a file, vs `{peer}`:\n")
            rows = []
            for shape, r in shapes.items():
                f = r["file_put"]
                rows.append(
                    [shape, f"{f[peer]['p50_us']:.0f}"] + [_cell(f[n], peer) for n in files]
                )
            table(["shape", "peer p50 µs", *short], rows)
        lines.append("put_writes on a file, vs `SqliteSaver NORMAL.put_writes`:\n")
        rows = []
        for shape, r in shapes.items():
            f = r.get("file_put_writes") or {}
            if f:
                rows.append(
                    [shape, f"{f[PEER_NORMAL]['p50_us']:.0f}"]
                    + [_cell(f[n], PEER_NORMAL) for n in files]
                )
        table(["shape", "peer p50 µs", *short], rows)
        lines.append(
            "Stored bytes after 60 turns, vs the peer (payload; file pages in brackets):\n"
        )
        rows = []
        names = [n for n in files if not n.startswith(("D2", "D3"))]
        for shape, r in shapes.items():
            b = r["bytes"]
            rows.append(
                [shape, f"{b[PEER_NORMAL]['total'] / 1e6:.2f} MB"]
                + [
                    f"[{b[n]['file vs peer']:.3f}]"
                    if n.startswith("D5")
                    else f"{b[n]['vs peer']:.3f} [{b[n]['file vs peer']:.3f}]"
                    for n in names
                ]
                + [f"{r['bytes_item_chunks']['vs peer checkpoints']:.3f}"]
            )
        heads = [x for n, x in zip(files, short, strict=True) if n in names]
        table(["shape", "peer", *heads, "item chunks (checkpoints)"], rows)
    pg = result.get("postgres", {})
    if pg:
        names = [n for n in next(iter(pg.values()))["put"] if n != PEER_PG]
        lines.append(f"On PostgreSQL, vs `{PEER_PG}` (put; put_writes; stored bytes):\n")
        rows = [
            [shape, f"{r['put'][PEER_PG]['p50_us']:.0f}"]
            + [_cell(r["put"][n], PEER_PG) for n in names]
            + [_cell(r["put_writes"][n], PEER_PG) for n in names]
            + [f"{r['bytes'][n]['vs peer']:.3f}" for n in names]
            for shape, r in pg.items()
        ]
        short = [n.split()[0] for n in names]
        head = ["shape", "peer put p50 µs", *[f"{x} put" for x in short]]
        head += [f"{x} writes" for x in short] + [f"{x} bytes" for x in short]
        table(head, rows)
    hashes = result.get("hashes", {})
    if hashes:
        lines.append("Hashing a put's changed values at or above the threshold (p50 µs a put):\n")
        names = list(next(iter(hashes.values()))[f">= {THRESHOLDS[0]} B"])
        rows = [
            [shape] + [f"{h[f'>= {t} B'][n]:.1f}" for t in THRESHOLDS for n in names]
            for shape, h in hashes.items()
        ]
        table(["shape", *[f"{n} >= {t}" for t in THRESHOLDS for n in names]], rows)
    reads = result.get("reads", {})
    if reads:
        lines.append("Latest read (record + pending writes, decoded) vs the peer's `get_tuple`:\n")
        rows = []
        for key, r in reads.items():
            peer = PEER_MEMORY if key.startswith("memory") else PEER_NORMAL
            floor = next(n for n in r if n != peer)
            rows.append(
                [
                    key.replace("_", ", ") + " checkpoints",
                    f"{r[peer]['p50_us']:.0f}",
                    f"{r[floor]['p50_us']:.0f}",
                    _cell(r[floor], peer),
                ]
            )
        table(["case", "peer p50 µs", "floor p50 µs", "ratio"], rows)
    deletes = result.get("deletes")
    if deletes:
        lines.append(
            f"`delete_thread` among {deletes['threads']:,} threads of 5 checkpoints,"
            " vs `SqliteSaver NORMAL.delete_thread`:\n"
        )
        d = deletes["times"]
        rows = [
            [n, f"{d[n]['p50_us']:.0f}", _cell(d[n], PEER_NORMAL)] for n in d if n != PEER_NORMAL
        ]
        rows.insert(0, [PEER_NORMAL, f"{d[PEER_NORMAL]['p50_us']:.0f}", "1"])
        table(["candidate", "p50 µs", "ratio"], rows)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds, 2,000 threads")
    parser.add_argument("--rounds", type=int, help="rounds of replay (default 15, quick 5)")
    parser.add_argument("--threads", type=int, help="threads for delete_thread (20,000)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument(
        "--skip", default="", help="comma-separated: puts, reads, deletes, hashes, postgres"
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--dsn", help="a PostgreSQL server to measure P1 and P3 on (a throwaway)")
    parser.add_argument("--dir", default=None, help="where the files go (a temporary folder)")
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "floors.json")
    )
    parser.add_argument(
        "--report", metavar="JSON", help="print a result file's tables, run nothing"
    )
    args = parser.parse_args()
    if args.report:
        with open(args.report) as f:
            print(report(json.load(f)))
        return
    rounds = args.rounds or (5 if args.quick else 15)
    threads = args.threads or (2_000 if args.quick else 20_000)
    skip = set(filter(None, args.skip.split(",")))
    root = args.dir or tempfile.gettempdir()
    result: dict[str, Any] = {
        "environment": environment(),
        "settings": {
            "quick": args.quick,
            "rounds": rounds,
            "seed": args.seed,
            "turns": TURNS,
            "timed_turns": [TIMED_FROM, TURNS - 1],
            "thresholds": list(THRESHOLDS),
            "delete_threads": threads,
            # The DSN names this machine's socket: recorded as a placeholder.
            "command": " ".join(
                ["python", "benchmarks/floors.py"]
                + ["DSN" if a == args.dsn else a for a in sys.argv[1:]]
            ),
        },
    }
    started = time.time()

    def save() -> None:
        # After every section, so a run cut short still leaves what it measured.
        result["seconds"] = round(time.time() - started, 1)
        result["load_average_now"] = [round(x, 2) for x in os.getloadavg()]
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")

    with load_note(result):
        if "puts" not in skip:
            result["shapes"] = {}
            for shape in args.shapes.split(","):
                print(f"[floors] {shape} ...", file=sys.stderr, flush=True)
                result["shapes"][shape] = run_shape(shape, args.seed, rounds, root, args.quick)
                save()
        if "reads" not in skip:
            print("[floors] reads ...", file=sys.stderr, flush=True)
            result["reads"] = run_reads(args.seed, rounds, root)
            save()
        if "deletes" not in skip:
            print(f"[floors] deletes at {threads} threads ...", file=sys.stderr, flush=True)
            result["deletes"] = run_deletes(args.seed, threads, 20, rounds, root)
            save()
        if "hashes" not in skip:
            print("[floors] hashes ...", file=sys.stderr, flush=True)
            result["hashes"] = {
                shape: hash_costs(record(shape, args.seed), rounds)
                for shape in args.shapes.split(",")
            }
            save()
        if args.dsn and "postgres" not in skip:
            result["postgres"] = {}
            for shape in args.shapes.split(","):
                result["postgres"].update(run_postgres(args.dsn, [shape], args.seed, rounds))
                save()
    save()
    print(f"[floors] wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

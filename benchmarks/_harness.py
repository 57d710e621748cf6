"""Seeded data generators and the results bookkeeping for ``benchmarks/run.py``.

Every generator takes a ``random.Random`` built from ``--seed``; nothing here
reads the clock or the global random state, so the same seed builds the same
data (tests/test_benchmarks.py checks it).
"""

from __future__ import annotations

import base64
import random
import uuid
from pathlib import Path
from typing import Any

Entry = tuple[str, str, Any]


# -- store data ---------------------------------------------------------------


def _token(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


def small_value(rng: random.Random) -> dict[str, Any]:
    """A small dict value (~60 encoded bytes): the common agent-state entry."""
    return {
        "step": rng.randrange(1_000_000),
        "status": rng.choice(("queued", "running", "done", "failed")),
        "score": round(rng.random(), 6),
        "tags": [_token(rng, 4) for _ in range(2)],
    }


def gen_entries(rng: random.Random, namespaces: int, keys_per_ns: int) -> list[Entry]:
    """``namespaces * keys_per_ns`` entries with seeded names and small dict values."""
    tag = _token(rng)
    out: list[Entry] = []
    for n in range(namespaces):
        ns = f"agent-{tag}-{n:06d}"
        for k in range(keys_per_ns):
            out.append((ns, f"key-{k:06d}-{_token(rng, 3)}", small_value(rng)))
    return out


def as_nested_dict(entries: list[Entry]) -> dict[str, dict[str, Any]]:
    """The same entries as a plain ``{namespace: {key: value}}`` dict (deepcopy's peer)."""
    out: dict[str, dict[str, Any]] = {}
    for ns, key, value in entries:
        out.setdefault(ns, {})[key] = value
    return out


def pick_changes(rng: random.Random, entries: list[Entry], k: int, round_no: int) -> list[Entry]:
    """``k`` existing keys with new values (overwrites, so the diff reports "changed")."""
    chosen = rng.sample(range(len(entries)), k)
    return [
        (entries[i][0], entries[i][1], {"changed": round_no, "by": _token(rng, 4)}) for i in chosen
    ]


def blob_value(rng: random.Random, size: int = 10_240) -> bytes:
    """A ``size``-byte value (the 10 kB write of the DiskStore floor comparison)."""
    return rng.randbytes(size)


# -- LangGraph checkpoints ------------------------------------------------------


def checkpoint_id(rng: random.Random, ticks: int) -> str:
    """A UUIDv6-shaped id whose timestamp field is ``ticks``: ids sort by ``ticks``.

    LangGraph makes ids with ``uuid6()`` from the clock; here the clock is a
    counter so the data does not depend on when the run happens.
    """
    ticks &= (1 << 60) - 1
    value = (ticks >> 12) << 80 | 6 << 76 | (ticks & 0xFFF) << 64 | 0b10 << 62 | rng.getrandbits(62)
    return str(uuid.UUID(int=value))


MESSAGE_KINDS = ("dict", "langchain")


def _message_pool(rng: random.Random, count: int, size: int, kind: str) -> list[Any]:
    """Chat messages of about ``size`` bytes, alternating human and AI.

    ``kind="dict"``: plain ``{"type", "content", "id"}`` dicts (what the peer
    figures in DESIGN.md were measured with); ``kind="langchain"``:
    ``langchain_core`` message objects, whose reconstruction on every read
    costs about 10 µs each in every saver alike.
    """
    if kind not in MESSAGE_KINDS:
        raise ValueError(f"message kind must be one of {MESSAGE_KINDS}, got {kind!r}")
    pool: list[Any] = []
    for i in range(count):
        text = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
        mid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        role = "human" if i % 2 == 0 else "ai"
        if kind == "dict":
            pool.append({"type": role, "content": text, "id": mid})
        else:
            from langchain_core.messages import AIMessage, HumanMessage

            cls = HumanMessage if role == "human" else AIMessage
            pool.append(cls(content=text, id=mid))
    return pool


class CheckpointStream:
    """A thread's worth of LangGraph checkpoints, built the way the runtime builds them.

    Each step starts from the previous checkpoint (``create_checkpoint``),
    bumps the versions of the channels the step wrote with
    ``get_next_version`` of LangGraph's own savers (seeded), and records
    ``versions_seen`` for the node that ran. ``messages`` holds a window of
    ``messages`` chat messages of ~``message_bytes`` bytes (plain dicts or
    langchain_core objects, ``message_kind``); ``step``, ``route`` and
    ``scratch`` are the few small channels.

    Metadata is what the runtime stores: each run (one ``invoke``) writes an
    ``"input"`` checkpoint and then one ``"loop"`` checkpoint per step, all
    with the run's ``run_id``; here a run is ``run_length`` checkpoints (4:
    input, agent, tool, agent, one turn with a tool call).
    """

    def __init__(
        self,
        rng: random.Random,
        count: int,
        *,
        messages: int = 20,
        message_bytes: int = 500,
        start_ticks: int | None = None,
        message_kind: str = "dict",
        run_length: int = 4,
    ) -> None:
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

        self.items: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
        pool = _message_pool(rng, count + messages, message_bytes, message_kind)
        ticks = (
            start_ticks if start_ticks is not None else 0x1F0_0000_0000_0000 + rng.getrandbits(40)
        )
        previous = empty_checkpoint()
        versions: dict[str, Any] = {}
        for step in range(count):
            wrote = ["messages", "step", "scratch"] + (["route"] if step % 5 == 0 else [])
            new_versions = {ch: _next_version(rng, versions.get(ch)) for ch in wrote}
            versions.update(new_versions)
            node = "agent" if step % 2 == 0 else "tools"
            seen = {k: dict(v) for k, v in previous["versions_seen"].items()}
            seen[node] = {ch: versions[ch] for ch in ("messages", "step")}
            base = dict(previous)
            base["channel_versions"] = dict(versions)
            base["versions_seen"] = seen
            cp = create_checkpoint(base, None, step, id=checkpoint_id(rng, ticks + step))  # type: ignore[arg-type]
            cp["ts"] = f"2025-01-01T00:00:{step // 1000:02d}.{step % 1000:03d}000+00:00"
            cp["channel_values"] = {
                "messages": pool[step : step + messages],
                "step": step,
                "route": rng.choice(("agent", "tools", "end")),
                "scratch": {"tokens": rng.randrange(10_000), "tool": _token(rng, 8)},
            }
            if step % run_length == 0:
                run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            source = "input" if step % run_length == 0 else "loop"
            metadata = {"source": source, "step": step, "run_id": run_id}
            self.items.append((dict(cp), metadata, new_versions))
            previous = cp

    def __len__(self) -> int:
        return len(self.items)

    def writes(self, rng: random.Random, index: int) -> tuple[str, list[tuple[str, Any]]]:
        """A task id and 3 pending writes for ``put_writes`` call ``index``."""
        task = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        return task, [
            ("messages", {"role": "tool", "content": _token(rng, 40), "i": index}),
            ("scratch", {"tokens": index}),
            ("route", "agent"),
        ]


def _next_version(rng: random.Random, current: str | None) -> str:
    """LangGraph's ``get_next_version`` (as in InMemorySaver/SqliteSaver), seeded.

    The shipped method draws its fraction from the global ``random`` module;
    we seed that from ``rng`` so the stream is reproducible, then call it.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    random.seed(rng.getrandbits(64))
    return InMemorySaver.get_next_version(_VERSIONER, current, None)  # type: ignore[arg-type]


_VERSIONER: Any = object()


def fingerprint(obj: Any) -> str:
    """A stable digest of generated data, for the same-seed-same-data test."""
    import hashlib
    import pickle

    return hashlib.sha256(pickle.dumps(obj, protocol=5)).hexdigest()


# -- results bookkeeping -----------------------------------------------------


class Results:
    """Rows keyed by a stable id, and the issue limits computed from them."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.limits: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}

    def add(self, row_id: str, figures: dict[str, Any], **meta: Any) -> dict[str, Any]:
        if row_id in self.rows:
            raise KeyError(f"duplicate row {row_id}")
        row = {**meta, **figures}
        self.rows[row_id] = row
        return row

    def limit(
        self,
        issue: int,
        claim: str,
        numerator: str,
        denominator: str,
        bound: float,
        *,
        metric: str = "p50",
        op: str = "<=",
        floor: str | tuple[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """Record ``rows[numerator][metric] / rows[denominator][metric] op bound``.

        ``floor`` names a row measuring the least any implementation must do
        for the numerator's call (for example the serializer's decode of the
        same checkpoints); ``floor / denominator`` is recorded beside the
        ratio, so a bound below it reads as unreachable, not as untried. For
        a claim comparing one store with itself (a scaling claim), ``floor``
        is a pair of rows: the same work done bare, at both sizes.
        """
        entry: dict[str, Any] = {
            "issue": issue,
            "claim": claim,
            "numerator": numerator,
            "denominator": denominator,
            "metric": metric,
            "op": op,
            "bound": bound,
        }
        num, den = self.rows.get(numerator), self.rows.get(denominator)
        if num is None or den is None:
            entry.update(ratio=None, holds=None, note="not measured in this run")
        else:
            ratio = num[metric] / den[metric] if den[metric] else float("inf")
            holds = ratio <= bound if op == "<=" else ratio >= bound
            entry.update(ratio=round(ratio, 4), holds=bool(holds))
            if isinstance(floor, tuple):
                low, base = self.rows.get(floor[0]), self.rows.get(floor[1])
            else:
                low, base = (self.rows.get(floor), den) if floor else (None, None)
            if low is not None and base is not None and base[metric]:
                entry.update(floor=floor, floor_ratio=round(low[metric] / base[metric], 4))
        self.limits.append(entry)
        return entry


# -- floors ---------------------------------------------------------------------

_BARE_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (ns, key)
)
"""


def bare_apsw(path: Path, synchronous: str) -> Any:
    """A floor's store: one apsw connection, WAL, the given synchronous level, one table.

    ``kv(ns, key, value)`` keyed by ``(ns, key)``; no transaction or index of ours.
    """
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(_BARE_SCHEMA)
    return conn

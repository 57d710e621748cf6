"""Seeded store data and the floors' bare apsw store, shared by the benchmark sections.

Every generator takes a ``random.Random`` built from ``--seed``; nothing here
reads the clock or the global random state, so the same seed builds the same
data (tests/test_benchmarks.py checks it). The LangGraph conversation the
saver sections replay is recorded by ``swarmstate._bench.conversation``.
"""

from __future__ import annotations

import random
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


def fingerprint(obj: Any) -> str:
    """A stable digest of generated data, for the same-seed-same-data test."""
    import hashlib
    import pickle

    return hashlib.sha256(pickle.dumps(obj, protocol=5)).hexdigest()


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

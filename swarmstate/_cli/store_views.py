"""The store-level views: ``inspect`` (namespaces, counts, snapshots) and ``check``.

Both use only the store contract, so they work on every backend; ``check``
adds SQLite's own integrity check on a DiskStore file.
"""

from __future__ import annotations

import datetime
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._cli.source import raw_entries
from swarmstate._codec import loads
from swarmstate._errors import DecodeError

__all__ = ["check_view", "inspect_view"]


def inspect_view(store: BaseStore, limit: int) -> dict[str, Any]:
    """Entry count, the first ``limit`` namespaces with their counts, the last snapshots."""
    names = store.namespaces()
    snaps = store.snapshots()
    return {
        "entries": len(store),
        "namespace_count": len(names),
        "namespaces": [{"namespace": ns, "entries": store.count(ns)} for ns in names[:limit]],
        "snapshot_count": len(snaps),
        "snapshots": [
            {
                "id": snap.id,
                "parent": snap.parent,
                "timestamp": _iso(snap.timestamp),
                "entries": snap.count,
                "bytes": snap.size_bytes,
            }
            for snap in snaps[-limit:]
        ],
    }


def _iso(epoch: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC, as LangGraph writes a checkpoint's ``ts``."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat()


def check_view(store: BaseStore) -> dict[str, Any]:
    """SQLite's integrity check (DiskStore only), every live entry decoded, every checkpoint read.

    ``ok`` is False when the integrity check reports anything, an entry
    does not decode, or a LangGraph checkpoint cannot be read back (its
    values and pending writes included); ``bad_entries`` and
    ``bad_checkpoints`` name each. Checkpoints are checked when the
    ``langgraph`` extra is installed (``checkpoints_checked`` is null when not).
    """
    integrity = _integrity(store)
    bad: list[dict[str, str]] = []
    entries = 0
    for namespace in store.namespaces():
        for key, data in raw_entries(store, namespace):
            entries += 1
            try:
                loads(data)
            except DecodeError as exc:
                bad.append({"namespace": namespace, "key": key, "error": str(exc)})
    threads, problems = _checkpoints(store)
    bad_checkpoints = [p for p in problems if p.get("kind") != "serializer"]
    other_serializer = [p for p in problems if p.get("kind") == "serializer"]
    return {
        "ok": (integrity is None or integrity == ["ok"]) and not bad and not bad_checkpoints,
        "integrity_check": integrity,
        "entries": entries,
        "bad_entries": bad,
        "threads_checked": threads,
        "bad_checkpoints": bad_checkpoints,
        "other_serializer_checkpoints": other_serializer,
    }


def _checkpoints(store: BaseStore) -> tuple[int | None, list[dict[str, str]]]:
    """How many threads the saver read back, and the checkpoints that failed."""
    try:
        from swarmstate.integrations.langgraph import SwarmStateSaver
    except ImportError:  # no langgraph extra: nothing to read checkpoints with
        return None, []
    saver = SwarmStateSaver(store)
    return len(saver.list_threads()), saver.verify()


def _integrity(store: BaseStore) -> list[str] | None:
    """``PRAGMA integrity_check`` rows on a read-only connection; None off SQLite."""
    try:
        from swarmstate.backends.disk import DiskStore, readonly
    except ImportError:  # no disk extra: then the store is not a DiskStore either
        return None
    if not isinstance(store, DiskStore):
        return None
    conn, _ = readonly.open_readonly(str(store.path))
    try:
        return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()

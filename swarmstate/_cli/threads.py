"""The LangGraph views of a store: threads, a thread's history, one checkpoint, a diff.

Built only on the saver's public reads (``SwarmStateSaver.list``,
``get_tuple``, ``get_delta_channel_history``, ``recent_threads``,
``thread_count``, ``thread_checkpoints`` and ``thread_size``), so the views
keep working when the saver changes how it lays out its entries. A
checkpoint is read as LangGraph reads it
(:mod:`swarmstate._cli.checkpoints`); values are printed by
:mod:`swarmstate._cli.values`. Each view returns a JSON-ready dict;
``docs/cli.md`` lists its keys.

Sizes are what the saver's serializer makes of a value (``bytes``), except
a thread's ``value_bytes``: the stored bytes of every entry of the thread
(checkpoints, pending writes and the chunks of values), without their keys
or the store's own overhead, which ``prune``'s ``bytes_freed`` counts.
"""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

from langgraph.checkpoint.base import CheckpointTuple

from swarmstate._cli import checkpoints
from swarmstate._cli.messages import is_messages, message_diff, message_row
from swarmstate._cli.values import plain, short
from swarmstate.integrations.langgraph import SwarmStateSaver

__all__ = [
    "ListedThread",
    "diff_view",
    "history_view",
    "show_view",
    "threads_by_activity",
    "threads_view",
]


class ListedThread(NamedTuple):
    """A thread, its newest checkpoint (every namespace) and when it was written."""

    thread_id: str
    last_activity: str | None  # the checkpoint's ``ts`` (ISO 8601); None: no checkpoint
    last_checkpoint_id: str | None = None


def _moment(ts: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(ts)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def threads_by_activity(
    saver: SwarmStateSaver, limit: int, offset: int, *, count: bool = False
) -> tuple[list[ListedThread], int | None, bool]:
    """A page of the store's threads, newest activity first.

    Returns ``(page, total, more)``: at most ``limit`` threads after
    skipping ``offset``, each with the ``ts`` of its newest checkpoint
    (every namespace), newest first; how many threads the store holds, with
    ``count`` only (else None); whether a thread follows the page. Read
    through the saver's ``recent_threads`` (the checkpoints' order tags: it
    costs the checkpoints newer than the page's last thread, and one more
    thread says whether there is a next page) and, with ``count``,
    ``thread_count`` (a walk of every thread's namespaces: it costs the
    number of threads).
    """
    found_threads = saver.recent_threads(limit=limit + 1, offset=offset)
    more = len(found_threads) > limit
    page = []
    for found in found_threads[:limit]:
        # Its newest checkpoint, in whichever namespace it is.
        latest = next(
            iter(saver.list(checkpoints.config(found.thread_id, None, found.checkpoint_id))), None
        )
        ts = None if latest is None else latest.checkpoint.get("ts")
        page.append(
            ListedThread(
                found.thread_id,
                ts if isinstance(ts, str) else None,
                None if latest is None else checkpoints.checkpoint_id(latest),
            )
        )
    return page, (saver.thread_count() if count else None), more


def threads_view(
    saver: SwarmStateSaver, limit: int, offset: int, *, count: bool = False
) -> dict[str, Any]:
    """A page of threads, newest activity first: checkpoints, namespaces, last activity, bytes.

    ``count``: also how many threads the store holds (``total``; None without).
    """
    page, total, more = threads_by_activity(saver, limit, offset, count=count)
    rows = []
    for thread_id, last_activity, last_checkpoint_id in page:
        # Counted from the store's keys: a long thread's checkpoints are not read.
        counts = saver.thread_checkpoints(thread_id)
        rows.append(
            {
                "thread_id": thread_id,
                "checkpoints": sum(counts.values()),
                "namespaces": sorted(ns for ns, count in counts.items() if count),
                "last_checkpoint_id": last_checkpoint_id,
                "last_activity": last_activity,
                "value_bytes": saver.thread_size(thread_id),
            }
        )
    return {
        "total": total,
        "more": more,
        "offset": offset,
        "limit": limit,
        "threads": rows,
    }


def history_view(
    saver: SwarmStateSaver, thread_id: str, checkpoint_ns: str | None, limit: int | None
) -> dict[str, Any]:
    """A thread's checkpoints, newest first, as ``saver.list`` returns them, with their branches.

    Holds one decoded checkpoint at a time (a long thread's values would not
    fit in memory all at once): each row keeps only the versions its
    ``nodes`` are worked out from once every row is read.
    """
    rows: list[tuple[dict[str, Any], Any, tuple[str, str] | None]] = []
    seen: dict[tuple[str, str], Any] = {}
    for found in saver.list(checkpoints.config(thread_id, checkpoint_ns), limit=limit):
        versions = found.checkpoint.get("versions_seen", {})
        seen[(checkpoints.checkpoint_ns(found), checkpoints.checkpoint_id(found))] = versions
        rows.append((_checkpoint_row(saver, found), versions, checkpoints.parent_key(found)))
    if not rows:
        raise checkpoints.no_thread(thread_id, checkpoint_ns)
    for row, versions, parent in rows:
        if parent is not None and parent not in seen:  # older than the last row shown
            seen[parent] = _versions_seen(saver.get_tuple(checkpoints.config(thread_id, *parent)))
        row["nodes"] = checkpoints.nodes_between(
            versions, seen[parent] if parent is not None else {}
        )
    numbers = checkpoints.branches(
        (row["checkpoint_ns"], row["checkpoint_id"], parent) for row, _, parent in rows
    )
    for (row, _, _), branch in zip(rows, numbers, strict=True):
        row["branch"] = branch
    return {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoints": [row for row, _, _ in rows],
    }


def show_view(
    saver: SwarmStateSaver,
    thread_id: str,
    checkpoint_id: str | None,
    checkpoint_ns: str | None,
    last: int,
) -> dict[str, Any]:
    """One checkpoint (default the latest): channels, next nodes, interrupts, pending writes."""
    found = checkpoints.find(saver, thread_id, checkpoint_id, checkpoint_ns)
    row = _checkpoint_row(saver, found)
    parent = checkpoints.parent_key(found)
    before = (
        {}
        if parent is None
        else _versions_seen(saver.get_tuple(checkpoints.config(thread_id, *parent)))
    )
    row["nodes"] = checkpoints.nodes_between(_versions_seen(found), before)
    row["next"] = checkpoints.next_nodes(found.checkpoint)
    values, deltas = checkpoints.channel_values(saver, found)
    row["metadata"] = dict(found.metadata)
    row["channels"] = [
        _channel(saver, name, values[name], deltas.get(name), last) for name in sorted(values)
    ]
    writes = found.pending_writes or []
    row["interrupts"] = [
        {"task_id": task_id, "id": getattr(item, "id", None),
         "value": plain(getattr(item, "value", item))}
        for task_id, channel, value in writes
        if channel == checkpoints.INTERRUPT
        for item in (value if isinstance(value, list | tuple) else [value])
    ]  # fmt: skip
    row["pending_writes"] = [
        {"task_id": task_id, "channel": channel, **_value(saver, value), "value": plain(value)}
        for task_id, channel, value in writes
    ]
    return {"thread_id": thread_id, **row}


def diff_view(
    saver: SwarmStateSaver, thread_id: str, a_ref: str, b_ref: str, checkpoint_ns: str | None
) -> dict[str, Any]:
    """What changed from checkpoint ``a_ref`` to ``b_ref``: channels with their values, messages."""
    a = checkpoints.find(saver, thread_id, a_ref, checkpoint_ns)
    b = checkpoints.find(saver, thread_id, b_ref, checkpoint_ns)
    va, vb = checkpoints.channel_values(saver, a)[0], checkpoints.channel_values(saver, b)[0]
    names = sorted(set(va) | set(vb))
    changed = [
        n for n in names if n in va and n in vb and _encoded(saver, va[n]) != _encoded(saver, vb[n])
    ]
    messages, values = {}, {}
    for name in names:
        if name in va and name in vb and name not in changed:
            continue
        old, new = va.get(name), vb.get(name)
        if is_messages(old) or is_messages(new):
            change = message_diff(
                lambda m: _encoded(saver, m),
                old if isinstance(old, list) else [],
                new if isinstance(new, list) else [],
            )
            if any(change.values()):
                messages[name] = change
                continue
        values[name] = {
            "old": plain(old) if name in va else None,
            "new": plain(new) if name in vb else None,
        }
    return {
        "thread_id": thread_id,
        "a": _side(a),
        "b": _side(b),
        "channels": {
            "added": sorted(set(vb) - set(va)),
            "removed": sorted(set(va) - set(vb)),
            "changed": changed,
        },
        "values": values,
        "messages": messages,
    }


# -- pieces ----------------------------------------------------------------------


def _side(found: CheckpointTuple) -> dict[str, Any]:
    return {
        "checkpoint_id": checkpoints.checkpoint_id(found),
        "checkpoint_ns": checkpoints.checkpoint_ns(found),
        "step": found.metadata.get("step"),
    }


def _versions_seen(found: CheckpointTuple | None) -> Any:
    return {} if found is None else found.checkpoint.get("versions_seen", {})


def _checkpoint_row(saver: SwarmStateSaver, found: CheckpointTuple) -> dict[str, Any]:
    """The fields of a history row; ``nodes`` needs the parent and is set by the caller."""
    parent = checkpoints.parent_key(found)
    return {
        "checkpoint_id": checkpoints.checkpoint_id(found),
        "checkpoint_ns": checkpoints.checkpoint_ns(found),
        "step": found.metadata.get("step"),
        "source": found.metadata.get("source"),
        "nodes": [],
        "parent_id": None if parent is None else parent[1],
        "ts": found.checkpoint["ts"],
        "bytes": len(_encoded(saver, found.checkpoint)),
        "pending_write_count": len(found.pending_writes or []),
    }


def _encoded(saver: SwarmStateSaver, value: Any) -> bytes:
    return saver.serde.dumps_typed(value)[1]


def _value(saver: SwarmStateSaver, value: Any) -> dict[str, Any]:
    return {
        "type": type(value).__name__,
        "bytes": len(_encoded(saver, value)),
        "summary": short(value),
    }


def _channel(
    saver: SwarmStateSaver, name: str, value: Any, delta: dict[str, Any] | None, last: int
) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, **_value(saver, value)}
    row["items"] = len(value) if isinstance(value, list | dict | tuple | set) else None
    row["messages"], row["last_messages"] = None, []
    if is_messages(value):
        row["messages"] = len(value)
        row["last_messages"] = [message_row(m) for m in value[-last:]] if last else []
        row["summary"] = f"{len(value)} message{'' if len(value) == 1 else 's'}"
    row["delta"] = delta
    return row

"""The LangGraph views of a store: threads, a thread's history, one checkpoint, a diff.

Built only on the saver's public reads (``SwarmStateSaver.list``,
``get_tuple``, ``list_threads`` and ``thread_size``), so the views keep
working when the saver changes how it lays out its entries.
Each view returns a JSON-ready dict; ``docs/cli.md`` lists its keys.

Sizes are what the saver's serializer makes of a value (``bytes``), except
a thread's ``value_bytes``: the stored bytes of every entry of the thread
(checkpoints, pending writes, values and list segments), without their keys
or the store's own overhead, which ``prune``'s ``bytes_freed`` counts.
"""

from __future__ import annotations

import datetime
import reprlib
from collections.abc import Iterator
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import CheckpointTuple

from swarmstate._cli.source import InputError
from swarmstate.integrations.langgraph import SwarmStateSaver

__all__ = [
    "ThreadActivity",
    "abbreviate",
    "diff_view",
    "history_view",
    "show_view",
    "threads_by_activity",
    "threads_view",
]

_TEXT_WIDTH = 80
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _TEXT_WIDTH
_repr.maxlist = _repr.maxdict = _repr.maxtuple = 6


class ThreadActivity(NamedTuple):
    """A thread and when its newest checkpoint was written."""

    thread_id: str
    last_activity: str | None  # the checkpoint's ``ts`` (ISO 8601); None: no checkpoint


def _moment(ts: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(ts)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def threads_by_activity(
    saver: SwarmStateSaver, limit: int, offset: int
) -> tuple[list[ThreadActivity], int]:
    """A page of the store's threads, newest activity first, and how many threads there are.

    Returns ``(page, total)``: at most ``limit`` threads after skipping
    ``offset``, each with the ``ts`` of its newest checkpoint (every
    namespace), newest first (ties by thread id; threads without a
    checkpoint last), and the number of threads in the store.

    Reads the newest checkpoint of every thread (``list_threads``, then
    ``list(limit=1)`` per thread), so it costs the number of threads, not
    the page: the one call to replace when the saver can list threads by
    last activity itself.
    """
    found = []
    for thread_id in saver.list_threads():
        latest = next(iter(saver.list(_config(thread_id), limit=1)), None)
        found.append(ThreadActivity(thread_id, None if latest is None else latest.checkpoint["ts"]))
    oldest = datetime.datetime.min.replace(tzinfo=datetime.UTC)
    found.sort(key=lambda t: t.thread_id)
    found.sort(
        key=lambda t: (t.last_activity is not None, oldest if t.last_activity is None
                       else _moment(t.last_activity)),
        reverse=True,
    )  # fmt: skip
    return found[offset : offset + limit], len(found)


def threads_view(saver: SwarmStateSaver, limit: int, offset: int) -> dict[str, Any]:
    """A page of threads, newest activity first: checkpoints, namespaces, last activity, bytes."""
    page, total = threads_by_activity(saver, limit, offset)
    rows = []
    for thread_id, last_activity in page:
        count, latest, namespaces = 0, None, set()
        for found in saver.list(_config(thread_id)):
            count += 1
            latest = latest or found
            namespaces.add(_ns(found))
        rows.append(
            {
                "thread_id": thread_id,
                "checkpoints": count,
                "namespaces": sorted(namespaces),
                "last_checkpoint_id": None if latest is None else _id(latest),
                "last_activity": last_activity,
                "value_bytes": saver.thread_size(thread_id),
            }
        )
    return {"total": total, "offset": offset, "limit": limit, "threads": rows}


def history_view(
    saver: SwarmStateSaver, thread_id: str, checkpoint_ns: str | None, limit: int | None
) -> dict[str, Any]:
    """A thread's checkpoints, newest first, as ``saver.list`` returns them.

    Holds one decoded checkpoint at a time (a long thread's values would not
    fit in memory all at once): each row keeps only the versions its
    ``nodes`` are worked out from once every row is read.
    """
    rows: list[tuple[dict[str, Any], Any, tuple[str, str] | None]] = []
    seen: dict[tuple[str, str], Any] = {}
    for found in saver.list(_config(thread_id, checkpoint_ns), limit=limit):
        versions = found.checkpoint.get("versions_seen", {})
        seen[(_ns(found), _id(found))] = versions
        rows.append((_checkpoint_row(saver, found), versions, _parent_key(found)))
    if not rows:
        raise _no_thread(thread_id, checkpoint_ns)
    for row, versions, parent in rows:
        if parent is not None and parent not in seen:  # older than the last row shown
            seen[parent] = _versions_seen(saver.get_tuple(_config(thread_id, *parent)))
        row["nodes"] = _nodes(versions, seen[parent] if parent is not None else {})
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
    """One checkpoint (default the latest): channels summarized, pending writes, metadata."""
    found = _find(saver, thread_id, checkpoint_id, checkpoint_ns)
    row = _checkpoint_row(saver, found)
    parent = _parent_key(found)
    before = {} if parent is None else _versions_seen(saver.get_tuple(_config(thread_id, *parent)))
    row["nodes"] = _nodes(_versions_seen(found), before)
    values = found.checkpoint["channel_values"]
    row["metadata"] = dict(found.metadata)
    row["channels"] = [_channel(saver, name, values[name], last) for name in sorted(values)]
    row["pending_writes"] = [
        {"task_id": task_id, "channel": channel, **_value(saver, value)}
        for task_id, channel, value in found.pending_writes or []
    ]
    return {"thread_id": thread_id, **row}


def diff_view(
    saver: SwarmStateSaver, thread_id: str, a_id: str, b_id: str, checkpoint_ns: str | None
) -> dict[str, Any]:
    """What changed from checkpoint ``a_id`` to ``b_id``: channels, and messages per channel."""
    a = _find(saver, thread_id, a_id, checkpoint_ns)
    b = _find(saver, thread_id, b_id, checkpoint_ns)
    va, vb = a.checkpoint["channel_values"], b.checkpoint["channel_values"]
    both = sorted(set(va) & set(vb))
    messages = {}
    for name in sorted(set(va) | set(vb)):
        old, new = va.get(name), vb.get(name)
        if _is_messages(old) or _is_messages(new):
            change = _message_diff(saver, old or [], new or [])
            if any(change.values()):
                messages[name] = change
    return {
        "thread_id": thread_id,
        "a": {"checkpoint_id": a_id, "checkpoint_ns": _ns(a), "step": a.metadata.get("step")},
        "b": {"checkpoint_id": b_id, "checkpoint_ns": _ns(b), "step": b.metadata.get("step")},
        "channels": {
            "added": sorted(set(vb) - set(va)),
            "removed": sorted(set(va) - set(vb)),
            "changed": [n for n in both if _encoded(saver, va[n]) != _encoded(saver, vb[n])],
        },
        "messages": messages,
    }


# -- pieces ----------------------------------------------------------------------


def _config(
    thread_id: str, checkpoint_ns: str | None = None, checkpoint_id: str | None = None
) -> Any:
    conf: dict[str, str] = {"thread_id": thread_id}
    if checkpoint_ns is not None:
        conf["checkpoint_ns"] = checkpoint_ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _id(found: CheckpointTuple) -> str:
    return str(found.config["configurable"]["checkpoint_id"])


def _ns(found: CheckpointTuple) -> str:
    return str(found.config["configurable"].get("checkpoint_ns", ""))


def _no_thread(thread_id: str, checkpoint_ns: str | None) -> InputError:
    where = "" if checkpoint_ns is None else f" in checkpoint namespace {checkpoint_ns!r}"
    return InputError(
        f"thread {thread_id!r} has no checkpoints{where} (swarmstate threads lists the threads)"
    )


def _find(
    saver: SwarmStateSaver, thread_id: str, checkpoint_id: str | None, checkpoint_ns: str | None
) -> CheckpointTuple:
    """The named checkpoint (in any namespace unless one is given), or the latest."""
    if checkpoint_id is None:
        found = saver.get_tuple(_config(thread_id, checkpoint_ns or ""))
        if found is None:
            raise _no_thread(thread_id, checkpoint_ns or "")
        return found
    matches = saver.list(_config(thread_id, checkpoint_ns, checkpoint_id), limit=1)
    for found in matches:
        return found
    raise InputError(
        f"thread {thread_id!r} has no checkpoint {checkpoint_id!r} "
        "(swarmstate history lists its checkpoints)"
    )


def _parent_key(found: CheckpointTuple) -> tuple[str, str] | None:
    """``(checkpoint_ns, checkpoint_id)`` of the parent checkpoint, or None."""
    if found.parent_config is None:
        return None
    conf = found.parent_config["configurable"]
    return str(conf.get("checkpoint_ns", "")), str(conf.get("checkpoint_id"))


def _versions_seen(found: CheckpointTuple | None) -> Any:
    return {} if found is None else found.checkpoint.get("versions_seen", {})


def _checkpoint_row(saver: SwarmStateSaver, found: CheckpointTuple) -> dict[str, Any]:
    """The fields of a history row; ``nodes`` needs the parent and is set by the caller."""
    parent = _parent_key(found)
    return {
        "checkpoint_id": _id(found),
        "checkpoint_ns": _ns(found),
        "step": found.metadata.get("step"),
        "source": found.metadata.get("source"),
        "nodes": [],
        "parent_id": None if parent is None else parent[1],
        "ts": found.checkpoint["ts"],
        "bytes": len(_encoded(saver, found.checkpoint)),
        "pending_writes": len(found.pending_writes or []),
    }


def _nodes(seen: Any, before: Any) -> list[str]:
    """The nodes that ran into a checkpoint: those whose seen versions moved since the parent."""
    return sorted(name for name, got in seen.items() if got and got != before.get(name))


def _encoded(saver: SwarmStateSaver, value: Any) -> bytes:
    return saver.serde.dumps_typed(value)[1]


def _value(saver: SwarmStateSaver, value: Any) -> dict[str, Any]:
    return {
        "type": type(value).__name__,
        "bytes": len(_encoded(saver, value)),
        "summary": abbreviate(value if isinstance(value, str) else _repr.repr(value)),
    }


def _is_messages(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    return all(isinstance(m, BaseMessage) for m in value)


def _channel(saver: SwarmStateSaver, name: str, value: Any, last: int) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, **_value(saver, value)}
    row["items"] = len(value) if isinstance(value, list | dict | tuple) else None
    row["messages"], row["last_messages"] = None, []
    if _is_messages(value):
        row["messages"] = len(value)
        row["last_messages"] = [_message(m) for m in value[-last:]] if last else []
        row["summary"] = f"{len(value)} messages"
    return row


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, BaseMessage):  # an item of a list that is not all messages
        return {"type": type(message).__name__, "id": None, "content": abbreviate(repr(message))}
    return {"type": message.type, "id": message.id, "content": abbreviate(_text(message))}


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        parts: Iterator[str] = (
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and "text" in part)
        )
        text = " ".join(parts)
    calls = getattr(message, "tool_calls", None)
    if not text and calls:
        text = "tool calls: " + ", ".join(str(call.get("name")) for call in calls)
    return text


def _message_diff(saver: SwarmStateSaver, old: list[Any], new: list[Any]) -> dict[str, Any]:
    """Messages added, removed and changed, matched by id (by content when they have none)."""

    def key(message: Any) -> tuple[str, Any]:
        found = getattr(message, "id", None)
        return ("id", found) if found else ("bytes", _encoded(saver, message))

    before = {key(m): m for m in old}
    after = {key(m): m for m in new}
    changed = [
        _message(m)
        for k, m in after.items()
        if k in before and k[0] == "id" and _encoded(saver, before[k]) != _encoded(saver, m)
    ]
    return {
        "added": [_message(m) for k, m in after.items() if k not in before],
        "removed": [_message(m) for k, m in before.items() if k not in after],
        "changed": changed,
    }


def abbreviate(text: str, width: int = _TEXT_WIDTH) -> str:
    """``text`` on one line (whitespace collapsed, control characters escaped), cut to ``width``."""
    flat = " ".join(text.split())
    if not flat.isprintable():
        flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= width else flat[: width - 1] + "…"

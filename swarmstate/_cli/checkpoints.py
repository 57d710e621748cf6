"""One checkpoint read as LangGraph reads it, without the graph: its id, values, next nodes, branch.

Everything here goes through the saver's public reads (``list``,
``get_tuple``, ``get_delta_channel_history``) and the checkpoint's own
fields, never through how the saver stores them:

* :func:`find` takes a checkpoint id, a unique prefix of one (as git takes
  a commit), or its end as the history's PARENT column prints it.
* :func:`channel_values` returns the channel values ``graph.get_state``
  returns for the checkpoint, a ``DeltaChannel``'s included: LangGraph
  stores such a channel's writes, and a snapshot now and then, and rebuilds
  the value from them on every read.
* :func:`next_nodes` names the nodes the checkpoint's step runs, as
  ``StateSnapshot.next`` does for a checkpoint named by id.
* :func:`branches` numbers the lines of a thread's history, so a fork's
  checkpoints are told apart from the ones they interleave with.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import CheckpointTuple

from swarmstate._cli.source import InputError
from swarmstate.integrations.langgraph import SwarmStateSaver

if TYPE_CHECKING:
    from langgraph.channels import DeltaChannel

# LangGraph's channels and graph modules (DeltaChannel, add_messages) are
# imported where a DeltaChannel's value is rebuilt: they cost a command that
# never meets one (``threads``) a few hundred milliseconds of start-up.

__all__ = [
    "INTERRUPT",
    "branches",
    "channel_values",
    "checkpoint_id",
    "checkpoint_ns",
    "config",
    "find",
    "next_nodes",
    "no_thread",
    "nodes_between",
    "parent_key",
]

INTERRUPT = "__interrupt__"
"""LangGraph's channel for interrupts, and its key in ``versions_seen``: not a node."""

_TASKS = "__pregel_tasks"  # LangGraph's channel of pending Send packets
_START = "__start__"
_BRANCH = "branch:to:"  # a node's trigger channel
_JOIN = "join:"  # join:A+B:NODE, the barrier of an edge from several nodes
_CANDIDATES = 8  # ids listed when a prefix is ambiguous
_ELLIPSES = ("…", "...")  # how the history's PARENT column starts an id's end


def config(
    thread_id: str, checkpoint_ns: str | None = None, checkpoint_id: str | None = None
) -> Any:
    """A ``RunnableConfig`` naming a thread, and optionally a namespace and checkpoint."""
    conf: dict[str, str] = {"thread_id": thread_id}
    if checkpoint_ns is not None:
        conf["checkpoint_ns"] = checkpoint_ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint_id(found: CheckpointTuple) -> str:
    return str(found.config["configurable"]["checkpoint_id"])


def checkpoint_ns(found: CheckpointTuple) -> str:
    return str(found.config["configurable"].get("checkpoint_ns", ""))


def parent_key(found: CheckpointTuple) -> tuple[str, str] | None:
    """``(checkpoint_ns, checkpoint_id)`` of the parent checkpoint, or None."""
    if found.parent_config is None:
        return None
    conf = found.parent_config["configurable"]
    return str(conf.get("checkpoint_ns", "")), str(conf.get("checkpoint_id"))


def no_thread(thread_id: str, ns: str | None) -> InputError:
    where = "" if ns is None else f" in checkpoint namespace {ns!r}"
    return InputError(
        f"thread {thread_id!r} has no checkpoints{where} (swarmstate threads lists the threads)"
    )


# -- finding a checkpoint --------------------------------------------------------------


def find(
    saver: SwarmStateSaver, thread_id: str, ref: str | None, ns: str | None
) -> CheckpointTuple:
    """The checkpoint ``ref`` names (in any namespace of the thread unless ``ns``), or the latest.

    ``ref`` is a checkpoint id, a prefix of exactly one (as git takes a
    commit), or ``…`` and the end of one, as the history's PARENT column
    prints it. No ``ref``: the latest checkpoint of ``ns`` (default the root).
    """
    if ref is None:
        latest = saver.get_tuple(config(thread_id, ns or ""))
        if latest is None:
            raise no_thread(thread_id, ns or "")
        return latest
    for exact in saver.list(config(thread_id, ns, ref), limit=1):
        return exact
    # Not an id: a prefix (or an end). Every id of the thread is read, newest first.
    suffix = next((ref[len(e) :] for e in _ELLIPSES if ref.startswith(e) and ref != e), None)
    first: CheckpointTuple | None = None
    matches: list[str] = []
    for found in saver.list(config(thread_id, ns)):
        name = checkpoint_id(found)
        if name.endswith(suffix) if suffix is not None else name.startswith(ref):
            first = first or found
            matches.append(name)
    if first is not None and len(matches) == 1:
        return first
    if not matches:
        where = "" if ns is None else f" in checkpoint namespace {ns!r}"
        raise InputError(
            f"thread {thread_id!r} has no checkpoint {ref!r}{where} "
            "(swarmstate history lists its checkpoints)"
        )
    shown = ", ".join(matches[:_CANDIDATES])
    more = f" and {len(matches) - _CANDIDATES} more" if len(matches) > _CANDIDATES else ""
    raise InputError(
        f"checkpoint {ref!r} is ambiguous in thread {thread_id!r}: {len(matches)} checkpoints "
        f"match ({shown}{more}); give more of the id"
    )


# -- channel values ---------------------------------------------------------------------


def _keep(state: Any, writes: Sequence[Any]) -> Any:  # a DeltaChannel only unwrapping snapshots
    return state


def _snapshot(value: Any) -> tuple[bool, Any]:
    """Whether a stored value is a DeltaChannel's snapshot, and the value it holds.

    LangGraph's own ``DeltaChannel.from_checkpoint`` unwraps a snapshot and
    takes any other value as it is, so it is asked instead of naming the
    snapshot's class, which LangGraph keeps private.
    """
    if value is None:
        return False, None
    from langgraph.channels import DeltaChannel

    inner = DeltaChannel(_keep).from_checkpoint(value).get()
    return inner is not value, inner


def _messages_fold(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    from langgraph.graph.message import add_messages

    return functools.reduce(add_messages, writes, state)  # type: ignore[arg-type]


def _items(writes: Sequence[Any]) -> list[Any]:
    """The items of a channel's writes: a list or tuple written is its items, anything else one."""
    out: list[Any] = []
    for write in writes:
        if isinstance(write, list | tuple):
            out.extend(write)
        else:
            out.append(write)
    return out


def _concatenate(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    return [*state, *_items(writes)]


def _merge(state: dict[Any, Any], writes: Sequence[Any]) -> dict[Any, Any]:
    out = dict(state)
    for write in writes:
        out.update(write)
    return out


def _union(state: set[Any], writes: Sequence[Any]) -> set[Any]:
    out = set(state)
    for write in writes:
        out |= set(write) if isinstance(write, set | frozenset | list | tuple) else {write}
    return out


def _reducer(start: Any, writes: Sequence[Any]) -> tuple[str, Any, type] | None:
    """The reducer a DeltaChannel holding ``start`` and receiving ``writes`` folds them with.

    The graph, which holds the real one, is not loaded: messages anywhere
    mean ``add_messages`` (what LangGraph's message reducers do), else a
    list concatenates, a dict merges, a set unions. None: nothing fits.
    """
    items = [*(start if isinstance(start, list) else []), *_items(writes)]
    if any(isinstance(item, BaseMessage) for item in items):
        return "add_messages", _messages_fold, list
    dicts = all(isinstance(w, dict) for w in writes)
    if isinstance(start, dict) or (start is None and writes and dicts):
        return ("merge", _merge, dict) if dicts else None
    if isinstance(start, set | frozenset):
        return "union", _union, set
    if start is None or isinstance(start, list):
        return "concatenate", _concatenate, list
    return None


def _rebuild(history: Any) -> tuple[Any, dict[str, Any]]:
    """A DeltaChannel's value from its history (the snapshot and the writes since), and how."""
    seed = history.get("seed")
    writes = list(history["writes"])
    start = _snapshot(seed)[1] if seed is not None else None
    info: dict[str, Any] = {"snapshot": seed is not None, "writes": len(writes), "reducer": None}
    if not writes:
        return start, info
    chosen = _reducer(start, [w[2] for w in writes])
    if chosen is None:
        return start, info
    info["reducer"], fold, typ = chosen
    from langgraph.channels import DeltaChannel

    channel: DeltaChannel[Any] = DeltaChannel(fold, typ).from_checkpoint(seed)
    channel.replay_writes(writes)
    return channel.get(), info


def channel_values(
    saver: SwarmStateSaver, found: CheckpointTuple
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The checkpoint's channel values as ``graph.get_state`` reads them, and how deltas were read.

    A ``DeltaChannel`` (named in the metadata's ``counters_since_delta_snapshot``,
    or holding a snapshot) stored at this checkpoint is its snapshot's value;
    one not stored here is rebuilt as LangGraph rebuilds it, from
    ``saver.get_delta_channel_history``: the nearest snapshot up the parent
    chain, then the writes since, folded by the reducer :func:`_reducer`
    picks. The second mapping has one ``{"snapshot", "writes", "reducer"}``
    per delta channel (``reducer`` None when no write was folded). A
    channel never written has no value, here as in the checkpoint.
    """
    checkpoint = found.checkpoint
    values = dict(checkpoint["channel_values"])
    deltas: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        stored, inner = _snapshot(value)
        if stored:
            values[name] = inner
            deltas[name] = {"snapshot": True, "writes": 0, "reducer": None}
    counters = found.metadata.get("counters_since_delta_snapshot") or {}
    versions = checkpoint["channel_versions"]
    replay = sorted(n for n in counters if n not in values and n in versions)
    if replay:
        history = saver.get_delta_channel_history(config=found.config, channels=replay)
        for name in replay:
            values[name], deltas[name] = _rebuild(history[name])
    return values, deltas


# -- next nodes, nodes that ran, branches -------------------------------------------------


def _newer(version: Any, seen: Any) -> bool:
    if seen is None:
        return True
    try:
        return bool(version > seen)
    except TypeError:  # versions of another saver's kind
        return str(version) > str(seen)


def _trigger(channel: str, value: Any) -> str | None:
    """The node a written channel starts, by LangGraph's channel names; None for a state channel."""
    if channel == _START:
        return _START
    if channel.startswith(_BRANCH):
        return channel[len(_BRANCH) :]
    if channel.startswith(_JOIN) and ":" in channel[len(_JOIN) :]:
        sources, node = channel[len(_JOIN) :].rsplit(":", 1)
        # A barrier's stored value is the sources seen so far (and, for a
        # deferred one, whether they finished): the node runs once all are in.
        seen, finished = value, True
        if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[1], bool):
            seen, finished = value
        complete = isinstance(seen, set | frozenset | list | tuple) and set(seen) == set(
            sources.split("+")
        )
        if finished and complete:
            return node
    return None


def next_nodes(checkpoint: Any) -> list[str]:
    """The nodes the checkpoint's step runs, sorted: ``StateSnapshot.next`` of the checkpoint by id.

    A node runs when its trigger channel (``branch:to:NODE``, a complete
    ``join:...:NODE`` barrier, ``__start__``) holds a value written after the
    node last saw it; each pending ``Send`` runs its node too. A node the
    graph triggers by another channel is not found: only the graph knows it.
    """
    values = checkpoint["channel_values"]
    versions = checkpoint["channel_versions"]
    seen = checkpoint.get("versions_seen", {})
    found = []
    for channel, value in values.items():
        node = _trigger(channel, value)
        if node is not None and _newer(versions.get(channel), seen.get(node, {}).get(channel)):
            found.append(node)
    for packet in values.get(_TASKS) or []:
        node = getattr(packet, "node", None)
        if isinstance(node, str):
            found.append(node)
    return sorted(found)


def nodes_between(seen: Any, before: Any) -> list[str]:
    """The nodes that ran into a checkpoint: those whose seen versions moved since the parent.

    LangGraph also keeps its interrupt bookkeeping in ``versions_seen``
    under ``__interrupt__``, which is not a node.
    """
    return sorted(
        name for name, got in seen.items() if got and name != INTERRUPT and got != before.get(name)
    )


def branches(rows: Iterable[tuple[str, str, tuple[str, str] | None]]) -> list[int]:
    """A branch number per checkpoint of a history, given newest first as ``(ns, id, parent)``.

    Branch 0 of a namespace is the line from its newest checkpoint back to
    the first; a fork's checkpoints (an ``update_state`` on an older
    checkpoint, a replay) are another branch, numbered in the order their
    newest checkpoint comes, up to the checkpoint they forked from, which
    keeps the lower number. Exact for any newest-first prefix of a history:
    a checkpoint's children are newer, so they are in it too.
    """
    waiting: dict[tuple[str, str], int] = {}  # a parent named by a row above -> its branch
    fresh: dict[str, int] = {}  # per namespace, the next branch number
    out = []
    for ns, name, parent in rows:
        branch = waiting.pop((ns, name), None)
        if branch is None:
            branch = fresh.get(ns, 0)
            fresh[ns] = branch + 1
        out.append(branch)
        if parent is not None:
            key = (parent[0], parent[1])
            waiting[key] = min(waiting.get(key, branch), branch)
    return out

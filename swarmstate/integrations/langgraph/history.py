"""``get_delta_channel_history``: the parent chain of a checkpoint, read directly.

LangGraph's ``DeltaChannel`` (beta) stores a channel's writes, not its
value, and rebuilds the value from the nearest ancestor that holds one
(the *seed*) plus every write on the way from it. The contract (see
``BaseCheckpointSaver.get_delta_channel_history``): walk the parent chain
from the target's parent; at each ancestor, collect its pending writes to
the channel, and stop for that channel at the first ancestor whose value at
its version is stored; return the writes oldest first.

The walk reads the thread's namespace newest first a page of keys at a
time (a checkpoint and its writes are neighbours, so one page holds many
ancestors with their writes) and checks the candidate values of each page
in one batch. Ids are time-ordered only within one process, so an ancestor
whose id sorts above the page is read by its own lookup; a chain that loops
(a re-put id) stops at the first repeat.

A history is never returned short: when the target, an ancestor or a seed's
stored bytes are missing, the target is looked up again. Gone (deleted after
the caller read it: retention deletes a checkpoint before its ancestors, so
a live checkpoint keeps its chain) raises :class:`CheckpointDeletedError`;
still there with a seed's bytes missing is damage, :class:`CorruptDataError`;
still there with an ancestor gone ends the chain there, as the contract's own
walk does.
"""

from __future__ import annotations

from typing import Any

from swarmstate._base import BaseStore
from swarmstate._errors import CheckpointDeletedError, CorruptDataError
from swarmstate.integrations.langgraph import reads
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.values import Context, Values

__all__ = ["delta_history"]

_PAGE = 256
_Group = tuple[Any, list[Any]]  # (checkpoint entry, its write entries)


class _Chain:
    """The groups of one thread namespace, read newest first and kept by checkpoint id.

    Only for the length of one call: pending writes can be written again
    under the same key after a ``restore()`` (a re-run makes the same task
    ids), so bytes read by an earlier call are never reused.
    """

    def __init__(self, store: BaseStore, namespace: str, below: str) -> None:
        self.store = store
        self.namespace = namespace
        self.groups: dict[str, _Group] = {}
        self._below: str | None = below  # the next page ends here; None once exhausted
        # Writes seen at the bottom of a page whose checkpoint is on the next one.
        self._pending: reads.Pending = ([], None)

    def get(self, checkpoint_id: str) -> _Group | None:
        """The group of ``checkpoint_id``, paging down to it when it sorts below what was read."""
        if checkpoint_id in self.groups:
            return self.groups[checkpoint_id]
        head = keys.ordered(checkpoint_id)
        while self._below is not None and head < self._below:
            self._page()
            if checkpoint_id in self.groups:
                return self.groups[checkpoint_id]
        start, stop = keys.group_range(checkpoint_id)
        rows = self.store.items(self.namespace, start=start, stop=stop, raw=True)
        if not rows or rows[0][0] != start + keys.CHECKPOINT:
            return None
        group = (rows[0][1], [value for _, value in rows[1:]])
        self.groups[checkpoint_id] = group
        return group

    def _page(self) -> None:
        assert self._below is not None
        rows = self.store.items(
            self.namespace, stop=self._below, reverse=True, limit=_PAGE, raw=True
        )
        found, self._pending = reads.fold(rows, self._pending)
        for checkpoint_id, stored_entry, writes in found:
            self.groups.setdefault(checkpoint_id, (stored_entry, writes))
        self._below = rows[-1][0] if len(rows) == _PAGE else None


def delta_history(
    store: BaseStore,
    values: Values,
    serde: Any,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    channels: list[str],
) -> dict[str, Any]:
    """The ``DeltaChannelHistory`` of each channel for one target checkpoint."""
    if not channels:
        return {}
    namespace = keys.scope(thread_id, checkpoint_ns)
    if checkpoint_id is None:
        latest = store.keys(namespace, reverse=True, limit=1)
        if not latest:
            return {channel: {"writes": []} for channel in channels}
        checkpoint_id = keys.parse_entry_key(latest[0])[0]
    # The first page reaches up to the target's own group (its key and writes).
    chain = _Chain(store, namespace, keys.group_range(checkpoint_id)[1])
    target = chain.get(checkpoint_id)
    if target is None:
        raise _deleted(thread_id, checkpoint_ns, checkpoint_id)
    collected: dict[str, list[list[Any]]] = {channel: [] for channel in channels}
    legacy_seeds: dict[str, Any] = {}
    wanted: dict[tuple[Context, str], tuple[Any, list[Any]]] = {}
    seed_of: dict[str, tuple[Context, str]] = {}
    remaining = set(channels)
    seen = {checkpoint_id}
    cursor = _decode(values, serde, thread_id, checkpoint_ns, checkpoint_id, target[0]).parent_id
    cut = False  # an ancestor named by its child was not found
    while cursor is not None and remaining and cursor not in seen:
        group = chain.get(cursor)
        if group is None:
            cut = True
            break
        seen.add(cursor)
        decoded = _decode(values, serde, thread_id, checkpoint_ns, cursor, group[0])
        try:
            pending = (
                reads.pending_writes(serde, values.reviver, group[1], remaining) if group[1] else []
            )
        except CorruptDataError as exc:
            raise reads.corrupt(thread_id, checkpoint_ns, cursor, exc) from exc
        if any(type(write[2]) is reads.Unread for write in pending):
            row = reads.Found(thread_id, checkpoint_ns, cursor, {}, {}, None, pending, None)
            if reads.resolve_writes(serde, values, [row]):
                # A chunk is missing: damaged, unless the ancestor went meanwhile
                # (then the chain ends here, as where an ancestor is not found).
                if not store.contains(namespace, keys.checkpoint_key(cursor)):
                    cut = True
                    break
                raise reads.corrupt(
                    thread_id,
                    checkpoint_ns,
                    cursor,
                    CorruptDataError("a pending write's stored bytes are missing a chunk"),
                )
        for write in reversed(pending):
            collected[write[1]].append(list(write))
        # A channel ends at the first ancestor holding a value for it (after its writes).
        for channel in sorted(remaining):
            if decoded.forms is None:
                if channel in decoded.checkpoint["channel_values"]:
                    legacy_seeds[channel] = decoded.checkpoint["channel_values"][channel]
                    remaining.discard(channel)
                continue
            form = decoded.forms.get(channel)
            if form is not None:
                asked = ((thread_id, checkpoint_ns, cursor), channel)
                seed_of[channel] = asked
                wanted[asked] = (decoded.checkpoint["channel_versions"].get(channel), form)
                remaining.discard(channel)
        cursor = decoded.parent_id
    stored, lost = values.read(serde, wanted) if wanted else ({}, [])
    if lost:
        (_, _, holder), channel = lost[0]
        # Damaged where the checkpoint holding the value exists, or where the
        # target does (it needs that value); else both were deleted meanwhile.
        if not store.contains(namespace, keys.checkpoint_key(holder)) and not store.contains(
            namespace, keys.checkpoint_key(checkpoint_id)
        ):
            raise _deleted(thread_id, checkpoint_ns, checkpoint_id)
        raise CorruptDataError(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (checkpoint_ns "
            f"{checkpoint_ns!r}): the value of DeltaChannel {channel!r} cannot be "
            f"rebuilt, as the stored value it starts from (at checkpoint {holder!r}) "
            "is missing a chunk; the stored data is damaged or incomplete"
        )
    if cut and not store.contains(namespace, keys.checkpoint_key(checkpoint_id)):
        raise _deleted(thread_id, checkpoint_ns, checkpoint_id)
    seeds = {**legacy_seeds, **{ch: stored[a] for ch, a in seed_of.items() if a in stored}}
    result: dict[str, Any] = {}
    for channel in channels:
        stored_entry: dict[str, Any] = {"writes": [tuple(w) for w in reversed(collected[channel])]}
        if channel in seeds:
            stored_entry["seed"] = seeds[channel]
        result[channel] = stored_entry
    return result


def _deleted(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> CheckpointDeletedError:
    return CheckpointDeletedError(
        f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (checkpoint_ns "
        f"{checkpoint_ns!r}) does not exist: it was deleted after it was read (retention, "
        "prune or delete_thread, perhaps through another saver), or never was, so its "
        "DeltaChannel values cannot be rebuilt; read the thread again (get_state, "
        "get_state_history)"
    )


def _decode(
    values: Values,
    serde: Any,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    stored_entry: Any,
) -> entry.Decoded:
    """The decoded entry; shared, so read only (a legacy entry, whose values a
    seed is taken from, is decoded anew every time)."""
    cache = values.entries_by_bytes
    found: entry.Decoded | None = cache.get(stored_entry) if type(stored_entry) is bytes else None
    if found is not None:
        return found
    try:
        decoded = entry.decode(serde, stored_entry)
    except CorruptDataError as exc:
        raise reads.corrupt(thread_id, checkpoint_ns, checkpoint_id, exc) from exc
    if decoded.forms is not None and type(stored_entry) is bytes and cache.budget:
        cache.put(stored_entry, decoded)
    return decoded

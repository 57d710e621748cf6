"""The saver's read path: stored records and pending writes -> ``CheckpointTuple``.

The adapter (:mod:`.saver`) checks the arguments and names the scopes to
read; :class:`Reader` reads the rows (one range per checkpoint group, or the
order tags across threads, :mod:`.catalog`), decodes them (:mod:`.reads`)
through the serializer the reads allow (:mod:`.allowlist`), and fetches the
channel values for a batch of results at once (:mod:`.values`).
``get_tuple`` is a plan (:mod:`.steps`), run blocking or awaited.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any, Final

from langgraph.checkpoint.base import CheckpointTuple

from swarmstate._base import BaseStore
from swarmstate.integrations.langgraph import catalog, reads, steps
from swarmstate.integrations.langgraph.allowlist import Allowlist
from swarmstate.integrations.langgraph.format import keys
from swarmstate.integrations.langgraph.values import Values

__all__ = ["Reader"]

_BATCH: Final = 32
_TAIL: Final = 64
"""Rows a latest read takes from the newest checkpoint it knows of to the namespace's
end: that checkpoint's group, and what others wrote after it, in one read."""
_List = list

Group = tuple[str, str, str, Any, _List[Any]]
"""``(thread id, checkpoint_ns, checkpoint id, stored entry, its pending writes)``."""


class Reader:
    """The read path of a saver over one store.

    Shared by a saver and its copies (LangGraph's ``with_allowlist`` makes
    one with another serializer): the serializer is passed to each read.
    """

    def __init__(
        self, store: BaseStore, values: Values, allowlist: Allowlist, namespaces: keys.Scopes
    ) -> None:
        self.store = store
        self.values = values
        self.allowlist = allowlist
        self.namespaces = namespaces

    def get_tuple(
        self, serde: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> steps.Plan[CheckpointTuple | None]:
        """The checkpoint ``checkpoint_id``, or the latest of the thread namespace, as a plan."""
        namespace = self.namespaces.namespace(thread_id, checkpoint_ns)
        if checkpoint_id:
            return (yield from self._group(serde, thread_id, checkpoint_ns, checkpoint_id))
        known = self.values.latest.get(namespace)
        if known is not None:
            # The newest checkpoint this saver wrote or read here, and everything
            # after it: when that reaches the end, its last group is the latest,
            # with its writes, in one read.
            rows = yield steps.Items(namespace, start=keys.group_range(known)[0], limit=_TAIL)
            last = _last_group(rows) if len(rows) < _TAIL else None
            if last is not None:
                found = self.decode(serde, thread_id, checkpoint_ns, *last)
                one = yield from self._one_plan(serde, found)
                if one is not None:
                    self.values.saw_latest(namespace, last[0])
                    return one
        one = yield from self._latest(serde, thread_id, checkpoint_ns, namespace)
        if one is not None:
            self.values.saw_latest(namespace, one.config["configurable"]["checkpoint_id"])
        return one

    def _latest(
        self, serde: Any, thread_id: str, checkpoint_ns: str, namespace: str
    ) -> steps.Plan[CheckpointTuple | None]:
        """The latest checkpoint of ``namespace`` found from its last key."""
        latest = yield steps.Items(namespace, reverse=True, limit=1)
        if not latest:
            return None
        key, stored_entry = latest[0]
        if key[-1] == keys.CHECKPOINT:
            # Writes sort after their checkpoint: the last key being a checkpoint means none.
            found = self.decode(
                serde, thread_id, checkpoint_ns, keys.checkpoint_id_of(key), stored_entry, []
            )
            one = yield from self._one_plan(serde, found)
            if one is not None:
                return one
        else:
            # A pending write: its checkpoint's group (the entry and its writes) is one range.
            try:
                latest_id = keys.parse_entry_key(key)[0]
            except ValueError:  # not a key the saver writes: the scan below says what it is
                latest_id = ""
            if latest_id:
                one = yield from self._group(serde, thread_id, checkpoint_ns, latest_id)
                if one is not None:
                    return one
        # Writes with no checkpoint last (a subgraph's first writes before its put),
        # or deleted while read: the group reads, left blocking.
        grouped: CheckpointTuple | None = yield steps.Blocking(
            lambda: self._latest_group(serde, thread_id, checkpoint_ns)
        )
        return grouped

    def _group(
        self, serde: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> steps.Plan[CheckpointTuple | None]:
        """A checkpoint and its pending writes, read as one range; None if it is not stored."""
        namespace = self.namespaces.namespace(thread_id, checkpoint_ns)
        start, stop = keys.group_range(checkpoint_id)
        rows = yield steps.Items(namespace, start=start, stop=stop)
        if not rows or rows[0][0] != start + keys.CHECKPOINT:
            return None
        found = self.decode(
            serde, thread_id, checkpoint_ns, checkpoint_id, rows[0][1], [w for _, w in rows[1:]]
        )
        return (yield from self._one_plan(serde, found))

    def _latest_group(
        self, serde: Any, thread_id: str, checkpoint_ns: str
    ) -> CheckpointTuple | None:
        """The newest checkpoint of a namespace that can be read, with its writes."""
        namespace = self.namespaces.namespace(thread_id, checkpoint_ns)
        for group in reads.groups(self.store.items, namespace, None, 8):
            # The newest that can be read: one deleted while it was read is skipped.
            one = self._one(serde, self.decode(serde, thread_id, checkpoint_ns, *group))
            if one is not None:
                return one
        return None

    def listed(
        self,
        serde: Any,
        scopes: _List[tuple[str, str]] | None,
        before_id: str | None,
        limit: int | None,
        filter: dict[str, Any] | None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``scopes`` (``(thread id, checkpoint_ns)`` pairs),
        or of every thread from the order tags when ``scopes`` is None; only those whose
        id sorts before ``before_id``, at most ``limit``, matching ``filter``.

        Channel values are read for a batch of results at once, so versions
        that share chunks fetch them once.
        """
        merged: Iterator[Group]
        if scopes is None:
            # Every thread: the order tags, newest first (one range a page).
            merged = self._from_index(before_id)
        else:
            stop = keys.ordered(before_id) if before_id else None
            # Without a filter the first page is exactly what the caller asked for.
            page = limit if limit is not None and not filter else 16
            streams = [self._tagged(t, n, stop, page) for t, n in scopes]
            merged = (
                streams[0]
                if len(streams) == 1
                else heapq.merge(*streams, key=lambda row: row[2], reverse=True)
            )
        remaining = limit

        def batches() -> Iterator[_List[reads.Found]]:
            # Decoded rows, a batch at a time: at most what is still to be returned.
            batch: _List[reads.Found] = []
            for thread_id, checkpoint_ns, checkpoint_id, stored_entry, writes in merged:
                row = self.decode(
                    serde,
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    stored_entry,
                    writes,
                    filter,
                    remember=False,
                )
                if row is None:
                    continue
                batch.append(row)
                if len(batch) >= min(_BATCH, remaining if remaining is not None else _BATCH):
                    yield batch
                    batch = []
            yield batch

        for batch in batches():
            for found in self.complete(serde, batch):
                yield found
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    def _from_index(self, before_id: str | None) -> Iterator[Group]:
        """Every checkpoint of the store newest first, from the order tags (:mod:`.catalog`).

        A checkpoint deleted between the two reads is skipped.
        """
        items = self.store.items
        for checkpoint_id, thread_id, checkpoint_ns in catalog.latest(self.store, before_id):
            start, stop = keys.group_range(checkpoint_id)
            rows = items(keys.scope(thread_id, checkpoint_ns), start=start, stop=stop, raw=True)
            if rows and rows[0][0] == start + keys.CHECKPOINT:
                yield thread_id, checkpoint_ns, checkpoint_id, rows[0][1], [w for _, w in rows[1:]]

    def _tagged(
        self, thread_id: str, checkpoint_ns: str, stop: str | None, page: int
    ) -> Iterator[Group]:
        for checkpoint_id, stored_entry, writes in reads.groups(
            self.store.items, keys.scope(thread_id, checkpoint_ns), stop, page
        ):
            yield thread_id, checkpoint_ns, checkpoint_id, stored_entry, writes

    def decode(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        entry: Any,
        writes: _List[Any],
        filter: dict[str, Any] | None = None,
        *,
        remember: bool = True,
    ) -> reads.Found | None:
        """A stored entry and its writes decoded (:func:`.reads.decode`), values not read yet."""
        return self.allowlist.read(
            serde,
            lambda reader: reads.decode(
                reader,
                self.values,
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                entry,
                writes,
                filter,
                remember=remember,
            ),
        )

    def complete(
        self, serde: Any, batch: _List[reads.Found], *, offline: bool = False
    ) -> _List[CheckpointTuple]:
        """The tuples of decoded entries, their channel values read (:func:`.reads.complete`)."""
        return self.allowlist.read(
            serde,
            lambda reader: reads.complete(reader, self.values, batch, offline=offline),
        )

    def _one(self, serde: Any, found: reads.Found | None) -> CheckpointTuple | None:
        if found is None:
            return None
        done = self.complete(serde, [found])
        return done[0] if done else None

    def _one_plan(
        self, serde: Any, found: reads.Found | None
    ) -> steps.Plan[CheckpointTuple | None]:
        """:meth:`_one` as a plan: awaited, on the loop; chunks not cached are one store step."""
        if found is None:
            return None
        try:
            done = self.complete(serde, [found], offline=True)
            return done[0] if done else None
        except steps.NeedsStore as need:
            pairs = need.args[0] if need.args else None
        if pairs:
            # The value's chunks not cached: one read, awaited like any store call.
            self.values.take_chunks(pairs, (yield steps.GetMany(pairs)))
        done = yield steps.Blocking(
            lambda: self.complete(serde, [found]),
            first=lambda: self.complete(serde, [found], offline=True),
        )
        return done[0] if done else None


def _last_group(rows: _List[tuple[str, Any]]) -> tuple[str, Any, _List[Any]] | None:
    """``(checkpoint id, stored entry, its writes)`` of the last checkpoint of ``rows``
    (in key order, to the namespace's end) when every row after it is one of its
    writes; None otherwise (no checkpoint, or writes of another after it)."""
    for at in range(len(rows) - 1, -1, -1):
        key = rows[at][0]
        if key[-1] == keys.CHECKPOINT:
            checkpoint_id = keys.checkpoint_id_of(key)
            start, stop = keys.group_range(checkpoint_id)
            tail = rows[at + 1 :]
            if key != start + keys.CHECKPOINT or not all(start < k < stop for k, _ in tail):
                return None
            return checkpoint_id, rows[at][1], [w for _, w in tail]
    return None

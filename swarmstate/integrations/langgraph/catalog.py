"""The store-wide indexes of the checkpointer: what one ordered range answers across threads.

Questions about the whole store cost the answer, not the number of threads:

* the *checkpoint index* lists every checkpoint by id, then thread and
  namespace: ``list(None, before=..., limit=k)`` is one reverse range of
  ``k`` entries (and a filter reads entries until ``k`` match);
* the *activity index* holds, per thread, the periods (about 27 seconds
  each) it was written in:
  threads idle since a moment are the entries before it (a retention sweep
  reads what it expires plus the stale entries it then deletes, each once),
  and threads by last activity are the newest entries;
* the *registry* holds every thread once: counting threads is counting a
  namespace, listing them one range.

A put writes its checkpoint's index entry in its own atomic batch and
ensures the thread's registry entry and its activity entry for the period
(a lookup each, once they exist; only when a namespace starts or the period
moved on since the parent). Deleting checkpoints deletes their index
entries; deleting a thread deletes its registry and activity entries (it
keeps a record of its periods for that). The invariant: a thread with
checkpoints has its registry entry and the activity entry of its newest
checkpoint's period, and none newer; a rare call that deletes some of a
thread's checkpoints (``delete_for_runs``) restores it (:func:`settle`).

Stores written before these indexes existed are indexed once, by the first
put of a saver on them (:func:`ensure_indexed`): one pass over the threads.
Until then (a store only read, or read-only) the queries scan the threads,
as they did before; a read never writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._codec import dumps
from swarmstate.integrations.langgraph import keys

__all__ = [
    "activity_entries",
    "ensure_indexed",
    "index_entry",
    "indexed",
    "latest",
    "made_period",
    "newest_period",
    "period_of",
    "settle",
    "start_indexing",
    "thread_count",
    "threads_by_activity",
]

NIL = dumps(None)
_PAGE = 256
_INDEXED = "indexes"
_VERSION = 1


_GREGORIAN_TO_UNIX = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01
PERIOD_SECONDS = (1 << 28) / 1e7
"""The activity index's time step: 2**28 ticks of 100 ns, about 26.8 seconds."""


def period_of(checkpoint_id: str) -> str:
    """The activity period of a checkpoint, as 8 hex digits that sort by time.

    LangGraph's checkpoint ids are UUIDv6, whose first 8 hex digits are the top
    32 bits of the time they were made: that prefix is the period, read with
    no parsing (a put compares its id's with its parent's). Other ids get the
    period of the moment they are written.
    """
    made = made_period(checkpoint_id)
    if made is not None:
        return made
    ticks = int(time.time() * 1e7) + _GREGORIAN_TO_UNIX
    return f"{(ticks >> 28) & 0xFFFFFFFF:08x}"


def period_seconds(period: str) -> float:
    """The moment (epoch seconds) a period starts."""
    return ((int(period, 16) << 28) - _GREGORIAN_TO_UNIX) / 1e7


def period_at(moment: float) -> str:
    """The period a moment (epoch seconds) falls in."""
    ticks = max(0, int(moment * 1e7) + _GREGORIAN_TO_UNIX)
    return f"{min(ticks >> 28, 0xFFFFFFFF):08x}"


def index_entry(checkpoint_id: str, thread_id: str, checkpoint_ns: str) -> tuple[str, str, bytes]:
    """The checkpoint index entry a put writes."""
    return (keys.INDEX, keys.index_key(checkpoint_id, thread_id, checkpoint_ns), NIL)


def activity_entries(thread_id: str, period: str) -> list[tuple[str, str, bytes]]:
    """The entries a put ensures when a thread namespace starts or its period moves on.

    The thread's own record of its periods is the way back to its activity
    entries when it is deleted.
    """
    return [
        (keys.ACTIVITY, keys.activity_key(period, thread_id), NIL),
        (keys.periods(thread_id), period, NIL),
        (keys.REGISTRY, keys.field(thread_id), NIL),
    ]


def latest(store: BaseStore, before: str | None) -> Iterator[tuple[str, str, str]]:
    """``(checkpoint_id, thread_id, checkpoint_ns)`` of every checkpoint, newest first.

    ``before``: only ids that sort before it. Read a page at a time.
    """
    stop = keys.ordered(before) if before is not None else None
    page = 16
    while True:
        key_names = store.keys(keys.INDEX, stop=stop, reverse=True, limit=page)
        for key in key_names:
            yield keys.parse_index_key(key)
        if len(key_names) < page:
            return
        stop = key_names[-1]
        page = min(page * 4, _PAGE)


def threads_by_activity(
    store: BaseStore, *, offset: int = 0, limit: int | None = None
) -> list[tuple[str, str]]:
    """``(thread_id, newest checkpoint id)``, the thread written most recently first.

    A page: ``offset`` threads skipped, at most ``limit`` returned. The
    activity entries are read newest first, period by period; a thread
    ranks by the newest period it was written in (where its newest
    checkpoint is), then by that checkpoint. The threads of a period are
    all taken, each with its newest checkpoint, while the page has room for
    them; in the period that fills it, the newest are found from the
    checkpoint index over that period only, so a burst of thousands of
    threads in one period costs the page, not the burst.
    """
    wanted = None if limit is None else offset + limit
    chosen: list[tuple[str, str]] = []
    seen: set[str] = set()  # threads of newer periods
    period: str | None = None
    group: list[str] = []  # threads of ``period`` not in ``seen``

    def settle() -> None:
        ranked = [(t, newest) for t in group if (newest := newest_checkpoint(store, t))]
        ranked.sort(key=lambda item: (item[1], item[0]), reverse=True)
        chosen.extend(ranked)
        seen.update(group)
        group.clear()

    stop: str | None = None
    while wanted is None or len(chosen) < wanted:
        key_names = store.keys(keys.ACTIVITY, stop=stop, reverse=True, limit=_PAGE)
        for key in key_names:
            at, thread_id = keys.parse_activity_key(key)
            if at != period:
                settle()
                period = at
                if wanted is not None and len(chosen) >= wanted:
                    break
            if thread_id in seen or thread_id in group:
                continue
            group.append(thread_id)
            if wanted is not None and len(chosen) + len(group) > wanted:
                # The period that fills the page: its newest threads, from the index.
                group.clear()
                chosen.extend(_newest_in_period(store, at, seen, wanted - len(chosen)))
                return chosen[offset:wanted]
        else:
            if len(key_names) == _PAGE:
                stop = key_names[-1]
                continue
            settle()
        break
    return chosen[offset:wanted]


def _newest_in_period(
    store: BaseStore, period: str, newer: set[str], need: int
) -> list[tuple[str, str]]:
    """The ``need`` threads not in ``newer`` with the newest checkpoints of ``period``.

    Read from the checkpoint index over the period, newest first: the first
    checkpoint met of a thread is its newest (a thread written later is in
    ``newer``). Threads whose ids are not LangGraph's are not in the index
    by period: when it runs out first, the period's activity entries are
    read and those threads looked up in their own namespaces.
    """
    found: dict[str, str] = {}
    stop: str | None = period + "\U0010ffff"
    while len(found) < need:
        key_names = store.keys(keys.INDEX, start=period, stop=stop, reverse=True, limit=_PAGE)
        for key in key_names:
            checkpoint_id, thread_id, _ = keys.parse_index_key(key)
            if thread_id not in newer and thread_id not in found:
                found[thread_id] = checkpoint_id
                if len(found) == need:
                    break
        if len(key_names) < _PAGE:
            break
        stop = key_names[-1]
    if len(found) < need:
        others = [
            thread_id
            for key in store.keys(keys.ACTIVITY, start=period, stop=period + "\U0010ffff")
            if (thread_id := keys.parse_activity_key(key)[1]) not in newer
            and thread_id not in found
        ]
        rest = [(t, newest) for t in others if (newest := newest_checkpoint(store, t))]
        rest.sort(key=lambda item: (item[1], item[0]), reverse=True)
        found.update(rest[: need - len(found)])
    return sorted(found.items(), key=lambda item: (item[1], item[0]), reverse=True)


def newest_checkpoint(store: BaseStore, thread_id: str) -> str | None:
    """The newest checkpoint id of a thread, over its namespaces."""
    newest = None
    for namespace in store.namespaces(keys.thread_prefix(thread_id)):
        if keys.parse_scope(namespace) is None:
            continue
        for key in store.keys(namespace, reverse=True, limit=1):
            checkpoint_id = keys.parse_entry_key(key)[0]
            if newest is None or checkpoint_id > newest:
                newest = checkpoint_id
    return newest


def newest_period(store: BaseStore, thread_id: str) -> str | None:
    """The newest activity period a thread records, or None."""
    found = store.keys(keys.periods(thread_id), reverse=True, limit=1)
    return found[0] if found else None


def made_period(checkpoint_id: str) -> str | None:
    """The period a LangGraph (UUIDv6) checkpoint id was made in; None for other ids."""
    if len(checkpoint_id) == 36 and checkpoint_id[14] == "6" and checkpoint_id[8] == "-":
        return checkpoint_id[:8].lower()
    return None


def settle(store: BaseStore, thread_id: str) -> None:
    """Make a thread's registry and activity entries say what it holds, after some of its
    checkpoints were deleted (not the whole thread: :func:`forgotten` is for that).

    A thread left with no checkpoint leaves the registry and the activity
    index; one whose newest checkpoint went ranks by the newest it has left
    (when LangGraph made its id: the period of another id is not known, and
    its entries stay). A put landing meanwhile is seen by the look taken
    after the deletions, and its entries are ensured again.
    """
    for _ in range(8):
        newest = newest_checkpoint(store, thread_id)
        period = None if newest is None else made_period(newest)
        if newest is not None and period is None:
            return
        recorded = store.keys(keys.periods(thread_id))
        doomed = [p for p in recorded if period is None or p > period]
        pairs = [(keys.ACTIVITY, keys.activity_key(p, thread_id)) for p in doomed]
        pairs += [(keys.periods(thread_id), p) for p in doomed]
        if newest is None:
            pairs.append((keys.REGISTRY, keys.field(thread_id)))
        for start in range(0, len(pairs), _PAGE):
            store.delete_many(pairs[start : start + _PAGE])
        if period is not None:
            store.set_many([], ensure=activity_entries(thread_id, period), raw=True)
        if newest_checkpoint(store, thread_id) == newest:
            return


def thread_count(store: BaseStore) -> int:
    """How many threads have checkpoints."""
    return store.count(keys.REGISTRY)


def idle_entries(store: BaseStore, cutoff: str, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` activity entries ``(period, thread)`` of periods up to ``cutoff``,
    oldest first."""
    stop = cutoff + "\U0010ffff"
    return [
        keys.parse_activity_key(key) for key in store.keys(keys.ACTIVITY, stop=stop, limit=limit)
    ]


def thread_entries(store: BaseStore, thread_id: str) -> list[tuple[str, str]]:
    """The checkpoint index entries of one thread's checkpoints, from its namespaces."""
    pairs = []
    for namespace in store.namespaces(keys.thread_prefix(thread_id)):
        scope = keys.parse_scope(namespace)
        if scope is None:
            continue
        for key in store.keys(namespace):
            if key[-1] == keys.CHECKPOINT:
                pairs.append((keys.INDEX, keys.index_key(keys.checkpoint_id_of(key), *scope)))
    return pairs


def thread_activity(store: BaseStore, thread_id: str) -> list[tuple[str, str]]:
    """The activity entries of one thread, from its record of its periods."""
    return [
        (keys.ACTIVITY, keys.activity_key(p, thread_id))
        for p in store.keys(keys.periods(thread_id))
    ]


def forgotten(thread_id: str, index: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """What deleting a thread deletes from the store-wide indexes: its registry entry and
    ``index`` (its checkpoints' and activity entries, read before its namespaces go)."""
    return [(keys.REGISTRY, keys.field(thread_id)), *index]


def indexed(store: BaseStore) -> bool:
    """Whether the store's indexes hold every checkpoint and thread (its marker says so)."""
    return bool(store.get_many([(keys.META, _INDEXED)])[0] == _VERSION)


def start_indexing(store: BaseStore) -> list[tuple[str, str, Any]]:
    """What a saver's first put adds to its batch so that the store is (and is marked) indexed.

    A store without the marker and without threads needs only the marker, in
    that batch; one with threads of an earlier release is indexed first.
    """
    if indexed(store):
        return []
    if not store.namespaces(keys.THREADS):
        return [(keys.META, _INDEXED, dumps(_VERSION))]
    ensure_indexed(store)
    return []


def ensure_indexed(store: BaseStore) -> None:
    """Index the checkpoints of a store written before the indexes existed, then mark it.

    One pass over the threads, run by the first put of a saver on a store
    without the marker (and by ``setup()``); every put since writes its own
    entries, so once marked a store stays complete.
    """
    if indexed(store):
        return
    rows: list[tuple[str, str, Any]] = []
    threads: dict[str, str] = {}
    for namespace in store.namespaces(keys.THREADS):
        scope = keys.parse_scope(namespace)
        if scope is None:
            continue
        thread_id, checkpoint_ns = scope
        for key in store.keys(namespace):
            if key[-1] != keys.CHECKPOINT:
                continue
            checkpoint_id = keys.checkpoint_id_of(key)
            rows.append(index_entry(checkpoint_id, thread_id, checkpoint_ns))
            period = period_of(checkpoint_id)
            if period > threads.get(thread_id, ""):
                threads[thread_id] = period
            if len(rows) >= _PAGE:
                store.set_many(rows, raw=True)
                rows = []
    if rows:
        store.set_many(rows, raw=True)
    ensure = [entry for t, p in threads.items() for entry in activity_entries(t, p)]
    for start in range(0, len(ensure), _PAGE):
        store.set_many([], ensure=ensure[start : start + _PAGE], raw=True)
    store.set(keys.META, _INDEXED, _VERSION)

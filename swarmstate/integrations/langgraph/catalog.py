"""Questions across threads, answered from the tags of the checkpoint entries themselves.

Every checkpoint entry carries two tags, kept by the store on the entry's
own row (:class:`~swarmstate.Tags`): ``order``, ``O(checkpoint id)``, and,
when its metadata names a run, ``group``, the run's tag (:func:`run_tag`).
So a put writes no row beside its checkpoint, and:

* ``list(None, before=..., limit=k)`` is one reverse range of the order
  index (:func:`latest`);
* threads by last activity walk the order index newest first, keeping each
  thread's first checkpoint met (:func:`threads_by_activity`): the cost is the
  checkpoints newer than the last thread returned;
* idle threads: a retention sweep walks the order index oldest first from the
  mark the previous sweep left (:func:`sweep_start`) up to the cutoff's id;
  every live thread's newest checkpoint is past the mark, so each checkpoint is
  walked once over all sweeps. An operation that makes a thread's newest
  checkpoint an older one (``delete_for_runs``) moves the mark back to it
  (:func:`reconsider`);
* a run's checkpoints are one exact range of the group index
  (:func:`run_checkpoints`);
* the threads themselves are the thread namespaces (counting them is rare).

LangGraph's checkpoint ids are UUIDv6, time first, so id order is time order.
Ids of other shapes sort by their text, wherever that puts them in time.

Stores written before tags (index, activity, registry and run rows beside the
checkpoints) are converted once (:func:`convert`, run by ``setup()`` and by
a saver's first put); until then readers scan the thread namespaces, as
before, and a read never writes. The invariant: once the store is marked
converted (:func:`converted`), every checkpoint entry carries its tags.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any, Final

from swarmstate._base import BaseStore
from swarmstate._checks import MAX_TAG_BYTES, Absent, Condition, Holds, Tags, Transaction
from swarmstate._codec import dumps, loads
from swarmstate._errors import ConflictError
from swarmstate.integrations.langgraph.format import keys

__all__ = [
    "ORDER_BYTES",
    "checkpoint_tags",
    "convert",
    "converted",
    "cutoff_id",
    "latest",
    "newest_checkpoint",
    "order_too_long",
    "reconsider",
    "run_checkpoints",
    "run_range",
    "run_tag",
    "start_converting",
    "sweep_start",
    "thread_count",
    "threads",
    "threads_by_activity",
]

_PAGE = 256
_TAGS = "tags"
"""The META row saying every checkpoint entry carries its tags."""
_VERSION = 1
_SWEEP = "sweep"
"""The META row of the idle sweep's mark: the order value the next sweep starts at."""
_OLD_INDEXES = "indexes"
"""The META row of the release before tags (its store-wide index rows were complete)."""
ORDER_BYTES: Final = MAX_TAG_BYTES
"""The most UTF-8 bytes ``O(checkpoint id)`` may take (a tag value's limit)."""
_RUN_FIELD_BYTES = 256
_GREGORIAN_TO_UNIX = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01


def run_tag(run_id: str) -> str:
    """The group tag of a run's checkpoints: ``F(run_id)``, or a digest of a long or odd id.

    ``F(run_id)`` when its UTF-8 takes at most 256 bytes and it holds no NUL
    (so ``tag + "\\x01"`` bounds it exactly); else ``#`` and the SHA-256 of
    the id, which no field starts with.
    """
    if "\x00" not in run_id:
        try:
            size = len(run_id.encode())
        except UnicodeEncodeError:  # a lone surrogate: no tag can hold it
            size = _RUN_FIELD_BYTES + 1
        if size <= _RUN_FIELD_BYTES:
            return keys.field(run_id)
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "#" + digest


def order_too_long(order: str) -> bool:
    """Whether an ``O(checkpoint id)`` is over the tag limit (:data:`ORDER_BYTES`)."""
    return len(order) * 4 > ORDER_BYTES and len(order.encode("utf-8", "surrogatepass")) > (
        ORDER_BYTES
    )


def checkpoint_tags(order: str, run_id: object) -> Tags:
    """The tags of a checkpoint entry: its ``O(id)``, and its run's tag when it names one."""
    return Tags(order=order, group=run_tag(run_id) if type(run_id) is str else None)


def _parse(namespace: str, key: str) -> tuple[str, str, str] | None:
    """``(checkpoint_id, thread_id, checkpoint_ns)`` of a tagged checkpoint entry, else None."""
    scope = keys.parse_scope(namespace)
    if scope is None or not key or key[-1] != keys.CHECKPOINT:
        return None
    return keys.checkpoint_id_of(key), scope[0], scope[1]


def latest(store: BaseStore, before: str | None) -> Iterator[tuple[str, str, str]]:
    """``(checkpoint_id, thread_id, checkpoint_ns)`` of every checkpoint, newest first.

    ``before``: only ids that sort before it. Read a page at a time from the
    order index; ties (a copied thread's checkpoints) by namespace, then key.
    """
    stop = keys.ordered(before) if before is not None else None
    over = None
    if stop is not None and order_too_long(stop):
        over, stop = stop, None  # no id that long is tagged: read from the top, skip to it
    page = 16
    done: set[tuple[str, str]] = set()
    while True:
        found = store.tagged("order", stop=stop, reverse=True, limit=page)
        for value, namespace, key in found:
            if (namespace, key) in done or (over is not None and value >= over):
                continue
            parsed = _parse(namespace, key)
            if parsed is not None:
                yield parsed
        if len(found) < page:
            return
        # The next page ends at the last value, included: its ties were met, or are next.
        last = found[-1][0]
        done = {(ns, key) for value, ns, key in found if value == last}
        stop = _after(last)
        page = min(page * 4, _PAGE)


def _after(value: str) -> str:
    """The least bound above ``value`` and below every greater order value.

    Order values (``O(id)``) are prefix-free and hold no NUL, so nothing lies
    between ``value`` and ``value + "\x01"`` (and no NUL goes to a server).
    """
    return value + "\x01"


def threads_by_activity(
    store: BaseStore, *, offset: int = 0, limit: int | None = None
) -> list[tuple[str, str]]:
    """``(thread_id, newest checkpoint id)``, the thread written most recently first.

    A page: ``offset`` threads skipped, at most ``limit`` returned. Ranked by
    the newest checkpoint id, then thread id, both descending: the order
    index read newest first, the first checkpoint met of a thread being its
    newest (over its namespaces).
    """
    wanted = None if limit is None else offset + limit
    chosen: list[tuple[str, str]] = []
    seen: set[str] = set()
    group: list[tuple[str, str]] = []  # the threads first met at the current value
    value: str | None = None
    stop: str | None = None
    done: set[tuple[str, str]] = set()
    page = 64
    while wanted is None or len(chosen) < wanted:
        found = store.tagged("order", stop=stop, reverse=True, limit=page)
        for tag_value, namespace, key in found:
            if (namespace, key) in done:
                continue
            if tag_value != value:
                group.sort(reverse=True)
                chosen.extend((t, c) for c, t in group)
                group = []
                value = tag_value
                if wanted is not None and len(chosen) >= wanted:
                    break
            parsed = _parse(namespace, key)
            if parsed is None or parsed[1] in seen:
                continue
            seen.add(parsed[1])
            group.append((parsed[0], parsed[1]))
        else:
            if len(found) == page:
                last = found[-1][0]
                done = {(ns, key) for v, ns, key in found if v == last}
                stop = _after(last)
                page = min(page * 4, _PAGE * 4)
                continue
        break
    group.sort(reverse=True)
    chosen.extend((t, c) for c, t in group)
    return chosen[offset:wanted]


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


def threads(store: BaseStore) -> list[str]:
    """Every thread id with a checkpoint namespace in the store, sorted."""
    return sorted(_threads(store))


def thread_count(store: BaseStore) -> int:
    """How many threads have checkpoints."""
    return len(_threads(store))


def _threads(store: BaseStore) -> list[str]:
    """The threads with a checkpoint namespace, in namespace order.

    A thread's namespaces are adjacent (its prefix is prefix-free), so one
    is parsed a thread; a namespace that cannot be a checkpoint namespace
    (not ending in ``c``) is not parsed at all.
    """
    found: list[str] = []
    prefix = None
    for namespace in store.namespaces(keys.THREADS):
        if namespace[-1] != keys.CHECKPOINTS or (prefix and namespace.startswith(prefix)):
            continue
        scope = keys.parse_scope(namespace)
        if scope is not None:
            found.append(scope[0])
            prefix = keys.thread_prefix(scope[0])
    return found


def run_range(run_id: str) -> tuple[str, str]:
    """``(start, stop)`` of the group tag values of one run's checkpoints: exactly its tag.

    A run's tag holds no NUL, so nothing lies between it and ``tag + "\x01"``.
    """
    tag = run_tag(run_id)
    return tag, tag + "\x01"


def run_checkpoints(store: BaseStore, run_id: str) -> list[tuple[str, str]]:
    """``(namespace, key)`` of every checkpoint entry whose metadata names ``run_id``."""
    start, stop = run_range(run_id)
    return [(ns, key) for _, ns, key in store.tagged("group", start=start, stop=stop)]


# -- the idle sweep's walk ---------------------------------------------------------


def cutoff_id(moment: float) -> str:
    """The smallest UUIDv6 text made at ``moment`` (epoch seconds): ids before it are older."""
    ticks = min(max(0, int(moment * 1e7) + _GREGORIAN_TO_UNIX), (1 << 60) - 1)
    high, mid, low = ticks >> 28, (ticks >> 12) & 0xFFFF, ticks & 0xFFF
    return f"{high:08x}-{mid:04x}-6{low:03x}-0000-000000000000"


def sweep_start(store: BaseStore) -> tuple[str | None, bytes | None]:
    """The order value the next idle sweep starts at (None: the oldest), with its stored bytes."""
    stored = store.get_many([(keys.META, _SWEEP)], raw=True)[0]
    start = loads(stored) if stored is not None else None
    return (start if type(start) is str else None), stored


def walk(
    store: BaseStore, start: str | None, stop: str, limit: int
) -> tuple[list[tuple[str, str]], str | None]:
    """``(thread, newest id met)`` met walking the order index from ``start`` up to ``stop``,
    at most about ``limit`` checkpoints (the last value's ties included), and where the next
    walk starts (None: nothing was walked)."""
    found = store.tagged("order", start=start, stop=stop, limit=limit)
    if len(found) == limit and found:
        last = found[-1][0]
        found += [
            row for row in store.tagged("order", start=last, stop=_after(last)) if row not in found
        ]
    met: dict[str, str] = {}
    for _, namespace, key in found:
        parsed = _parse(namespace, key)
        if parsed is not None:
            met[parsed[1]] = parsed[0]
    return list(met.items()), (_after(found[-1][0]) if found else None)


def advance(store: BaseStore, stored: bytes | None, start: str) -> bytes | None:
    """Move the sweep's mark to ``start``, unless another sweep or :func:`reconsider` moved it
    meanwhile (the mark never skips what they asked for).

    Returns the mark's stored bytes now, or None when it was moved meanwhile.
    """
    condition: Condition = (
        Absent(keys.META, _SWEEP) if stored is None else Holds(keys.META, _SWEEP, stored)
    )
    data = dumps(start)
    try:
        store.write(Transaction(conditions=[condition], sets=[(keys.META, _SWEEP, data)], raw=True))
    except ConflictError:
        return None  # the next sweep walks again from where the other writer left it
    return data


def walked_all(store: BaseStore, start: str, stop: str) -> bool:
    """Whether no checkpoint's order is in ``[start, stop)``."""
    return not store.tagged("order", start=start, stop=stop, limit=1)


def reconsider(store: BaseStore, thread_id: str) -> None:
    """Move the idle sweep's mark back to a thread's newest checkpoint when it is behind it.

    For an operation that removed a thread's newest checkpoints: the sweep
    must meet the one the thread has left.
    """
    newest = newest_checkpoint(store, thread_id)
    if newest is None:
        return
    order = keys.ordered(newest)
    for _ in range(8):
        start, stored = sweep_start(store)
        if start is None or start <= order:
            return
        try:
            store.write(
                Transaction(
                    conditions=[Holds(keys.META, _SWEEP, stored or b"")],
                    sets=[(keys.META, _SWEEP, order)],
                )
            )
            return
        except ConflictError:
            continue


# -- stores written before tags -----------------------------------------------------


def converted(store: BaseStore) -> bool:
    """Whether every checkpoint entry of the store carries its tags (its marker says so)."""
    return bool(store.get_many([(keys.META, _TAGS)])[0] == _VERSION)


def start_converting(
    store: BaseStore, run_id_of: Callable[[bytes], Any]
) -> list[tuple[str, str, bytes]]:
    """What a saver's first put adds to its transaction so that the store is (and is marked)
    converted: the marker alone for a store with no thread yet, else nothing (the store is
    converted first)."""
    if converted(store):
        return []
    if not store.namespaces(keys.THREADS):
        return [(keys.META, _TAGS, dumps(_VERSION))]
    convert(store, run_id_of)
    return []


def convert(store: BaseStore, run_id_of: Callable[[bytes], Any]) -> None:
    """Tag every checkpoint entry of a store written before tags, drop the old rows, mark it.

    ``run_id_of(stored bytes)``: the run id an entry names. Entries are set
    again with the same bytes and their tags, a batch per transaction, each
    on the condition that they still hold those bytes (an entry deleted or
    rewritten meanwhile is read again). Then, in one transaction, the rows
    the earlier release wrote beside its checkpoints (checkpoint index,
    activity, registry, periods, run index, types) go and the store is marked.
    """
    if converted(store):
        return
    old: list[str] = []
    for namespace in store.namespaces(keys.THREADS):
        if keys.parse_scope(namespace) is not None:
            _tag_namespace(store, namespace, run_id_of)
        elif keys.parse_runs_seen(namespace) is not None or _is_periods(namespace):
            old.append(namespace)
    for prefix in (keys.INDEX, keys.ACTIVITY, keys.REGISTRY, keys.RUNS, keys.TYPES):
        if store.namespaces(prefix):
            old.append(prefix)
    store.write(
        Transaction(
            sets=[(keys.META, _TAGS, _VERSION)],
            deletes=[(keys.META, _OLD_INDEXES)],
            prefix_deletes=old,
        )
    )


def _is_periods(namespace: str) -> bool:
    """Whether a namespace is a thread's record of its activity periods (an earlier release's)."""
    try:
        _, pos = keys.read_field(namespace, len(keys.THREADS))
    except (ValueError, IndexError):
        return False
    return namespace[pos:] == keys.PERIODS


def _tag_namespace(store: BaseStore, namespace: str, run_id_of: Callable[[bytes], Any]) -> None:
    start: str | None = None
    while True:
        # ``start`` is inclusive: a page after the first begins with the last key seen.
        rows = store.items(namespace, start=start, limit=_PAGE + (start is not None), raw=True)
        if start is not None and rows and rows[0][0] == start:
            rows = rows[1:]
        batch = [(key, data) for key, data in rows if key[-1] == keys.CHECKPOINT]
        while batch:
            try:
                store.write(
                    Transaction(
                        conditions=[Holds(namespace, key, data) for key, data in batch],
                        sets=[
                            (namespace, key, data, _tags_of(key, data, run_id_of))
                            for key, data in batch
                        ],
                        raw=True,
                    )
                )
                break
            except ConflictError:  # changed meanwhile: tag what is there now
                found = store.get_many([(namespace, key) for key, _ in batch], raw=True)
                batch = [
                    (key, data)
                    for (key, _), data in zip(batch, found, strict=True)
                    if data is not None
                ]
        if len(rows) < _PAGE:
            return
        start = rows[-1][0]


def _tags_of(key: str, data: bytes, run_id_of: Callable[[bytes], Any]) -> Tags:
    """The tags of a stored checkpoint entry: from its key and the run id it names."""
    order = key[:-1]
    try:
        run_id = run_id_of(data)
    except Exception:  # a damaged entry: tagged by its key alone, reads say what is wrong
        run_id = None
    tags = checkpoint_tags(order, run_id)
    return Tags(group=tags.group) if order_too_long(order) else tags

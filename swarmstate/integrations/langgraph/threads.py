"""Thread operations of the LangGraph checkpointer: delete, copy, delete runs, and collection.

Each works on the store namespaces of one thread (an injective prefix, see
:mod:`.keys`), never by scanning the store.

Deleting checkpoints leaves chunks that only they referenced. They are
collected by a *sweep* of the thread (:func:`sweep`) that runs after the
deletion, under the thread's *lease* (:func:`leased`), which every deletion
of checkpoints takes, in any process. Why that order keeps every live
checkpoint whole while graphs keep writing:

* a chunk a put writes has a fresh key: the sweep lists the thread's chunk
  keys *before* it reads the checkpoints, so such a chunk is either not
  listed or referenced by a checkpoint the sweep reads;
* a put that references chunks it did not write requires, in its own atomic
  write, that the checkpoints it took them from (its *lenders*) still exist
  (:mod:`.values`), or that the pending write it took them from still holds
  exactly what was written (a pending write taking a checkpoint's chunks
  requires its record as put: a row rewritten names other chunks). The
  deletions come before the sweep and nobody else
  deletes while the lease is held, so a lender present when the put lands
  is still there when the sweep reads it, and its chunks are kept; a put
  that lands after its lender was deleted is refused, and written again
  with every value stored anew.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterable, Iterator
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._checks import ABSENT, Condition, Empty, Holds, Tags, Transaction
from swarmstate._codec import dumps, loads
from swarmstate._errors import ConflictError
from swarmstate.integrations.langgraph import catalog
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.guard import Guards, made_at
from swarmstate.integrations.langgraph.values import (
    APART,
    CHUNKS,
    LIST,
    Values,
    chunks_of,
    scan,
    write_chunks,
)

__all__ = [
    "LEASES",
    "copy_thread",
    "dead",
    "delete_for_runs",
    "delete_thread",
    "first_checkpoint",
    "leased",
    "list_threads",
    "refuse",
    "stored_values",
    "sweep",
    "thread_size",
]

LEASES = keys.ROOT + "l"
"""The namespace of the threads' leases, keyed by ``F(thread_id)``."""
LEASE_TTL = 60.0
"""Seconds a lease lasts unless released: how long a holder that died delays the others."""
_WAIT = 120.0
_BATCH = 256
_ATTEMPTS = 20


def list_threads(store: BaseStore) -> list[str]:
    """Every thread id with a checkpoint namespace in the store, sorted."""
    return catalog.threads(store)


def scopes_of(store: BaseStore, thread_id: str) -> list[tuple[str, str]]:
    """The ``(thread_id, checkpoint_ns)`` of every checkpoint namespace of one thread."""
    return [
        scope
        for namespace in store.namespaces(keys.thread_prefix(thread_id))
        if (scope := keys.parse_scope(namespace)) is not None
    ]


def checkpoint_counts(store: BaseStore, thread_id: str) -> dict[str, int]:
    """How many checkpoints each checkpoint namespace of a thread holds: keys only, none read."""
    counts: dict[str, int] = {}
    for namespace in store.namespaces(keys.thread_prefix(thread_id)):
        scope = keys.parse_scope(namespace)
        if scope is not None:
            found = store.keys(namespace)
            counts[scope[1]] = sum(1 for key in found if key[-1] == keys.CHECKPOINT)
    return counts


def thread_size(store: BaseStore, thread_id: str) -> int:
    """Bytes of every entry of a thread as stored: checkpoints, writes and chunks."""
    total = 0
    for namespace in store.namespaces(keys.thread_prefix(thread_id)):
        total += sum(len(value) for _, value in scan(store, namespace))
    return total


def delete_thread(store: BaseStore, values: Values, thread_id: str) -> None:
    """Remove every checkpoint, chunk and write of one thread, leaving a tombstone.

    One transaction, with nothing read first: the tombstone (:mod:`.guard`)
    and the thread's namespaces, the tags of its checkpoints with them. From
    then on a late write of a run still going is refused once what it builds
    on is gone.
    """
    Guards(store).tombstone(thread_id, [], [keys.thread_prefix(thread_id)])


def copy_thread(store: BaseStore, serde: Any, source: str, target: str) -> None:
    """Copy one thread, chunks included, to another thread id, in one transaction.

    The copy is a thread of its own, as the Agent Server's own copy is: its
    checkpoints' ``metadata["thread_id"]`` names the target where it named
    the source, and they carry no run's tag (the source's runs did not write
    them), so :func:`delete_for_runs` of those runs leaves the copy whole.
    Their order tag is made from their key as a put makes it (it names no
    thread), so the copy is listed across threads as the source is. Entries
    the target already holds under the same keys are replaced; the target's
    guard (a tombstone, a claim) is neither read nor changed.

    The source is read entry by entry, then everything is written in one
    :meth:`~swarmstate.BaseStore.write` conditioned on the source being as
    read (:func:`_copy_of`): a put, a deletion or a sweep of the source that
    lands in between makes the write refused, whole, and the source read
    again. So the copy is the source as it was at one moment, and a copy
    that fails (a damaged entry, a source that kept changing) writes nothing.
    """
    if source == target:
        return
    for _ in range(_ATTEMPTS):
        transaction = _copy_of(store, serde, source, target)
        if transaction is None:
            continue  # a namespace came or went while the source was read
        if not transaction.sets:
            return  # nothing to copy
        try:
            store.write(transaction)
            return
        except ConflictError:
            continue  # the source changed before the write: read it again
    raise ConflictError(
        f"thread {source!r} kept changing while it was copied ({_ATTEMPTS} attempts); "
        "copy it again when its runs have ended"
    )


def _copy_of(store: BaseStore, serde: Any, source: str, target: str) -> Transaction | None:
    """The one write that copies ``source`` to ``target`` as the source is now, or None if
    its namespaces changed while it was read.

    Conditions keep the write to the source as read. In each checkpoint
    namespace every entry read still holds its bytes (a write may be
    replaced) and no key came between them (:class:`~swarmstate.Empty` over
    each gap). The chunks (and an earlier release's value entries) are read
    after the checkpoints, unconditioned: a chunk never changes under its
    fresh key, a put writes its chunks with its checkpoint (a checkpoint
    read is read with them), and a sweep takes only chunks no live
    checkpoint names (at worst the copy takes such a chunk along, for the
    target's next sweep). The namespaces are listed before and after the
    reads: a namespace that comes later (a put into a new checkpoint
    namespace that changes nothing read) lands after the moment the copy is of.
    """
    prefix = keys.thread_prefix(source)
    to_target = keys.thread_prefix(target)
    namespaces = store.namespaces(prefix)
    ordered = sorted(namespaces, key=lambda namespace: keys.parse_scope(namespace) is None)
    read = [(namespace, store.items(namespace, raw=True)) for namespace in ordered]
    if store.namespaces(prefix) != namespaces:
        return None
    conditions: list[Condition] = []
    sets: list[tuple[str, str, Any] | tuple[str, str, Any, Tags]] = []
    for namespace, rows in read:
        into = to_target + namespace[len(prefix) :]
        if keys.parse_scope(namespace) is None:
            sets += [(into, key, data) for key, data in rows]
            continue
        after: str | None = None  # the smallest key above the last one read
        for key, data in rows:
            conditions += (Empty(namespace, after, key), Holds(namespace, key, data))
            after = key + "\x00"
            if key[-1] != keys.CHECKPOINT:
                sets.append((into, key, data))
                continue
            metadata = entry.head(serde, data)[0]
            if type(metadata) is dict and metadata.get("thread_id") == source:
                data = entry.with_metadata(serde, data, {**metadata, "thread_id": target})
            order = key[:-1]
            tags = Tags() if catalog.order_too_long(order) else Tags(order=order)
            sets.append((into, key, data, tags))
        conditions.append(Empty(namespace, after, None))
    return Transaction(conditions=conditions, sets=sets, raw=True)


def delete_for_runs(store: BaseStore, values: Values, serde: Any, wanted: set[str]) -> None:
    """Remove the checkpoints (and their writes) whose metadata names one of ``wanted``.

    The runs' checkpoints are found by their group tag (:mod:`.catalog`);
    they and their pending writes go in one transaction, under the leases
    of their threads, whose chunks only they referenced are swept after.
    """
    if not catalog.converted(store):  # checkpoints of an earlier release carry no tags yet
        catalog.convert(store, lambda data: entry.head(serde, data)[2])
    found = [pair for run_id in sorted(wanted) for pair in catalog.run_checkpoints(store, run_id)]
    thread_ids = sorted({scope[0] for ns, _ in found if (scope := keys.parse_scope(ns))})
    if not thread_ids:
        return
    with contextlib.ExitStack() as stack:
        for thread_id in thread_ids:
            stack.enter_context(leased(store, thread_id))
        deletes: list[tuple[str, str]] = []
        for namespace, key in sorted(set(found)):
            start, stop = keys.group_range(keys.checkpoint_id_of(key))
            deletes += [(namespace, k) for k in store.keys(namespace, start=start, stop=stop)]
        ranges = [("group", *catalog.run_range(run_id)) for run_id in sorted(wanted)]
        store.write(Transaction(deletes=deletes, tag_deletes=ranges))
        for thread_id in thread_ids:
            sweep(store, serde, thread_id)
    for thread_id in thread_ids:
        # The thread's newest checkpoint may be an older one now: the idle sweep meets it.
        catalog.reconsider(store, thread_id)


def first_checkpoint(store: BaseStore, thread_id: str, checkpoint_ns: str) -> str | None:
    """The id of the oldest checkpoint of a thread namespace, or None."""
    for key, _ in scan(store, keys.scope(thread_id, checkpoint_ns), page=16):
        if key[-1] == keys.CHECKPOINT:
            return keys.checkpoint_id_of(key)
    return None


def refuse(
    store: BaseStore,
    serde: Any,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    fresh: float | None,
) -> list[tuple[str, str]]:
    """Take out a checkpoint of a run its thread's deletion ended, and what else of that run
    landed.

    The runtime saves in the background, each graph in its own order, so
    besides the checkpoint and its pending writes (either may have landed)
    the thread may hold, in any namespace: checkpoints that ran under it or
    under an enclosing checkpoint that is not stored (their metadata
    ``parents`` name those), and pending writes whose checkpoint is not
    stored. Those that were not made after ``fresh`` belong to the ended run
    (:class:`.guard.Refusals` says why) and go too. Returns the ``(namespace,
    checkpoint id)`` of the checkpoints taken out, whose later writes are to
    be refused too. When a checkpoint went, the thread's chunks are swept and
    the idle sweep told of its newest checkpoint (:func:`.catalog.reconsider`).
    """
    absent: dict[tuple[str, str], bool] = {}

    def gone(outer_ns: str, outer_id: str) -> bool:
        """Whether a checkpoint the run's entries name is refused or will never be stored."""
        if outer_ns == checkpoint_ns and outer_id == checkpoint_id:
            return True
        made = made_at(outer_id)
        if made is None or (fresh is not None and made >= fresh):
            return False
        if (outer_ns, outer_id) not in absent:
            found = store.get_many(
                [(keys.scope(thread_id, outer_ns), keys.checkpoint_key(outer_id))], raw=True
            )
            absent[(outer_ns, outer_id)] = found[0] is None
        return absent[(outer_ns, outer_id)]

    taken: list[tuple[str, str]] = []
    pairs: list[tuple[str, str]] = []
    for scope in scopes_of(store, thread_id):
        namespace = keys.scope(*scope)
        group: str | None = None
        doomed = False
        for key, stored_entry in scan(store, namespace):
            entry_id, is_checkpoint = keys.parse_entry_key(key)
            if entry_id != group:
                group = entry_id
                if is_checkpoint:
                    parents = entry.head(serde, stored_entry)[0].get("parents")
                    doomed = (scope[1] == checkpoint_ns and entry_id == checkpoint_id) or (
                        isinstance(parents, dict)
                        and any(
                            type(outer_ns) is str
                            and type(outer_id) is str
                            and gone(outer_ns, outer_id)
                            for outer_ns, outer_id in parents.items()
                            if outer_ns != scope[1]
                        )
                    )
                    if doomed:
                        taken.append((namespace, entry_id))
                else:  # pending writes whose checkpoint is not stored
                    doomed = gone(scope[1], entry_id)
            if doomed:
                pairs.append((namespace, key))
    delete_pairs(store, pairs)
    if taken:
        with leased(store, thread_id):
            sweep(store, serde, thread_id)
        catalog.reconsider(store, thread_id)
    return taken


def delete_pairs(store: BaseStore, pairs: list[tuple[str, str]]) -> None:
    """Delete ``pairs`` a batch at a time (short write transactions)."""
    for start in range(0, len(pairs), _BATCH):
        store.delete_many(pairs[start : start + _BATCH])


def references(serde: Any, store: BaseStore, thread_id: str) -> tuple[set[str], set[Any]]:
    """The chunk keys, and the earlier layout's value and segment entries, the thread's
    checkpoints and pending writes reference."""
    chunks: set[str] = set()
    earlier: set[Any] = set()
    for _, checkpoint_ns in scopes_of(store, thread_id):
        for key, stored_entry in scan(store, keys.scope(thread_id, checkpoint_ns)):
            if key[-1] != keys.CHECKPOINT:
                chunks.update(write_chunks(stored_entry))  # a write stored as chunks
                continue
            decoded = entry.decode(serde, stored_entry)
            if decoded.forms is not None:
                add_references(thread_id, checkpoint_ns, decoded, chunks, earlier)
    return chunks, earlier


def add_references(
    thread_id: str,
    checkpoint_ns: str,
    decoded: entry.Decoded,
    chunks: set[str],
    earlier: set[Any],
) -> None:
    """Add what one decoded entry references to ``chunks`` and ``earlier``."""
    assert decoded.forms is not None
    versions = decoded.checkpoint["channel_versions"]
    for channel, form in decoded.forms.items():
        code = form[0]
        if code == CHUNKS:
            chunks.update(chunks_of(form))
        elif code == APART:
            value_key = keys.value_key(channel, versions.get(channel))
            if value_key is not None:
                earlier.add((keys.values(thread_id, checkpoint_ns), value_key))
        elif code == LIST:
            segments_ns = keys.segments(thread_id, checkpoint_ns)
            earlier.update((segments_ns, ref[0]) for ref in form[1])


def stored_values(store: BaseStore, thread_id: str) -> dict[tuple[str, str], int]:
    """``(namespace, key) -> stored size`` of the thread's chunks, and of the value and
    segment entries of the earlier layout."""
    chunks_ns = keys.chunks(thread_id)
    found = {(chunks_ns, key): len(value) for key, value in scan(store, chunks_ns)}
    for namespace in store.namespaces(keys.thread_prefix(thread_id)):
        if namespace.endswith((keys.VALUES, keys.SEGMENTS)) and keys.parse_scope(
            namespace[:-1] + keys.CHECKPOINTS
        ):
            found.update(((namespace, key), len(value)) for key, value in scan(store, namespace))
    return found


def dead(
    thread_id: str, stored: dict[tuple[str, str], int], chunks: set[str], earlier: set[Any]
) -> list[tuple[str, str, int]]:
    """``(namespace, key, size)`` of ``stored`` entries that ``chunks`` and ``earlier`` miss."""
    chunks_ns = keys.chunks(thread_id)
    return [
        (namespace, key, size)
        for (namespace, key), size in stored.items()
        if (key not in chunks if namespace == chunks_ns else (namespace, key) not in earlier)
    ]


def sweep(store: BaseStore, serde: Any, thread_id: str) -> list[tuple[str, str, int]]:
    """Delete the thread's chunks no checkpoint of it references; returns what went.

    Call it under the thread's lease, after the checkpoints were deleted
    (see the module docstring): the chunks are listed first, then the
    checkpoints read.
    """
    stored = stored_values(store, thread_id)
    if not stored:
        return []
    chunks, earlier = references(serde, store, thread_id)
    gone = dead(thread_id, stored, chunks, earlier)
    delete_pairs(store, [(namespace, key) for namespace, key, _ in gone])
    return gone


@contextlib.contextmanager
def leased(store: BaseStore, thread_id: str, ttl: float = LEASE_TTL) -> Iterator[None]:
    """Hold the thread's lease: no other deletion of its checkpoints runs meanwhile.

    Waits while another process holds it (up to two minutes, then
    :class:`ConflictError`). A lease ends when the body does, or after
    ``ttl`` seconds if its holder died.
    """
    key = keys.field(thread_id)
    token = secrets.token_hex(8)
    deadline = time.monotonic() + _WAIT
    while True:
        row = store.get_many([(LEASES, key)], raw=True)[0]
        held = loads(row) if row is not None else None
        if type(held) is not dict or float(held.get("until") or 0.0) <= time.time():
            try:
                store.set_many(
                    [(LEASES, key, dumps({"token": token, "until": time.time() + ttl}))],
                    raw=True,
                    require=[(LEASES, key, row if row is not None else ABSENT)],
                )
                break
            except ConflictError:
                continue  # taken meanwhile: look again
        if time.monotonic() > deadline:
            raise ConflictError(
                f"thread {thread_id!r} is being pruned by another process (its lease is held); "
                "try again later"
            )
        time.sleep(0.05)
    try:
        yield
    finally:
        row = store.get_many([(LEASES, key)], raw=True)[0]
        if row is not None and loads(row).get("token") == token:
            store.delete_many([(LEASES, key)])


def delete_leases(store: BaseStore, thread_ids: Iterable[str]) -> None:
    """Forget the leases of threads that are gone."""
    pairs = [(LEASES, keys.field(thread_id)) for thread_id in thread_ids]
    if pairs:
        store.delete_many(pairs)

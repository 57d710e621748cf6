"""Thread operations of the LangGraph checkpointer: delete, copy, prune, delete runs.

Each works on the store namespaces of one thread (an injective prefix, see
:mod:`._lg_keys`), never by scanning the store. Deleting checkpoints leaves
values and list segments that only they referenced; those are collected
right after (:meth:`._lg_values.Values.collect`), so the space comes back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from swarmstate._base import BaseStore
from swarmstate.integrations import _lg_entry as E
from swarmstate.integrations import _lg_keys as K
from swarmstate.integrations._lg_guard import Guards
from swarmstate.integrations._lg_values import Values

__all__ = [
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "list_threads",
    "run_index_pairs",
    "thread_size",
]

_BATCH = 256


def list_threads(store: BaseStore) -> list[str]:
    """Every thread id with a checkpoint namespace in the store, sorted."""
    found = set()
    for namespace in store.namespaces(K.THREADS):
        scope = K.parse_scope(namespace)
        if scope is not None:
            found.add(scope[0])
    return sorted(found)


def thread_size(store: BaseStore, thread_id: str) -> int:
    """Bytes of every entry of a thread as stored: checkpoints, writes, values, segments."""
    total = 0
    for namespace in store.namespaces(K.thread_prefix(thread_id)):
        start: str | None = None
        while True:
            page = store.items(namespace, start=start, limit=_BATCH, raw=True)
            total += sum(len(value) for _, value in page)
            if len(page) < _BATCH:
                break
            start = page[-1][0] + "\x00"
    return total


def run_index_pairs(store: BaseStore, thread_id: str) -> list[tuple[str, str]]:
    """Run index entries that point into one thread, from the runs it saw."""
    pairs = []
    for namespace in store.namespaces(K.thread_prefix(thread_id)):
        parsed = K.parse_runs_seen(namespace)
        if parsed is None:
            continue
        for key in store.keys(namespace):
            run_id = K.read_field(key, 0)[0]
            pairs.append((K.run_namespace(run_id), K.run_key(*parsed)))
    return pairs


def delete_thread(store: BaseStore, values: Values, thread_id: str) -> None:
    """Remove every checkpoint, value and write of one thread, leaving a tombstone.

    The tombstone (:mod:`._lg_guard`) goes first: from then on a late write
    of a run still going is refused once its parent is gone.
    """
    Guards(store).tombstone(thread_id)
    # The run index first: a put landing between the two steps re-creates
    # its index entry (the thread's checkpoints then go), and at worst an
    # entry is left pointing at nothing. The other order could leave a
    # checkpoint that its run's index no longer names.
    index = run_index_pairs(store, thread_id)
    if index:
        store.delete_many(index)
    store.delete_prefix(K.thread_prefix(thread_id))
    values.forget(thread_id)


def copy_thread(store: BaseStore, values: Values, serde: Any, source: str, target: str) -> None:
    """Copy one thread, values and segments included, to another thread id.

    The copy is a thread of its own, as the Agent Server's own copy is: its
    checkpoints' ``metadata["thread_id"]`` names the target where it named
    the source, and no run is indexed as having written it (the source's
    runs did not), so :func:`delete_for_runs` of those runs leaves it whole.
    """
    if source == target:
        return
    seen = _runs_seen(store, target)
    store.copy_prefix(K.thread_prefix(source), K.thread_prefix(target))
    copied = _runs_seen(store, target) - seen  # the source's runs, which never wrote here
    if copied:
        _delete(store, copied)
    _retag(store, values, serde, source, target)


def _runs_seen(store: BaseStore, thread_id: str) -> set[tuple[str, str]]:
    """The thread's "runs seen" entries, as ``(namespace, key)`` pairs."""
    return {
        (namespace, key)
        for namespace in store.namespaces(K.thread_prefix(thread_id))
        if K.parse_runs_seen(namespace) is not None
        for key in store.keys(namespace)
    }


def _retag(store: BaseStore, values: Values, serde: Any, source: str, target: str) -> None:
    """Rewrite ``metadata["thread_id"]`` from ``source`` to ``target`` in the target's checkpoints.

    Only the metadata is encoded again (:func:`._lg_entry.with_metadata`).
    """
    for namespace in store.namespaces(K.thread_prefix(target)):
        if K.parse_scope(namespace) is None:
            continue
        batch: list[tuple[str, str, bytes]] = []
        for key, entry in values.scan(namespace):
            if key[-1] != K.CHECKPOINT:
                continue
            metadata = E.head(serde, entry)[0]
            if metadata.get("thread_id") == source:
                retagged = E.with_metadata(serde, entry, {**metadata, "thread_id": target})
                batch.append((namespace, key, retagged))
            if len(batch) == _BATCH:
                store.set_many(batch, raw=True)
                batch = []
        if batch:
            store.set_many(batch, raw=True)


def delete_for_runs(store: BaseStore, values: Values, serde: Any, wanted: set[str]) -> None:
    """Remove the checkpoints (and their writes) whose metadata names one of ``wanted``."""
    scopes = {
        K.parse_run_key(key) for run_id in wanted for key in store.keys(K.run_namespace(run_id))
    }
    for thread_id, checkpoint_ns in sorted(scopes):
        namespace = K.scope(thread_id, checkpoint_ns)
        pairs: list[tuple[str, str]] = []
        # Key order puts each checkpoint just before its own writes, which
        # share its key up to the last character.
        head: str | None = None
        for key, entry in values.scan(namespace):
            if key[-1] == K.CHECKPOINT:
                head = key[:-1] if E.head(serde, entry)[2] in wanted else None
                if head is None:
                    continue
            elif head is None or not key.startswith(head):
                continue
            pairs.append((namespace, key))
        if pairs:
            _delete(store, pairs)
            values.forget(thread_id)
            values.collect(serde, thread_id, checkpoint_ns)


def _delete(store: BaseStore, pairs: Iterable[tuple[str, str]]) -> None:
    batch = list(pairs)
    for start in range(0, len(batch), _BATCH):
        store.delete_many(batch[start : start + _BATCH])

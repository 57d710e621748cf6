"""SwarmStateSaver: a LangGraph checkpointer over any swarmstate store.

Drop-in for ``InMemorySaver``, ``SqliteSaver`` and ``AsyncSqliteSaver``::

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    graph = builder.compile(checkpointer=SwarmStateSaver(DiskStore("state.db")))

Storage layout and key encoding live in :mod:`swarmstate.integrations._lg_keys`.
Design points:

* One store entry holds a whole checkpoint (channel values included), so a
  put is one store write (and, with LangGraph's serializer, one serializer
  call whose bytes are stored as they are), and a read is one range query:
  a checkpoint's pending writes sort right after it. The writes of one
  ``put_writes`` land in one ``set_many`` too.
* "Latest" is the last key of the thread's namespace: one indexed lookup in
  the store, correct when another process wrote it. Nothing about the
  store is cached here.
* Deserialization goes through LangGraph's ``JsonPlusSerializer`` in strict
  msgpack-allowlist mode with no pickle fallback, unless you pass a serde.
* The sync methods are the implementation; async ones call them directly on
  the in-memory store (it never blocks) and in a worker thread otherwise.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar

from swarmstate._base import BaseStore
from swarmstate._codec import dumps, loads
from swarmstate._errors import InvalidArgumentError, MissingDependencyError
from swarmstate._memory import Store
from swarmstate.integrations import _lg_config as C
from swarmstate.integrations import _lg_keys as K

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from swarmstate.integrations import _lg_entry as E  # needs msgpack, from the same extra
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"swarmstate.integrations.langgraph needs LangGraph ({exc}); install it with "
        'pip install "swarmstate[langgraph]"'
    ) from exc

__all__ = ["SwarmStateSaver", "strict_serializer"]

_T = TypeVar("_T")
_PAGE_MAX = 256
_List = list  # the class defines a method named ``list``


_new_tuple = tuple.__new__
_NIL = dumps(None)  # the value of run index entries, as stored bytes
_NAMES_MAX = 4096


def _write_order(entry: Any) -> tuple[str, str, int]:
    """Sort key of a pending-write entry: task path, task id, index."""
    return entry[2], entry[0], entry[1]


def strict_serializer() -> JsonPlusSerializer:
    """LangGraph's serializer that revives only allowlisted types and never unpickles."""
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


class SwarmStateSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps every thread in a swarmstate store.

    Args:
        store: Any swarmstate store (``Store``, ``DiskStore``,
            ``PostgresStore``); default a new in-memory ``Store()``. It is
            exposed as :attr:`store`, so ``saver.store.snapshot()`` and
            ``saver.store.restore(snap)`` move every thread in time at once.
        serde: The serializer for checkpoint data; default
            :func:`strict_serializer`. Graphs extend its allowlist with
            their state types through ``with_allowlist``.

    Thread-safe: the runtime calls ``put``/``put_writes`` from worker threads
    while reading on the caller's thread; every call is one store operation
    or a read followed by one atomic write.
    """

    store: BaseStore

    def __init__(
        self, store: BaseStore | None = None, *, serde: SerializerProtocol | None = None
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise InvalidArgumentError(
                f"store must be a swarmstate store (Store, DiskStore, PostgresStore), "
                f"got {type(store).__name__}"
            )
        super().__init__(serde=serde if serde is not None else strict_serializer())
        self.store = store if store is not None else Store()
        # The in-memory store never blocks, so a worker thread would only add latency.
        self._async_inline = isinstance(self.store, Store)
        # Store names derived from ids (pure functions of them, so never stale),
        # kept for the threads and runs in use: building them is a measurable
        # part of a put. Cleared when large.
        self._scope_names: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._typed = False  # True once the serializer wrote a non-msgpack entry
        self._run_names: dict[str, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"SwarmStateSaver({self.store!r})"

    @staticmethod
    def parse_namespace(namespace: str) -> tuple[str, str] | None:
        """``(thread_id, checkpoint_ns)`` of a store namespace the saver wrote, else None.

        Handy for reading snapshot diffs: ``saver.parse_namespace(ns)`` for each
        ``(ns, key)`` says which thread changed.
        """
        return K.parse_scope(namespace)

    # -- writes ----------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint with its channel values and metadata as one entry.

        ``new_versions`` is not needed: the entry holds every channel value,
        so a read never has to gather blobs from older checkpoints.
        """
        conf, thread_id, checkpoint_ns = C.scope_of(config)
        checkpoint_id = checkpoint["id"]
        if type(checkpoint_id) is not str or not checkpoint_id:
            raise InvalidArgumentError(
                f"checkpoint id must be a non-empty str, got {checkpoint_id!r}"
            )
        stored_metadata = get_checkpoint_metadata(config, metadata)
        run_id = stored_metadata.get("run_id")
        if type(run_id) is not str:
            run_id = None
        parent_id = conf.get("checkpoint_id") or None
        data = None
        if not self._typed:
            data = E.encode(self.serde, checkpoint, stored_metadata, parent_id, run_id)
        if data is None:
            # The serializer writes another format: typed pairs from now on,
            # without first trying (and discarding) a whole-entry document.
            self._typed = True
            data = E.encode_typed(self.serde, checkpoint, stored_metadata, parent_id, run_id)
        namespace, seen, run_key = self._names(thread_id, checkpoint_ns)
        entries = [(namespace, K.checkpoint_key(checkpoint_id), data)]
        if run_id is None:
            self.store.set_many(entries, raw=True)
        else:
            # The run's index entries for this thread namespace, in the same atomic
            # batch; after the run's first checkpoint here they exist and cost a lookup.
            names = self._run_names.get(run_id)
            if names is None:
                if len(self._run_names) > _NAMES_MAX:
                    self._run_names.clear()
                names = self._run_names[run_id] = (K.run_namespace(run_id), K.field(run_id))
            index = [(names[0], run_key, _NIL), (seen, names[1], _NIL)]
            self.store.set_many(entries, ensure=index, raw=True)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _names(self, thread_id: str, checkpoint_ns: str) -> tuple[str, str, str]:
        """The checkpoint namespace, runs-seen namespace and run-index key of a scope."""
        names = self._scope_names.get((thread_id, checkpoint_ns))
        if names is None:
            if len(self._scope_names) > _NAMES_MAX:
                self._scope_names.clear()
            names = (
                K.scope(thread_id, checkpoint_ns),
                K.runs_seen(thread_id, checkpoint_ns),
                K.run_key(thread_id, checkpoint_ns),
            )
            self._scope_names[(thread_id, checkpoint_ns)] = names
        return names

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes: regular ones insert-or-ignore, special ones replace."""
        if not writes:
            return
        conf = C.configurable(config)
        thread_id = C.thread_id_of(conf)
        checkpoint_id = conf.get("checkpoint_id")
        if type(checkpoint_id) is not str or not checkpoint_id:
            raise InvalidArgumentError(
                "put_writes needs config['configurable']['checkpoint_id'] (the checkpoint "
                f"the writes belong to), got {checkpoint_id!r}"
            )
        if type(task_id) is not str or type(task_path) is not str:
            raise InvalidArgumentError(
                f"task_id and task_path must be str, got {task_id!r} and {task_path!r}"
            )
        namespace = self._names(thread_id, C.checkpoint_ns_of(conf))[0]
        dumps = self.serde.dumps_typed
        regular: _List[tuple[str, str, Any]] = []
        special: _List[tuple[str, str, Any]] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            entry = (
                namespace,
                K.write_key(checkpoint_id, task_id, idx),
                [task_id, idx, task_path, channel, *dumps(value)],
            )
            (special if idx < 0 else regular).append(entry)
        if not special:
            self.store.set_many(regular, if_absent=True)
            return
        if regular:
            # A mixed call stays one atomic batch: drop the regular writes that exist.
            existing = self.store.get_many([(ns, key) for ns, key, _ in regular])
            special.extend(e for e, old in zip(regular, existing, strict=True) if old is None)
        self.store.set_many(special)

    # -- reads -----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config``, or the latest of its thread and namespace."""
        conf, thread_id, checkpoint_ns = C.scope_of(config)
        namespace = self._names(thread_id, checkpoint_ns)[0]
        checkpoint_id = conf.get("checkpoint_id")
        if checkpoint_id:
            if type(checkpoint_id) is not str:
                raise InvalidArgumentError(
                    f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}"
                )
            start, stop = K.group_range(checkpoint_id)
            rows = self.store.items(namespace, start=start, stop=stop, raw=True)
            if not rows or rows[0][0] != start + K.CHECKPOINT:
                return None
            return self._build(
                thread_id, checkpoint_ns, checkpoint_id, rows[0][1], [w for _, w in rows[1:]]
            )
        latest = self.store.items(namespace, reverse=True, limit=1, raw=True)
        if not latest:
            return None
        key, entry = latest[0]
        if key[-1] == K.CHECKPOINT:
            # Writes sort after their checkpoint: the last key being a checkpoint means none.
            return self._build(thread_id, checkpoint_ns, K.checkpoint_id_of(key), entry, [])
        for found in self._groups(namespace, None, 8):
            return self._build(thread_id, checkpoint_ns, *found)
        return None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, across threads and namespaces unless ``config`` narrows.

        Args:
            config: ``thread_id`` selects a thread (None: every thread);
                ``checkpoint_ns``, when present, one namespace of it;
                ``checkpoint_id``, one checkpoint.
            filter: Metadata entries that must all be equal; matched on the
                decoded metadata, never turned into query text.
            before: Only checkpoints whose id sorts before this config's id.
            limit: At most this many results.
        """
        if limit is not None and limit <= 0:
            return
        if filter is not None and not isinstance(filter, dict):
            raise InvalidArgumentError(
                f"filter must be a dict of metadata entries, got {type(filter).__name__}"
            )
        before_id = C.configurable(before).get("checkpoint_id") if before else None
        if before_id is not None and type(before_id) is not str:
            raise InvalidArgumentError(f"before checkpoint_id must be a str, got {before_id!r}")
        only_id = None
        if config is None:
            scopes = self._scopes(K.THREADS)
        else:
            conf = C.configurable(config)
            thread_id = C.thread_id_of(conf)
            only_id = conf.get("checkpoint_id") or None
            if "checkpoint_ns" in conf:
                scopes = [(thread_id, C.checkpoint_ns_of(conf))]
            else:
                scopes = self._scopes(K.thread_prefix(thread_id))
        if only_id is not None:
            if before_id is not None and only_id >= before_id:
                return
            for thread_id, checkpoint_ns in scopes:
                found = self.get_tuple(
                    {
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": checkpoint_ns,
                            "checkpoint_id": only_id,
                        }
                    }
                )
                if found is not None and C.matches(found.metadata, filter):
                    yield found
                    if limit is not None:
                        limit -= 1
                        if limit <= 0:
                            return
            return
        stop = K.ordered(before_id) if before_id else None
        # Without a filter the first page is exactly what the caller asked for.
        page = limit if limit is not None and not filter else 16
        streams = [self._tagged(t, n, stop, page) for t, n in scopes]
        merged: Iterator[tuple[str, str, str, Any, _List[Any]]] = (
            streams[0]
            if len(streams) == 1
            else heapq.merge(*streams, key=lambda row: row[2], reverse=True)
        )
        remaining = limit
        build = self._build
        for thread_id, checkpoint_ns, checkpoint_id, entry, writes in merged:
            found = build(thread_id, checkpoint_ns, checkpoint_id, entry, writes, filter)
            if found is None:
                continue
            yield found
            if remaining is not None:
                remaining -= 1
                if remaining <= 0:
                    return

    def _scopes(self, prefix: str) -> _List[tuple[str, str]]:
        """(thread, checkpoint_ns) pairs holding data under a namespace prefix."""
        found = []
        for namespace in self.store.namespaces(prefix):
            parsed = K.parse_scope(namespace)
            if parsed is not None:
                found.append(parsed)
        return found

    def _tagged(
        self, thread_id: str, checkpoint_ns: str, stop: str | None, page: int
    ) -> Iterator[tuple[str, str, str, Any, _List[Any]]]:
        for checkpoint_id, entry, writes in self._groups(
            K.scope(thread_id, checkpoint_ns), stop, page
        ):
            yield thread_id, checkpoint_ns, checkpoint_id, entry, writes

    def _groups(
        self, namespace: str, stop: str | None, page: int
    ) -> Iterator[tuple[str, Any, _List[Any]]]:
        """``(checkpoint_id, entry, write entries)`` newest first, a page of keys at a time.

        A reverse scan meets a checkpoint's writes just before the checkpoint,
        so a group is complete when its checkpoint arrives: a write belongs to
        it when their keys share the ``O(id)`` head. Writes whose checkpoint
        does not exist are skipped.
        """
        page = max(1, page)
        items = self.store.items
        id_of = K.checkpoint_id_of
        end = K.ID_END
        writes: _List[Any] = []
        writes_head: str | None = None
        while True:
            rows = items(namespace, stop=stop, reverse=True, limit=page, raw=True)
            for key, value in rows:
                if key[-1] == "c":
                    yield (
                        id_of(key),
                        value,
                        writes if writes_head == key[:-1] else [],
                    )
                    writes, writes_head = [], None
                else:
                    head = key[: key.index(end) + 2]
                    if head == writes_head:
                        writes.append(value)
                    else:
                        writes, writes_head = [value], head
            if len(rows) < page:
                return
            stop = rows[-1][0]
            page = min(page * 4, _PAGE_MAX)

    def _build(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        entry: Any,
        writes: _List[Any],
        filter: dict[str, Any] | None = None,
    ) -> CheckpointTuple | None:
        """Decode a stored checkpoint entry and its pending-write entries (stored bytes).

        With a ``filter``, the metadata is read first and None is returned
        when it does not match, so skipped checkpoints cost no checkpoint decode.
        """
        serde = self.serde
        if filter and not C.matches(E.head(serde, entry)[0], filter):
            return None
        metadata, parent_id, checkpoint = E.decode(serde, entry)
        pending: _List[PendingWrite] = []
        if writes:
            # The runtime's order: task path, then task id, then index.
            decoded = [loads(w) for w in writes]
            decoded.sort(key=_write_order)
            revive = serde.loads_typed
            pending = [(w[0], w[3], revive((w[4], w[5]))) for w in decoded]
        # tuple.__new__ is what NamedTuple._make uses: it skips the keyword-handling __new__.
        return _new_tuple(
            CheckpointTuple,
            (
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": checkpoint_ns,
                        "checkpoint_id": checkpoint_id,
                    }
                },
                checkpoint,
                metadata,
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": checkpoint_ns,
                        "checkpoint_id": parent_id,
                    }
                }
                if parent_id
                else None,
                pending,
            ),
        )

    # -- thread operations ----------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of one thread; other threads are untouched."""
        thread_id = C.thread_id_of({"thread_id": thread_id})
        # The run index first: a put landing between the two steps re-creates
        # its index entry (the thread's checkpoints then go), and at worst an
        # entry is left pointing at nothing. The other order could leave a
        # checkpoint that its run's index no longer names.
        index = self._run_index_pairs(thread_id)
        if index:
            self.store.delete_many(index)
        self.store.delete_prefix(K.thread_prefix(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another thread id.

        The whole parent chain is copied, so delta channels stay rebuildable.
        Entries already in the target under the same keys are replaced.
        """
        source = C.thread_id_of({"thread_id": source_thread_id})
        target = C.thread_id_of({"thread_id": target_thread_id})
        if source == target:
            return
        index = [
            (ns, K.run_key(target, K.parse_run_key(key)[1]), None)
            for ns, key in self._run_index_pairs(source)
        ]
        # Index first: an entry whose checkpoint is missing is harmless, the reverse is not.
        if index:
            self.store.set_many(index)
        self.store.copy_prefix(K.thread_prefix(source), K.thread_prefix(target))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints written by the given runs, with their pending writes.

        A run index (from ``metadata["run_id"]``: one entry per run and thread
        namespace it wrote to) says where to look, so the cost follows the
        threads the runs wrote to, not the size of the store. Copies made by
        :meth:`copy_thread` carry the run id and are removed too. The index
        entries stay (a run still writing may add checkpoints there); they go
        with their thread.
        """
        for run_id in run_ids:
            if type(run_id) is not str:
                raise InvalidArgumentError(f"run ids must be str, got {type(run_id).__name__}")
        wanted = set(run_ids)
        scopes = {
            K.parse_run_key(key)
            for run_id in wanted
            for key in self.store.keys(K.run_namespace(run_id))
        }
        pairs: _List[tuple[str, str]] = []
        for thread_id, checkpoint_ns in sorted(scopes):
            namespace = K.scope(thread_id, checkpoint_ns)
            # Key order puts each checkpoint just before its own writes, which
            # share its key up to the last character.
            head: str | None = None
            for key, entry in self._scan(namespace):
                if key[-1] == K.CHECKPOINT:
                    head = key[:-1] if E.head(self.serde, entry)[2] in wanted else None
                    if head is None:
                        continue
                elif head is None or not key.startswith(head):
                    continue
                pairs.append((namespace, key))
        if pairs:
            self.store.delete_many(pairs)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """Drop old checkpoints of the given threads.

        Args:
            thread_ids: Threads to prune; unknown ids are ignored.
            strategy: ``"keep_latest"`` keeps the newest checkpoint of each
                namespace with its pending writes; ``"delete"`` removes the
                threads entirely.
            keep_last: swarmstate extension: keep the newest ``keep_last``
                checkpoints of each namespace instead of one.

        Not aware of LangGraph's beta ``DeltaChannel``: do not prune threads
        of graphs that use it (see docs/langgraph.md).
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidArgumentError(
                f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        if keep_last is not None:
            if type(keep_last) is not int or keep_last < 1:
                raise InvalidArgumentError(f"keep_last must be a positive int, got {keep_last!r}")
            if strategy != "keep_latest":
                raise InvalidArgumentError("keep_last applies to strategy='keep_latest' only")
        for raw in thread_ids:
            thread_id = C.thread_id_of({"thread_id": raw})
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            pairs: _List[tuple[str, str]] = []
            for _, checkpoint_ns in self._scopes(K.thread_prefix(thread_id)):
                pairs.extend(self._older_than_newest(thread_id, checkpoint_ns, keep_last or 1))
            if pairs:
                self.store.delete_many(pairs)

    def _older_than_newest(
        self, thread_id: str, checkpoint_ns: str, keep: int
    ) -> _List[tuple[str, str]]:
        """Keys of everything in one namespace older than its ``keep`` newest checkpoints."""
        namespace = K.scope(thread_id, checkpoint_ns)
        kept = 0
        oldest_kept: str | None = None
        for key in self.store.keys(namespace, reverse=True):
            if K.parse_entry_key(key)[1]:
                kept += 1
                if kept == keep:
                    oldest_kept = key
                    break
        if oldest_kept is None:
            return []
        # Everything before the oldest kept checkpoint's key sorts before its group.
        # Run index entries stay: the run may have kept checkpoints here.
        return [(namespace, key) for key in self.store.keys(namespace, stop=oldest_kept[:-1])]

    def _run_index_pairs(self, thread_id: str) -> _List[tuple[str, str]]:
        """Run index entries that point into one thread, from the runs it saw."""
        pairs = []
        for namespace in self.store.namespaces(K.thread_prefix(thread_id)):
            parsed = K.parse_runs_seen(namespace)
            if parsed is None:
                continue
            for key in self.store.keys(namespace):
                run_id = K.read_field(key, 0)[0]
                pairs.append((K.run_namespace(run_id), K.run_key(*parsed)))
        return pairs

    def _scan(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        """Every ``(key, stored bytes)`` of a namespace in key order, a page at a time."""
        rows = self.store.items(namespace, limit=_PAGE_MAX, raw=True)
        yield from rows
        while len(rows) == _PAGE_MAX:
            last = rows[-1][0]
            # ``start`` is inclusive: the next page begins with the last key seen.
            rows = self.store.items(namespace, start=last, limit=_PAGE_MAX + 1, raw=True)
            rows = rows[1:] if rows and rows[0][0] == last else rows[:_PAGE_MAX]
            yield from rows

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """A version greater than ``current``, unique across forks of a thread.

        The random fraction keeps versions written on two branches of a fork
        apart, so one branch never overwrites the other's channel blob.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".", 1)[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- async: thin wrappers over the sync implementation ---------------

    async def _run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self._async_inline:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await self._run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`; results are fetched before the first one is yielded."""
        rows = await self._run(
            C.materialize, self.list, config, filter=filter, before=before, limit=limit
        )
        for row in rows:
            yield row

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._run(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._run(self.delete_for_runs, run_ids)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """Async :meth:`prune`."""
        await self._run(self.prune, thread_ids, strategy=strategy, keep_last=keep_last)

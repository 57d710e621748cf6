"""SwarmStateSaver: a LangGraph checkpointer over any swarmstate store.

Drop-in for ``InMemorySaver``, ``SqliteSaver`` and ``AsyncSqliteSaver``::

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    graph = builder.compile(checkpointer=SwarmStateSaver(DiskStore("state.db")))

Where things are kept: this module is the adapter (argument checks, a
:class:`.write.Scope`, one plan handed to the driver, :mod:`.steps`); the
write path in :mod:`.write`, the read path in :mod:`.read`; the stored
layout in :mod:`.format` (store names in :mod:`.format.keys`, the
checkpoint entry in :mod:`.format.entry`); channel values by version in
:mod:`.values` (their bytes shared with earlier versions as chunks:
:mod:`.sharing`), thread operations in :mod:`.threads`, ``DeltaChannel``
history in :mod:`.history`.
Design points:

* A checkpoint costs what changed. Its entry holds the checkpoint without
  channel values; each value is stored once, under ``(channel, version)``,
  when ``new_versions`` says it changed, and its bytes share what they
  can with the version before (chunks). LangGraph's reference semantics, exactly:
  an unchanged channel reads back the value stored at its version.
* A put is one atomic store write: the entry, carrying its order and run
  as tags (:mod:`.catalog`), and every chunk it newly references. A
  checkpoint's pending writes sort right after it, so one range query
  reads both.
* "Latest" is the last key of the thread's namespace: one indexed lookup in
  the store, correct when another process wrote it. The caches hold only
  immutable, named content (see :mod:`.values`).
* Deserialization goes through LangGraph's ``JsonPlusSerializer`` in strict
  msgpack-allowlist mode with no pickle fallback, unless you pass a serde;
  what it revives besides LangGraph's safe set is named by code, never by
  stored data (:mod:`.allowlist`).
* The sync methods are the implementation; async ones call them directly on
  the in-memory store (it never blocks) and in a worker thread otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from swarmstate import backends
from swarmstate._base import BaseStore
from swarmstate._checks import hide_password
from swarmstate._errors import InvalidArgumentError, MissingDependencyError
from swarmstate.backends.memory import Store
from swarmstate.integrations.langgraph import catalog
from swarmstate.integrations.langgraph.config import (
    checkpoint_ns_of,
    configurable,
    matches,
    scope_of,
    stored_metadata,
    thread_id_of,
)
from swarmstate.integrations.langgraph.format import keys

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        EXCLUDED_METADATA_KEYS,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    # These need msgpack, from the same extra.
    from swarmstate.integrations.langgraph import allowlist, read, steps, write
    from swarmstate.integrations.langgraph.allowlist import Allowlist
    from swarmstate.integrations.langgraph.guard import Guards, Refusals
    from swarmstate.integrations.langgraph.operations import ThreadMethods
    from swarmstate.integrations.langgraph.retention import Retainer, Retention, RetentionReport
    from swarmstate.integrations.langgraph.revive import msgpack_as_jsonplus
    from swarmstate.integrations.langgraph.values import Values
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"swarmstate.integrations.langgraph needs LangGraph ({exc}); install it with "
        'pip install "pyswarmstate[langgraph]"'
    ) from exc

__all__ = ["Retention", "RetentionReport", "SwarmStateSaver", "strict_serializer"]

_T = TypeVar("_T")
_PAGE_MAX = 256
_List = list  # the class defines a method named ``list``
_CACHE_BYTES = 64 * 1024 * 1024

_EXCLUDED_METADATA = frozenset(EXCLUDED_METADATA_KEYS)  # config keys metadata leaves out


class _StrictSerializer(JsonPlusSerializer):
    """LangGraph's serializer, reviving objects only from its msgpack allowlist.

    Writes exactly as ``JsonPlusSerializer``. On reads, values of LangGraph's
    older ``"json"`` format come back as the plain data they hold: their
    ``lc`` constructor entries (``PromptTemplate`` and the like) are not
    turned back into objects, whatever module they name.
    """

    @msgpack_as_jsonplus
    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if data[0] == "json":
            return json.loads(data[1])
        return super().loads_typed(data)


def strict_serializer(allow: Sequence[Any] = ()) -> JsonPlusSerializer:
    """LangGraph's serializer that revives only allowlisted classes and never unpickles.

    Args:
        allow: More classes to revive: classes, each with the classes its
            fields declare (pass the graph's state schema to allow all it
            declares), or ``(module, class name)`` pairs. (A saver also
            revives every class this process writes through a saver; this
            is for a process that reads what another one wrote.)

    Values stored in the older ``"json"`` format are returned as plain data.
    """
    serde = _StrictSerializer(pickle_fallback=False, allowed_msgpack_modules=None)
    names = allowlist.declared(allow, "strict_serializer(allow=...)") if allow else ()
    return serde.with_msgpack_allowlist(sorted(names)) if names else serde


class SwarmStateSaver(ThreadMethods):
    """A LangGraph checkpointer that keeps every thread in a swarmstate store.

    Args:
        store: Any swarmstate store (``Store``, ``DiskStore``,
            ``PostgresStore``); default a new in-memory ``Store()``. It is
            exposed as :attr:`store`, so ``saver.store.snapshot()`` and
            ``saver.store.restore(snap)`` move every thread in time at once.
        serde: The serializer for checkpoint data; default
            :func:`strict_serializer`. Besides LangGraph's safe set, reads
            revive the classes ``allow`` declares, the classes this process
            has written through any saver, and, in LangGraph's strict mode
            (``LANGGRAPH_STRICT_MSGPACK=true``), the classes the graph's
            schema declares (the runtime's ``with_allowlist``); never a
            class named only by stored data.
        allow: Classes reads revive besides those: classes, each with the
            classes its fields declare, so ``allow=[State]`` (the graph's
            state schema) allows every class the state holds, or
            ``(module, class name)`` pairs. What a process needs to read
            what another process wrote.
        cache_bytes: Memory for the serialized list values (and values
            stored apart, such as a DeltaChannel's snapshot) of recently
            written or read checkpoints, serialized messages by content and
            the shapes of stored messages read before (default 64 MiB): what
            makes a ``put`` compare a list with its parent's bytes instead of
            reading them back, and a read rebuild messages instead of
            validating them again. 0 turns it off; nothing is ever wrong
            because of it, only slower without.
        retention: A :class:`Retention` policy to apply as graphs write
            (amortized: once per ``retention.every`` puts); see :meth:`retain`.
        compress: Store serialized messages zlib-compressed (checkpoint
            entries and pending writes of 256 bytes or more, chunks of
            1 kB or more, where that saves an eighth). Default (None): on for
            ``PostgresStore``, which stores rows under about 2 kB as they
            are and sends every byte over the network; off for ``Store``
            and ``DiskStore``, where the first read of a long thread would
            pay to inflate its messages. Stored rows say whether they are
            compressed, so every saver reads both.

    Thread-safe: the runtime calls ``put``/``put_writes`` from worker threads
    while reading on the caller's thread; every write is one atomic store
    batch.
    """

    store: BaseStore

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        serde: SerializerProtocol | None = None,
        cache_bytes: int = _CACHE_BYTES,
        retention: Retention | None = None,
        compress: bool | None = None,
        allow: Sequence[Any] = (),
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            hint = ""
            if isinstance(store, (str, os.PathLike)):
                # A PostgreSQL DSN may hold a password: the hint never repeats it.
                shown = hide_password(str(store), str(store))
                hint = (
                    f"; for a file, SwarmStateSaver(DiskStore({shown!r})) or "
                    f"SwarmStateSaver.from_conn_string({shown!r}), which opens and closes it"
                )
            raise InvalidArgumentError(
                f"store must be a swarmstate store (Store, DiskStore, PostgresStore), "
                f"got {type(store).__name__}{hint}"
            )
        if retention is not None and not isinstance(retention, Retention):
            raise InvalidArgumentError(
                f"retention must be a swarmstate Retention, got {type(retention).__name__}"
            )
        if type(cache_bytes) is not int or cache_bytes < 0:
            raise InvalidArgumentError(
                f"cache_bytes must be a non-negative int, got {cache_bytes!r}"
            )
        if compress is not None and type(compress) is not bool:
            raise InvalidArgumentError(f"compress must be a bool or None, got {compress!r}")
        super().__init__(serde=serde if serde is not None else strict_serializer())
        self.store = store if store is not None else Store()
        if compress is None:
            compress = type(self.store)._compress_large_values
        # The in-memory store never blocks, so a worker thread would only add latency.
        self._async_inline = isinstance(self.store, Store)
        # LangGraph's serializer writes None as ("null", b""), with no work.
        plain = type(self.serde).dumps_typed is JsonPlusSerializer.dumps_typed
        self._values = Values(self.store, cache_bytes, compress, self.serde if plain else None)
        self._retainer = Retainer(self.store, self._values)
        self._allowlist = Allowlist(allowlist.declared(allow, "allow") if allow else frozenset())
        self._guards = Guards(self.store)
        self.retention = retention
        self._namespaces = keys.Scopes()
        self._read = read.Reader(self.store, self._values, self._allowlist, self._namespaces)
        # The write path; it also keeps what the tombstones that refused this
        # saver's writes say about later ones.
        self._writer = write.Writer(
            self.store, self._values, self._guards, Refusals(self.store), self._retainer
        )
        self._owns_store = store is None

    def __repr__(self) -> str:
        return f"SwarmStateSaver({self.store!r})"

    @property
    def compress(self) -> bool:
        """Whether large serialized messages are stored compressed (see ``compress``)."""
        return self._values.compress

    # -- lifecycle -------------------------------------------------------

    @classmethod
    def from_conn_string(cls, conn_string: str, **options: Any) -> SwarmStateSaver:
        """A saver over a store it opens from ``conn_string``, and closes with itself.

        ``"postgresql://..."`` (or ``postgres://``, or libpq ``key=value``
        text when no file of that name exists) opens a
        :class:`~swarmstate.backends.postgres.PostgresStore`; ``":memory:"``
        an in-memory ``Store``; anything else is a file path for a
        :class:`~swarmstate.backends.disk.DiskStore`
        (:func:`swarmstate.backends.open_store`, which the command line uses
        too). ``options`` go to the store (``synchronous=``, ``schema=``,
        ...). Use it in a ``with`` block, or call :meth:`close`::

            with SwarmStateSaver.from_conn_string("state.db") as saver:
                graph = builder.compile(checkpointer=saver)

        A new PostgreSQL schema needs ``saver.setup()`` once, as LangGraph's
        ``PostgresSaver`` does.
        """
        if type(conn_string) is not str or not conn_string:
            raise InvalidArgumentError(
                f"conn_string must be a non-empty str (a file path, ':memory:' or a "
                f"PostgreSQL URL), got {conn_string!r}"
            )
        store = backends.open_store(conn_string, **options)
        saver = cls(store)
        saver._owns_store = True
        return saver

    def setup(self) -> None:
        """Create the store's tables if it has any (idempotent), as ``PostgresSaver.setup`` does.

        Also converts a store written by releases before the checkpoints carried
        their tags (otherwise done by the first put): see :mod:`.catalog`.
        """
        setup = getattr(self.store, "setup", None)
        if setup is not None:
            setup()
        catalog.convert(self.store, functools.partial(write.run_id_of, self.serde))
        self._writer.indexed = True

    def close(self) -> None:
        """Close the store if this saver opened it (``from_conn_string``, or no store given)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> SwarmStateSaver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SwarmStateSaver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Async :meth:`close`: the store's own ``aclose`` where it has one (its
        async pool is closed on its loop), else ``close`` off the loop."""
        if not self._owns_store:
            return
        aclose = getattr(self.store, "aclose", None)
        if aclose is not None:
            await aclose()
        else:
            await self._run(self.store.close)

    @classmethod
    @contextlib.asynccontextmanager
    async def afrom_conn_string(
        cls, conn_string: str, **options: Any
    ) -> AsyncIterator[SwarmStateSaver]:
        """The async twin of :meth:`from_conn_string`, for an ``async with`` block.

        On PostgreSQL the store's async pool is opened on the running loop
        before the block (so ``aput``, ``aput_writes`` wait on the server
        without a thread) and closed after it; pool settings go in
        ``options`` (``min_size=``, ``max_size=``, ``timeout=``, as for
        :class:`~swarmstate.backends.postgres.PostgresStore`). A file or
        ``":memory:"`` opens as :meth:`from_conn_string` does::

            async with SwarmStateSaver.afrom_conn_string(DSN, max_size=20) as saver:
                await saver.asetup()
                graph = builder.compile(checkpointer=saver)
        """
        saver = await asyncio.to_thread(cls.from_conn_string, conn_string, **options)
        try:
            aopen = getattr(saver.store, "aopen", None)
            if aopen is not None:
                # The pool only: a new schema is made by asetup() in the block.
                await aopen(check_schema=False)
            yield saver
        finally:
            await saver.aclose()

    async def asetup(self) -> None:
        """Async :meth:`setup` (run off the loop: it creates tables once)."""
        await asyncio.to_thread(self.setup)

    @staticmethod
    def parse_namespace(namespace: str) -> tuple[str, str] | None:
        """``(thread_id, checkpoint_ns)`` of a store namespace holding checkpoints, else None.

        Handy for reading snapshot diffs: ``saver.parse_namespace(ns)`` for each
        ``(ns, key)`` says which thread changed.
        """
        return keys.parse_scope(namespace)

    # -- writes ----------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, and the channel values ``new_versions`` says changed.

        One atomic store write: the checkpoint entry (its values' stored forms
        inside, its order and run as tags), and the chunks of the bytes no
        earlier version holds.
        """
        return steps.run(self.store, self._put_plan(config, checkpoint, metadata, new_versions))

    def _put_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> steps.Plan[RunnableConfig]:
        """:meth:`put` as a plan (:mod:`.steps`), which ``put`` runs and ``aput`` awaits:
        the arguments checked, a :class:`.write.Scope`, the write path's plan."""
        conf, thread_id, checkpoint_ns = scope_of(config)
        checkpoint_id = checkpoint["id"]
        if type(checkpoint_id) is not str or not checkpoint_id:
            raise InvalidArgumentError(
                f"checkpoint id must be a non-empty str, got {checkpoint_id!r}"
            )
        if len(checkpoint_id) > 100 and catalog.order_too_long(keys.ordered(checkpoint_id)):
            raise InvalidArgumentError(
                f"checkpoint id {checkpoint_id[:40]!r}... is too long: its stored order "
                f"takes over {catalog.ORDER_BYTES} UTF-8 bytes; use shorter ids "
                "(LangGraph's own are 36 characters)"
            )
        if type(new_versions) is not dict and not isinstance(new_versions, Mapping):
            raise InvalidArgumentError(
                f"new_versions must be a mapping of channel to version, got {new_versions!r}"
            )
        kept_metadata = stored_metadata(config, metadata, _EXCLUDED_METADATA)
        namespace = self._namespaces.namespace(thread_id, checkpoint_ns)
        scope = write.Scope(
            conf, thread_id, checkpoint_ns, namespace, conf.get("checkpoint_id") or None
        )
        return self._writer.put(
            self.serde, scope, checkpoint, kept_metadata, new_versions, self.retention
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes: regular ones insert-or-ignore, special ones replace."""
        steps.run(self.store, self._put_writes_plan(config, writes, task_id, task_path))

    def _put_writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> steps.Plan[None]:
        """:meth:`put_writes` as a plan (:mod:`.steps`), which ``aput_writes`` awaits."""
        if not writes:
            return write.nothing()
        conf = configurable(config)
        thread_id = thread_id_of(conf)
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
        checkpoint_ns = checkpoint_ns_of(conf)
        namespace = self._namespaces.namespace(thread_id, checkpoint_ns)
        scope = write.Scope(conf, thread_id, checkpoint_ns, namespace, checkpoint_id)
        return self._writer.put_writes(self.serde, scope, writes, task_id, task_path)

    # -- reads -----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config``, or the latest of its thread and namespace."""
        return steps.run(self.store, self._get_tuple_plan(config))

    def _get_tuple_plan(self, config: RunnableConfig) -> steps.Plan[CheckpointTuple | None]:
        """:meth:`get_tuple` as a plan (:mod:`.steps`), which ``aget_tuple`` awaits."""
        conf, thread_id, checkpoint_ns = scope_of(config)
        checkpoint_id = conf.get("checkpoint_id")
        if checkpoint_id and type(checkpoint_id) is not str:
            raise InvalidArgumentError(
                f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}"
            )
        return self._read.get_tuple(self.serde, thread_id, checkpoint_ns, checkpoint_id or None)

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

        Channel values are read for a batch of results at once, so versions
        that share chunks fetch them once.
        """
        if limit is not None and limit <= 0:
            return
        if filter is not None and not isinstance(filter, dict):
            raise InvalidArgumentError(
                f"filter must be a dict of metadata entries, got {type(filter).__name__}"
            )
        before_id = configurable(before).get("checkpoint_id") if before else None
        if before_id is not None and type(before_id) is not str:
            raise InvalidArgumentError(f"before checkpoint_id must be a str, got {before_id!r}")
        only_id = None
        scopes: _List[tuple[str, str]] = []
        if config is not None:
            conf = configurable(config)
            thread_id = thread_id_of(conf)
            only_id = conf.get("checkpoint_id") or None
            if "checkpoint_ns" in conf:
                scopes = [(thread_id, checkpoint_ns_of(conf))]
            else:
                scopes = self._scopes(keys.thread_prefix(thread_id))
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
                if found is not None and matches(found.metadata, filter):
                    yield found
                    if limit is not None:
                        limit -= 1
                        if limit <= 0:
                            return
            return
        every: _List[tuple[str, str]] | None = scopes
        if config is None:
            # Every thread: the order tags, newest first (one range a page), or on a
            # store not converted yet every thread namespace, merged.
            every = None if self._indexes_complete() else self._scopes(keys.THREADS)
        yield from self._read.listed(self.serde, every, before_id, limit, filter)

    def _indexes_complete(self) -> bool:
        """Whether every checkpoint carries its tags (see catalog); remembered once true."""
        writer = self._writer
        if not writer.indexed:
            writer.indexed = catalog.converted(self.store)
        return writer.indexed

    def _reader(self) -> SerializerProtocol:
        """The serializer for reads: ``serde``, allowing the types the graphs wrote too."""
        return self._allowlist.reader(self.serde)  # type: ignore[no-any-return]

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """A version greater than ``current``, unique across forks of a thread.

        The random fraction keeps versions written on two branches of a fork
        apart, so one branch never overwrites the other's stored value.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".", 1)[0])
        return f"{number + 1:012}.{random.getrandbits(40):010x}"

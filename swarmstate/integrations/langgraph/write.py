"""The saver's write path: ``put`` and ``put_writes`` as plans, down to one store write.

The adapter (:mod:`.saver`) checks the arguments, builds a :class:`Scope`
once from the config, and hands the plan to a driver (:mod:`.steps`). From
there a put goes one way down: what changed and how to store it
(:mod:`.values`), the record and its keys (:mod:`.format`), the conditions
the thread's guard asks for (:mod:`.guard`), and one ``store.write``.
Nothing below this module calls back up; the rare paths (a refusal's
clean-up, a parent not cached, retention) are ``Blocking`` steps that run
code of this module or below it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint

from swarmstate._base import BaseStore
from swarmstate._checks import Absent, Condition, Holds, Present, Tags, Transaction
from swarmstate._codec import dumps
from swarmstate._errors import ConflictError, InvalidArgumentError, ThreadDeletedError
from swarmstate.integrations.langgraph import allowlist, catalog, guard, steps, threads
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.format.pack import pack
from swarmstate.integrations.langgraph.guard import Guards, Refusals
from swarmstate.integrations.langgraph.retention import Retainer, Retention
from swarmstate.integrations.langgraph.values import (
    SHARE_AT,
    Fresh,
    Head,
    LenderGone,
    TakenGone,
    Values,
)

__all__ = ["Scope", "Writer", "nothing", "run_id_of"]

_new_tuple = tuple.__new__
_NO_PARENT: Final = Head({}, {})
_NAMES_MAX: Final = 4096
_ATTEMPTS: Final = 20
_List = list

Row = tuple[str, str, Any] | tuple[str, str, Any, Tags]


class Scope:
    """Where a write goes and what it builds on, read from its config once.

    ``checkpoint_id`` is the checkpoint the write builds on: a put's parent
    (None for a thread's first), or the checkpoint pending writes belong to.
    ``built_on`` is ``(namespace, checkpoint id)`` of that checkpoint and of
    the enclosing graphs' checkpoints a subgraph runs under (the config's
    ``checkpoint_map``), the nearest last: a deleted thread refuses a
    subgraph of the run that was going on as it refuses that run.

    Raises:
        InvalidArgumentError: The config's ``fence`` is not a claim's token.
    """

    __slots__ = ("built_on", "checkpoint_id", "checkpoint_ns", "fence", "namespace", "thread_id")

    def __init__(
        self,
        conf: dict[str, Any],
        thread_id: str,
        checkpoint_ns: str,
        namespace: str,
        checkpoint_id: str | None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.namespace = namespace
        self.checkpoint_id = checkpoint_id
        fence = conf.get("fence")
        if fence is not None and (type(fence) is not int or fence < 1):
            raise InvalidArgumentError(
                f"config['configurable']['fence'] must be a token from claim() (a positive int), "
                f"got {fence!r}"
            )
        self.fence: int | None = fence
        found: _List[tuple[str, str]] = []
        outer = conf.get("checkpoint_map")
        if outer and isinstance(outer, dict):
            for name, outer_id in sorted(outer.items(), key=lambda item: len(str(item[0]))):
                if (
                    type(name) is str
                    and name != checkpoint_ns
                    and type(outer_id) is str
                    and outer_id
                ):
                    found.append((keys.scope(thread_id, name), outer_id))
        if checkpoint_id:
            found.append((namespace, checkpoint_id))
        self.built_on = found


def run_id_of(serde: Any, data: bytes) -> Any:
    """The run id a stored checkpoint entry names."""
    return entry.head(serde, data)[2]


def _hold(conditions: Sequence[Present | Holds], found: Sequence[Any]) -> bool:
    """Whether each of ``conditions`` holds, given the stored bytes of what it names."""
    return all(
        data is not None and (type(condition) is not Holds or data == condition.data)
        for condition, data in zip(conditions, found, strict=True)
    )


def nothing() -> steps.Plan[None]:
    """A plan with no step (``put_writes`` of no writes)."""
    return
    yield  # a generator  # pragma: no cover


def _deleted(thread_id: str, checkpoint_id: str) -> ThreadDeletedError:
    return ThreadDeletedError(
        f"thread {thread_id!r} was deleted and checkpoint {checkpoint_id!r} (or one it builds "
        "on) was refused: the run that wrote it cannot go on; start a new run (without a "
        "checkpoint_id) to reuse the thread id"
    )


class Writer:
    """The write path of a saver over one store, and what it keeps between writes.

    Shared by a saver and its copies (LangGraph's ``with_allowlist`` makes
    one with another serializer): the serializer is passed to each plan.
    """

    def __init__(
        self,
        store: BaseStore,
        values: Values,
        guards: Guards,
        refusals: Refusals,
        retainer: Retainer,
    ) -> None:
        self.store = store
        self.values = values
        self.guards = guards
        self.refusals = refusals
        self.retainer = retainer
        self.typed = False
        """True once the serializer wrote a non-msgpack entry."""
        self.indexed = False
        """Whether every checkpoint entry of the store is known to carry its tags
        (:mod:`.catalog`); the first put makes it so."""
        self._run_names: dict[str, str] = {}  # run id -> its group tag
        # The condition "the thread has no guard", per thread (immutable, so kept).
        self._unguarded: dict[str, Absent] = {}

    # -- put ---------------------------------------------------------------

    def put(
        self,
        serde: Any,
        scope: Scope,
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
        new_versions: Mapping[str, Any],
        retention: Retention | None,
    ) -> steps.Plan[RunnableConfig]:
        """A checkpoint's put: its record and new chunks in one ``store.write``.

        ``metadata`` is what the checkpoint is stored with (the adapter merged
        the config's entries in); ``retention`` is applied after the write.
        """
        thread_id, checkpoint_ns = scope.thread_id, scope.checkpoint_ns
        checkpoint_id = checkpoint["id"]
        run_id = metadata.get("run_id")
        if type(run_id) is not str:
            run_id = None
        refusals = self.refusals
        if refusals.deleted and (
            yield steps.Blocking(
                lambda: refusals.orphaned(thread_id, scope.namespace, scope.built_on, checkpoint_id)
            )
        ):
            yield self._refusing(serde, scope, checkpoint_id, refused=False)
            raise _deleted(thread_id, checkpoint_id)
        try:
            try:
                yield from self._put(
                    serde, scope, checkpoint, metadata, new_versions, run_id, whole=False
                )
            except TakenGone:
                # A pending write whose bytes it took had not landed as offered (or
                # is gone): built again, storing its own bytes.
                yield from self._put(
                    serde, scope, checkpoint, metadata, new_versions, run_id, whole=False,
                    take=False,
                )  # fmt: skip
        except LenderGone:
            # A checkpoint this one took stored bytes from was deleted meanwhile
            # (retention elsewhere): store every value anew, taking nothing.
            yield from self._put(
                serde, scope, checkpoint, metadata, new_versions, run_id, whole=True
            )
        except ThreadDeletedError:
            yield self._refusing(serde, scope, checkpoint_id, refused=True)
            raise
        if refusals.deleted and (
            yield steps.Blocking(
                lambda: refusals.orphaned(thread_id, scope.namespace, scope.built_on)
            )
        ):
            # Refused while it was written: the refusal's clean-up may have looked
            # before it landed, so it takes itself out.
            yield self._refusing(serde, scope, checkpoint_id, refused=False)
            raise _deleted(thread_id, checkpoint_id)
        if retention is not None:
            retainer = self.retainer
            yield steps.Blocking(lambda: retainer.wrote(serde, retention, thread_id))
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _put(
        self,
        serde: Any,
        scope: Scope,
        checkpoint: Checkpoint,
        metadata: dict[str, Any],
        new_versions: Mapping[str, Any],
        run_id: str | None,
        *,
        whole: bool,
        take: bool = True,
    ) -> steps.Plan[None]:
        """:meth:`put`'s one store write; ``whole``: every value stored anew; ``take``:
        a value with the bytes of a pending write of the parent takes its chunks."""
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        thread_id, checkpoint_ns, namespace = scope.thread_id, scope.checkpoint_ns, scope.namespace
        parent_id = scope.checkpoint_id
        built_on = scope.built_on
        cache = self.values
        parent: Head | None = _NO_PARENT
        parent_pair = outer = outer_pair = None
        if parent_id and not whole:
            parent_pair = (namespace, keys.checkpoint_key(parent_id))
            # The parent is usually the checkpoint this saver just wrote: in the cache.
            parent = cache.heads.get((thread_id, checkpoint_ns, parent_id))
            if parent is None:
                parent = yield steps.Blocking(
                    lambda: cache.parent_head(serde, thread_id, checkpoint_ns, parent_id)
                )
        elif not whole and len(built_on) > 0:
            # A subgraph's first checkpoint: its values are compared with the
            # enclosing graph's checkpoint it runs under (the nearest one).
            outer_ns, outer_id = built_on[-1]
            outer_scope = keys.parse_scope(outer_ns)
            if outer_scope is not None:
                outer_pair = (outer_ns, keys.checkpoint_key(outer_id))
                outer_ns_name = outer_scope[1]
                outer = cache.heads.get((thread_id, outer_ns_name, outer_id))
                if outer is None:
                    outer = yield steps.Blocking(
                        lambda: cache.parent_head(serde, thread_id, outer_ns_name, outer_id)
                    )
        stored: Mapping[str, Any] = new_versions
        if parent is None or whole:
            # A parent missing, stored whole (an earlier layout), or deleted while
            # this put was made: keep every value this checkpoint holds, so that
            # it depends on no other entry.
            parent = None
            stored = {ch: versions[ch] for ch in values if ch in versions}
            stored.update(new_versions)
        build = functools.partial(
            cache.build,
            serde,
            thread_id,
            checkpoint_ns,
            values,
            versions,
            stored,
            parent,
            parent_pair,
            outer,
            outer_pair,
            take=take,
        )
        # Awaited: on the loop unless it must read the store (then in a thread).
        built = yield steps.Blocking(build, first=functools.partial(build, offline=True))
        head = dict(checkpoint)  # the checkpoint without its values
        head.pop("channel_values", None)
        parts = (serde, head, metadata, parent_id, run_id, built.forms)
        data = None if self.typed else entry.encode(*parts)
        if data is None:
            # The serializer writes another format: typed pairs from now on,
            # without first trying (and discarding) a whole-entry document.
            self.typed = True
            data = entry.encode(*parts, typed=True)
        assert data is not None  # the typed layout always encodes
        if cache.compress:
            data = entry.compressed(data)
        checkpoint_id = checkpoint["id"]
        entry_key = keys.checkpoint_key(checkpoint_id)
        group = None
        if run_id is not None:
            group = self._run_names.get(run_id)
            if group is None:
                if len(self._run_names) > _NAMES_MAX:
                    self._run_names.clear()
                group = self._run_names[run_id] = catalog.run_tag(run_id)
        # The one row: the store keeps the checkpoint's order and run on it (catalog).
        rows: _List[Row] = [
            (namespace, entry_key, data, Tags(order=entry_key[:-1], group=group)),
            *built.rows,
        ]
        if not self.indexed:
            # This saver's first write: the store's checkpoints are made to carry
            # their tags, and the store marked so (with this write when it holds no
            # thread yet).
            store = self.store
            run_ids = functools.partial(run_id_of, serde)
            rows += yield steps.Blocking(lambda: catalog.start_converting(store, run_ids))
        # Learned before the write: a write the store refuses teaches them too.
        if built.classes:
            allowlist.learn(built.classes)
        if built.offers:
            # A task's write of the same bytes on the parent, saved meanwhile in the
            # background, takes them, requiring this record as written.
            stored_as = Holds(namespace, entry_key, data)
            for on, channel, fid, version, lender in built.offers:
                cache.offer(on, channel, Fresh(fid, version, stored_as, lender))
        # After a delete_thread, a put built on a checkpoint that is gone is refused;
        # the thread's claim, if any, is checked (guard).
        yield from self._write(
            scope, rows, lenders=built.lenders, required=built.required, made=checkpoint_id
        )
        self.indexed = True
        cache.cache(built)
        cache.remember(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            _new_tuple(Head, (dict(versions), built.forms, run_id)),
        )
        cache.saw_latest(namespace, checkpoint_id)

    # -- put_writes --------------------------------------------------------

    def put_writes(
        self,
        serde: Any,
        scope: Scope,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        *,
        share: bool = True,
        take: bool = True,
    ) -> steps.Plan[None]:
        """A task's pending writes of the checkpoint ``scope.checkpoint_id``, in one
        ``store.write``: regular ones insert-or-ignore, special ones replace.

        A write as large as a stored value is stored sharing the checkpoint's
        values where it holds one (:meth:`.Values.write_form`), as the child
        checkpoint's value when that one was built first with the same bytes
        (:meth:`.Values.fresh`; ``take=False`` does not), else, a regular one,
        as one new chunk that the child's value takes
        (:meth:`.Values.write_whole`); ``share=False`` keeps every write's
        bytes inline.
        """
        thread_id, namespace = scope.thread_id, scope.namespace
        checkpoint_id = scope.checkpoint_id
        assert checkpoint_id is not None  # the adapter checked it
        refusals = self.refusals
        if refusals.deleted and (
            yield steps.Blocking(lambda: refusals.orphaned(thread_id, namespace, scope.built_on))
        ):
            yield self._refusing(serde, scope, checkpoint_id, refused=False)
            raise _deleted(thread_id, checkpoint_id)
        dumps_typed = serde.dumps_typed
        cache = self.values
        compress = cache.compress
        regular: _List[tuple[str, str, Any]] = []
        special: _List[tuple[str, str, Any]] = []
        found: set[type] = set()
        made: _List[tuple[str, Any]] = []  # (form id, version) of the writes stored as chunks
        chunk_rows: _List[Row] = []
        lenders: set[tuple[str, str]] = set()
        required: _List[Holds] = []
        on = (namespace, keys.checkpoint_key(checkpoint_id))
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            type_, raw = dumps_typed(value)
            found |= allowlist.classes_in(value, type_, raw)
            large = share and type(raw) is bytes and len(raw) >= SHARE_AT
            fresh = cache.fresh(on, channel, raw) if large and take and idx >= 0 else None
            shared = (
                cache.write_form(
                    thread_id, scope.checkpoint_ns, scope.built_on, channel, type_, raw
                )
                if large and fresh is None
                else None
            )
            if fresh is not None:
                # The child checkpoint's put was built first with these bytes: the
                # same form, requiring its record as offered (and its lender).
                stored = dumps(
                    [task_id, idx, task_path, channel, type_, cache.fresh_form(type_, fresh)]
                )
                required.append(fresh.needs)
                if fresh.lender is not None:
                    lenders.add(fresh.lender)
            elif shared is not None:
                # As large as a stored value, and mostly one: its bytes are
                # ranges of a checkpoint's chunks (that checkpoint is its lender).
                form, new_chunks, version, lender = shared
                stored = dumps([task_id, idx, task_path, channel, type_, form])
                chunk_rows.extend(new_chunks)
                made.append((form[2], version))
                lenders.add(lender)
            elif large and idx >= 0:
                # A task's output that repeats no stored value: one chunk, which the
                # child checkpoint's value takes when the node replaced it whole.
                form, chunks, version = cache.write_whole(type_, raw)
                stored = dumps([task_id, idx, task_path, channel, type_, form])
                # Offered before its chunk row is made (compressing lets other
                # threads run), requiring its row as written (one already under
                # its key is kept, and names other chunks).
                row = Holds(namespace, keys.write_key(checkpoint_id, task_id, idx), stored)
                cache.offer(on, channel, Fresh(form[2], version, row, None))
                chunk_rows.extend(cache.chunk_rows(thread_id, chunks))
                made.append((form[2], version))
            else:
                packed = pack(raw) if compress and type(raw) is bytes else None
                # Encoded here, as the store would: a raw write takes its quick path.
                stored = (
                    dumps([task_id, idx, task_path, channel, type_, raw])
                    if packed is None
                    else dumps([task_id, idx, task_path, channel, type_, packed, len(raw)])
                )
            stored_entry = (namespace, keys.write_key(checkpoint_id, task_id, idx), stored)
            (special if idx < 0 else regular).append(stored_entry)
        if special and regular:
            # A mixed call stays one batch: drop the regular writes that exist.
            existing = yield steps.GetMany([(ns, key) for ns, key, _ in regular])
            special.extend(e for e, old in zip(regular, existing, strict=True) if old is None)
        allowlist.learn(found)
        batch = special or regular
        # After a delete_thread, writes for a checkpoint that is gone are refused.
        try:
            yield from self._write(
                scope, batch + chunk_rows if chunk_rows else batch,
                if_absent=not special, lenders=lenders, required=required,
            )  # fmt: skip
        except TakenGone:
            # The child checkpoint whose bytes they took had not landed as offered
            # (or is gone): written again, each with its own bytes.
            yield from self.put_writes(serde, scope, writes, task_id, task_path, take=False)
            return
        except LenderGone:
            # A checkpoint they borrow from is not stored (deleted meanwhile, or
            # not written yet): the writes go with their bytes inline.
            yield from self.put_writes(serde, scope, writes, task_id, task_path, share=False)
            return
        except ThreadDeletedError:
            yield self._refusing(serde, scope, checkpoint_id, refused=True)
            raise
        for fid, version in made:
            cache.versions.put(fid, version)
        if refusals.deleted and (
            yield steps.Blocking(lambda: refusals.orphaned(thread_id, namespace, scope.built_on))
        ):
            # Refused while they were written: they go with their checkpoint.
            yield self._refusing(serde, scope, checkpoint_id, refused=False)
            raise _deleted(thread_id, checkpoint_id)

    # -- the one store write, under the guard's conditions ------------------

    def _write(
        self,
        scope: Scope,
        rows: Sequence[Row],
        *,
        if_absent: bool = False,
        lenders: Iterable[tuple[str, str]] = (),
        required: Sequence[Holds] = (),
        made: str | None = None,
    ) -> steps.Plan[None]:
        """One ``store.write`` of ``rows`` (raw, a 4th element gives a row's tags) with
        the conditions the thread's guard asks for (:mod:`.guard`).

        ``lenders`` are entries ``(namespace, key)`` whose chunks the written
        forms reference: they must exist when the write lands, as must the
        rows ``required`` (a pending write's, holding what was written).
        ``made``: the id of the checkpoint a put writes.

        Raises:
            TakenGone: A row ``required`` does not hold what was offered (not
                landed yet, refused, rewritten or deleted).
            LenderGone: A lender was deleted meanwhile (and the thread was not).
            ThreadDeletedError: The thread was deleted, and the checkpoint a
                put writes was made before that, or a checkpoint the write
                builds on was made before that and is gone.
            FencedError: The thread's claim refuses this write.
        """
        thread_id = scope.thread_id
        unguarded = self._unguarded.get(thread_id)
        if unguarded is None:
            if len(self._unguarded) > _NAMES_MAX:
                self._unguarded.clear()
            unguarded = Absent(guard.GUARDS, keys.field(thread_id))
            self._unguarded[thread_id] = unguarded
        lent: _List[Present | Holds] = [Present(ns, k) for ns, k in lenders]
        lent.extend(required)
        if thread_id not in self.guards.guarded:
            try:
                yield steps.Write(
                    Transaction(
                        conditions=[unguarded, *lent] if lent else [unguarded],
                        sets=rows,
                        raw=True,
                        if_absent=if_absent,
                    )
                )
                return
            except ConflictError:
                pass  # the thread has a guard (or just got one), or a lender is gone
        yield from self._write_guarded(scope, rows, if_absent, lent, len(required), made)

    def _write_guarded(
        self,
        scope: Scope,
        rows: Sequence[Row],
        if_absent: bool,
        lent: _List[Present | Holds],
        taken: int,
        made: str | None,
    ) -> steps.Plan[None]:
        """:meth:`_write` once a condition failed: read the guard, decide, write.

        The last ``taken`` of ``lent`` are rows whose chunks the write takes
        (:class:`.values.Fresh`): one of them failing is :exc:`.values.TakenGone`.
        """
        thread_id = scope.thread_id
        guards = self.guards
        for _ in range(_ATTEMPTS):
            stored, found = guard.parsed(thread_id, (yield guard.read(thread_id)))
            guards.seen(thread_id, stored)
            require, tombstone = guards.require(
                thread_id, stored, found, scope.fence, scope.built_on, made
            )
            conditions: _List[Condition] = [require, *tombstone, *lent]
            try:
                yield steps.Write(
                    Transaction(conditions=conditions, sets=rows, raw=True, if_absent=if_absent)
                )
                return
            except ConflictError:
                pass
            again, _ = guard.parsed(thread_id, (yield guard.read(thread_id)))
            if again != stored:
                continue  # a claim or a deletion landed: decide again
            if tombstone and None in (yield guard.presence(tombstone)):
                raise ThreadDeletedError(
                    f"thread {thread_id!r} was deleted and the checkpoint this write "
                    "builds on is gone: the run that wrote it cannot go on; start a new "
                    "run (without a checkpoint_id) to reuse the thread id"
                )
            if lent:
                found = yield guard.presence(lent)
                mine = len(lent) - taken
                if not _hold(lent[mine:], found[mine:]):
                    raise TakenGone
                if not _hold(lent, found):
                    raise LenderGone
        raise ConflictError(
            f"thread {thread_id!r}: its guard kept changing during {_ATTEMPTS} attempts to write"
        )

    # -- refusals (rare: a thread deleted under a running graph) ----------------

    def _refusing(
        self, serde: Any, scope: Scope, checkpoint_id: str, *, refused: bool
    ) -> steps.Blocking:
        """The step that runs :meth:`_refuse` (a rare path, left blocking)."""
        return steps.Blocking(
            lambda: self._refuse(
                serde, scope.thread_id, scope.checkpoint_ns, checkpoint_id, refused=refused
            )
        )

    def _refuse(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        *,
        refused: bool,
    ) -> None:
        """Take out a checkpoint of a run its thread's deletion ended, and remember it.

        ``refused``: the tombstone refused it (else :class:`.guard.Refusals`
        found it belongs to such a run). Its pending writes may have landed
        first (the runtime saves in the background), and so may the
        checkpoints of a subgraph that ran under it (:func:`.threads.refuse`):
        they, and any writes that come later, belong to a run that cannot go
        on. Only a refusal pays for this.
        """
        refusals = self.refusals
        deleted = self.guards.deleted_at(thread_id) if refused else None
        namespace = keys.scope(thread_id, checkpoint_ns)
        if refusals.refused(thread_id, deleted, [(namespace, checkpoint_id)]):
            # A run started since the deletion and already stored (no top-level
            # checkpoint of a refused run is): its subgraphs' are not the refused run's.
            first = threads.first_checkpoint(self.store, thread_id, "")
            if first is not None:
                refusals.started(thread_id, first)
        taken = threads.refuse(
            self.store,
            serde,
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            refusals.fresh(thread_id),
        )
        refusals.refused(thread_id, None, taken)

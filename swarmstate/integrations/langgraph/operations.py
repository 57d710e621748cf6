"""The thread operations of SwarmStateSaver: delete, copy, prune, retain, verify.

A mixin of the saver (the store, its values and the serializer come from
the saver); the work itself is in :mod:`.threads`, :mod:`.retention`
and :mod:`.history`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory

from swarmstate._base import BaseStore
from swarmstate._errors import CorruptDataError, InvalidArgumentError
from swarmstate.integrations.langgraph import catalog, history, reads, threads
from swarmstate.integrations.langgraph.aio import AsyncMethods
from swarmstate.integrations.langgraph.allowlist import Allowlist
from swarmstate.integrations.langgraph.config import scope_of, thread_id_of
from swarmstate.integrations.langgraph.format import keys
from swarmstate.integrations.langgraph.guard import Guards, made_at, seconds_of
from swarmstate.integrations.langgraph.pause import collector_held
from swarmstate.integrations.langgraph.retention import (
    Retainer,
    RetentionReport,
    check_keep_last,
    cutoff_of,
)
from swarmstate.integrations.langgraph.values import Values

__all__ = ["ThreadActivity", "ThreadMethods"]

_List = list  # the class defines a method named ``list``


class ThreadActivity(NamedTuple):
    """A thread and its newest checkpoint, as :meth:`ThreadMethods.recent_threads` lists them."""

    thread_id: str
    checkpoint_id: str
    """Its newest checkpoint, over its namespaces ("" if it has none)."""
    last_activity: datetime.datetime | None
    """When that checkpoint was made (UTC), if known."""


class ThreadMethods(AsyncMethods):
    """Operations on whole threads, over the saver's store."""

    store: BaseStore
    _values: Values
    _retainer: Retainer
    _guards: Guards
    _allowlist: Allowlist

    def _reader(self) -> Any:
        raise NotImplementedError  # the saver implements it

    def claim(self, thread_id: str, *, ttl: datetime.timedelta | float = 300.0) -> int:
        """Claim a thread for one worker: a fencing token for its runs' writes.

        Every claim of a thread gets a larger token, across processes and
        machines. Run the graph with ``{"configurable": {"thread_id": t,
        "fence": token}}``: while the claim is live, writes without the
        token, or with an older one, raise :class:`~swarmstate.FencedError`
        and write nothing; once a newer claim exists, the older token is
        refused for good. A claim ends with :meth:`release` or after
        ``ttl`` (seconds or a ``timedelta``; default 5 minutes); its holder
        extends it with :meth:`renew`, keeping the same token (claiming again
        would issue a new token and fence off the holder's own running
        graph). A thread never claimed costs one lookup per write.
        """
        thread_id = thread_id_of({"thread_id": thread_id})
        return self._guards.claim(thread_id, seconds_of(ttl))

    def renew(self, thread_id: str, token: int, *, ttl: datetime.timedelta | float = 300.0) -> None:
        """Extend the live claim ``token`` of a thread to ``ttl`` from now, same token.

        For a worker whose run outlasts its claim: its graph keeps writing
        with the token it was started with. Raises
        :class:`~swarmstate.FencedError` when ``token`` is not the thread's
        newest claim (another worker took it over) or was released.
        """
        thread_id = thread_id_of({"thread_id": thread_id})
        if type(token) is not int:
            raise InvalidArgumentError(f"token must be the int claim() returned, got {token!r}")
        self._guards.renew(thread_id, token, seconds_of(ttl))

    async def arenew(
        self, thread_id: str, token: int, *, ttl: datetime.timedelta | float = 300.0
    ) -> None:
        """Async :meth:`renew`."""
        await self._run(lambda: self.renew(thread_id, token, ttl=ttl))

    def release(self, thread_id: str, token: int) -> bool:
        """End the claim ``token`` of a thread; False if a newer claim replaced it."""
        thread_id = thread_id_of({"thread_id": thread_id})
        if type(token) is not int:
            raise InvalidArgumentError(f"token must be the int claim() returned, got {token!r}")
        return self._guards.release(thread_id, token)

    async def aclaim(self, thread_id: str, *, ttl: datetime.timedelta | float = 300.0) -> int:
        """Async :meth:`claim`."""
        return await self._run(lambda: self.claim(thread_id, ttl=ttl))

    async def arelease(self, thread_id: str, token: int) -> bool:
        """Async :meth:`release`."""
        return await self._run(self.release, thread_id, token)

    def _scopes(self, prefix: str) -> _List[tuple[str, str]]:
        """(thread, checkpoint_ns) pairs holding data under a namespace prefix."""
        found = []
        for namespace in self.store.namespaces(prefix):
            parsed = keys.parse_scope(namespace)
            if parsed is not None:
                found.append(parsed)
        return found

    def list_threads(self) -> _List[str]:
        """The ids of every thread with checkpoints in the store, sorted."""
        return catalog.threads(self.store)

    def thread_count(self) -> int:
        """How many threads have checkpoints in the store (a walk of the thread namespaces)."""
        return catalog.thread_count(self.store)

    def recent_threads(self, *, limit: int | None = 20, offset: int = 0) -> _List[ThreadActivity]:
        """The threads written most recently first, a page of them.

        Each with its newest checkpoint (over its namespaces) and when that was
        made. Costs the checkpoints newer than the page's last thread, not the
        number of threads: the order tags (:mod:`.catalog`) are read newest
        first. ``offset`` threads are skipped.
        """
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidArgumentError(f"limit must be None or an int >= 0, got {limit!r}")
        if type(offset) is not int or offset < 0:
            raise InvalidArgumentError(f"offset must be an int >= 0, got {offset!r}")
        if catalog.converted(self.store):
            page = catalog.threads_by_activity(self.store, offset=offset, limit=limit)
        else:
            every = [
                (t, catalog.newest_checkpoint(self.store, t) or "") for t in self.list_threads()
            ]
            every.sort(key=lambda item: (item[1], item[0]), reverse=True)
            page = every[offset : None if limit is None else offset + limit]
        return [ThreadActivity(t, c, self._made(t, c)) for t, c in page]

    def _made(self, thread_id: str, checkpoint_id: str) -> datetime.datetime | None:
        """When a checkpoint was made: from its id (LangGraph's carry it), else its ``ts``."""
        made = made_at(checkpoint_id)
        if made is not None:
            return datetime.datetime.fromtimestamp(made, datetime.UTC)
        for found in self.list({"configurable": {"thread_id": thread_id}}, limit=1):
            ts = found.checkpoint.get("ts")
            if isinstance(ts, str):
                try:
                    moment = datetime.datetime.fromisoformat(ts)
                except ValueError:
                    return None
                return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
        return None

    def thread_checkpoints(self, thread_id: str) -> dict[str, int]:
        """How many checkpoints the thread holds, per checkpoint namespace (``""``: the root).

        Counted from the store's keys: no checkpoint is read or decoded, so
        it costs the thread's number of entries, not the size of its values.
        """
        return threads.checkpoint_counts(self.store, thread_id_of({"thread_id": thread_id}))

    def thread_size(self, thread_id: str) -> int:
        """Bytes the thread takes in the store: checkpoints, writes and the chunks of values.

        What deleting the thread would free (before the store's own overhead).
        """
        return threads.thread_size(self.store, thread_id_of({"thread_id": thread_id}))

    def verify(self, thread_ids: Sequence[str] | None = None) -> _List[dict[str, str]]:
        """Read back every checkpoint (values and pending writes included); list what fails.

        Returns one ``{"thread_id", "checkpoint_ns", "checkpoint_id", "error",
        "kind"}`` per checkpoint that cannot be read, empty when every one
        reads: ``kind`` is ``"damaged"`` (the :class:`~swarmstate.CorruptDataError`
        message is the error) or ``"serializer"``, when it was written by a
        serializer of another format than this saver's (an encrypting one, say)
        and may well be whole. ``thread_ids`` limits the check.
        """
        problems: _List[dict[str, str]] = []
        fresh = Values(self.store, 0)  # what is stored, not what this saver has cached
        thread_list = self.list_threads() if thread_ids is None else [*thread_ids]
        for thread_id in thread_list:
            for checkpoint_ns in sorted(n for t, n in self._scopes(keys.thread_prefix(thread_id))):
                namespace = keys.scope(thread_id, checkpoint_ns)
                for checkpoint_id, entry, writes in reads.groups(
                    self.store.items, namespace, None, 64
                ):
                    try:
                        row = reads.decode(
                            self._reader(),
                            fresh,
                            thread_id,
                            checkpoint_ns,
                            checkpoint_id,
                            entry,
                            writes,
                        )
                        if row is not None:
                            reads.complete(self._reader(), fresh, [row])
                    except CorruptDataError as exc:
                        foreign = reads.foreign_types(entry, writes)
                        problems.append(
                            {
                                "thread_id": thread_id,
                                "checkpoint_ns": checkpoint_ns,
                                "checkpoint_id": checkpoint_id,
                                "error": str(exc)
                                if not foreign
                                else (
                                    "written by a serializer of another format "
                                    f"({', '.join(sorted(foreign))}): read it with a saver "
                                    "given that serializer (serde=...); the data may be whole"
                                ),
                                "kind": "serializer" if foreign else "damaged",
                            }
                        )
        return problems

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint, value and write of one thread; other threads are untouched."""
        threads.delete_thread(self.store, self._values, thread_id_of({"thread_id": thread_id}))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of one thread to another thread id.

        The whole parent chain is copied, so delta channels stay rebuildable,
        and the copy shares nothing with the source: deleting one leaves the
        other whole. Entries already in the target under the same keys are
        replaced. As in the Agent Server's own copy, a checkpoint whose
        ``metadata["thread_id"]`` is the source's id gets the target's, and
        :meth:`delete_for_runs` of the source's runs leaves the copy alone.
        One store transaction: a graph writing to the source meanwhile is in
        the copy wholly or not at all, and a copy that fails writes nothing.
        """
        source = thread_id_of({"thread_id": source_thread_id})
        target = thread_id_of({"thread_id": target_thread_id})
        threads.copy_thread(self.store, self.serde, source, target)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints written by the given runs, with their pending writes.

        Each checkpoint carries its run's tag (from ``metadata["run_id"]``),
        so a run's checkpoints are one ordered range of the store: the cost
        follows them, not the size of the store. A copy made by
        :meth:`copy_thread` was written by no run: it keeps the checkpoints
        it copied, as the Agent Server's built-in checkpointer does. Chunks
        that no remaining checkpoint references go with them.
        """
        if isinstance(run_ids, (str, bytes)):
            raise InvalidArgumentError(
                f"run_ids must be a sequence of ids, not one {type(run_ids).__name__}: "
                f"pass delete_for_runs([{run_ids!r}])"
            )
        for run_id in run_ids:
            if type(run_id) is not str:
                raise InvalidArgumentError(f"run ids must be str, got {type(run_id).__name__}")
        threads.delete_for_runs(self.store, self._values, self.serde, set(run_ids))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """Drop old checkpoints of the given threads, and the values only they referenced.

        Args:
            thread_ids: Threads to prune; unknown ids are ignored.
            strategy: ``"keep_latest"`` keeps the newest checkpoint of each
                namespace with its pending writes; ``"delete"`` (or
                ``"delete_all"``, the name the Agent Server passes) removes
                the threads entirely.
            keep_last: swarmstate extension: keep the newest ``keep_last``
                checkpoints of each namespace instead of one.

        The ancestors a LangGraph ``DeltaChannel`` rebuilds its value from are
        kept too (see :meth:`retain`).
        """
        if isinstance(thread_ids, (str, bytes)):
            # A str is a sequence of one-character ids: prune("t10") would
            # prune threads "t", "1" and "0".
            raise InvalidArgumentError(
                f"thread_ids must be a sequence of ids, not one {type(thread_ids).__name__}: "
                f"pass prune([{thread_ids!r}])"
            )
        if strategy not in ("keep_latest", "delete", "delete_all"):
            raise InvalidArgumentError(
                f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        if strategy == "delete_all":
            strategy = "delete"
        if keep_last is not None:
            if type(keep_last) is not int or keep_last < 1:
                raise InvalidArgumentError(f"keep_last must be a positive int, got {keep_last!r}")
            if strategy != "keep_latest":
                raise InvalidArgumentError("keep_last applies to strategy='keep_latest' only")
        thread_list = [thread_id_of({"thread_id": raw}) for raw in thread_ids]
        for thread_id in thread_list:
            if strategy == "delete":
                threads.delete_thread(self.store, self._values, thread_id)
            else:
                self._retainer.thread(self.serde, thread_id, keep_last or 1, None, dry_run=False)

    def retain(
        self,
        *,
        keep_last: int | None = None,
        older_than: datetime.timedelta | float | None = None,
        thread_ids: Sequence[str] | None = None,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
        progress: Callable[[int, int], object] | None = None,
    ) -> RetentionReport:
        """Delete old checkpoints and idle threads, and what only they referenced.

        Args:
            keep_last: Per thread namespace (subgraphs' included), keep the
                newest ``keep_last`` checkpoints and delete the older ones.
            older_than: Delete whole threads whose newest checkpoint (their
                last activity) is older than this: a ``timedelta`` or seconds.
            thread_ids: Only these threads (default every thread).
            dry_run: Change nothing; report what a real run would delete.
            now: The time ``older_than`` counts back from (default now, UTC).
            progress: Called after each thread with ``(threads done, threads
                in all)``, on the calling thread (for a progress line).

        Never breaks resume: the newest checkpoints are kept with their
        pending writes (an interrupted run resumes and runs no finished task
        again), and so are the ancestors a ``DeltaChannel`` rebuilds its value
        from. Works in batches of at most 256 entries per write transaction,
        so graphs writing meanwhile (in this process or another) wait at most
        one batch. See docs/retention.md.
        """
        check_keep_last(keep_last)
        cutoff = cutoff_of(older_than, now)
        if type(dry_run) is not bool:
            raise InvalidArgumentError(f"dry_run must be a bool, got {dry_run!r}")
        if thread_ids is not None:
            if isinstance(thread_ids, str):
                raise InvalidArgumentError("thread_ids must be a sequence of ids, not one str")
            thread_ids = [thread_id_of({"thread_id": raw}) for raw in thread_ids]
        if progress is not None and not callable(progress):
            raise InvalidArgumentError(f"progress must be callable, got {progress!r}")
        return self._retainer.run(
            self.serde,
            keep_last=keep_last,
            cutoff=cutoff,
            thread_ids=thread_ids,
            dry_run=dry_run,
            progress=progress,
        )

    async def aretain(
        self,
        *,
        keep_last: int | None = None,
        older_than: datetime.timedelta | float | None = None,
        thread_ids: Sequence[str] | None = None,
        dry_run: bool = False,
        now: datetime.datetime | None = None,
        progress: Callable[[int, int], object] | None = None,
    ) -> RetentionReport:
        """Async :meth:`retain` (``progress`` is then called on a worker thread)."""
        return await self._run(
            lambda: self.retain(
                keep_last=keep_last,
                older_than=older_than,
                thread_ids=thread_ids,
                dry_run=dry_run,
                now=now,
                progress=progress,
            )
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel: the writes since its nearest stored value up the parent chain, and it.

        A direct read of the chain: a page of the thread's checkpoints and
        writes at a time, and the candidate values of each page in one
        batch, instead of one ``get_tuple`` per ancestor. The cyclic
        collector is held off while it runs (:mod:`.pause`): it returns
        many new objects and no garbage.
        """
        conf, thread_id, checkpoint_ns = scope_of(config)
        with collector_held():
            return self._allowlist.read(
                self.serde,
                lambda reader: history.delta_history(
                    self.store,
                    self._values,
                    reader,
                    thread_id,
                    checkpoint_ns,
                    conf.get("checkpoint_id") or None,
                    [*channels],
                ),
            )

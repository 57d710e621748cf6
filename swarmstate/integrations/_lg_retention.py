"""Retention: keep the newest checkpoints, expire idle threads, and give the space back.

A run is planned per thread namespace from one read of its entries, then
carried out in batches of at most :data:`BATCH` entries, each its own short
write transaction, so graphs writing meanwhile wait at most one batch.

What is never deleted, so that nothing a graph needs to go on is lost:

* the newest ``keep_last`` checkpoints of every namespace (subgraphs'
  included), with their pending writes: resuming an interrupted run starts
  from the newest checkpoint and reuses the writes of the tasks that finished
  before the interrupt, so nothing completed runs again;
* every ancestor a ``DeltaChannel`` of a kept checkpoint rebuilds its value
  from: LangGraph names such channels in the metadata
  (``counters_since_delta_snapshot``), and the chain is kept up to the
  ancestor that stores the channel's value;
* the values and list segments any kept checkpoint references.

A dry run plans the same way and deletes nothing, so its report is what the
real run that follows deletes (unless graphs wrote in between).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._errors import InvalidArgumentError
from swarmstate.integrations import _lg_entry as E
from swarmstate.integrations import _lg_keys as K
from swarmstate.integrations import _lg_rows as R
from swarmstate.integrations import _lg_threads as T
from swarmstate.integrations._lg_values import APART, LIST, Values

__all__ = ["BATCH", "Retainer", "Retention", "RetentionReport", "cutoff_of"]

BATCH = 256
"""Entries deleted per write transaction."""
logger = logging.getLogger("swarmstate")


@dataclasses.dataclass(frozen=True)
class Retention:
    """A retention policy the saver applies by itself as graphs write.

    Args:
        keep_last: Keep this many newest checkpoints per thread namespace.
        older_than: Delete threads whose newest checkpoint is older than
            this (a ``timedelta`` or seconds).
        every: Apply it once per this many ``put`` calls (amortized): to the
            threads written since the last time for ``keep_last``, and to the
            next ``sweep`` threads of the store, in id order, for ``older_than``.
        sweep: Threads examined for ``older_than`` each time.
    """

    keep_last: int | None = None
    older_than: datetime.timedelta | float | None = None
    every: int = 256
    sweep: int = 64

    def __post_init__(self) -> None:
        check_keep_last(self.keep_last)
        cutoff_of(self.older_than, None)  # raises on a bad value
        for name in ("every", "sweep"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
        if self.keep_last is None and self.older_than is None:
            raise InvalidArgumentError("a Retention needs keep_last, older_than or both")


@dataclasses.dataclass
class RetentionReport:
    """What a retention run deleted (or, for a dry run, would delete).

    ``bytes_freed`` counts what the deleted entries occupy in the store: in a
    DiskStore their table and index cells and overflow pages, by SQLite's
    file format, so :meth:`~swarmstate.backends.disk.DiskStore.reclaim` gives
    back about that much (the ``retention`` benchmark section measures how
    close); elsewhere their namespace, key and value bytes.
    """

    threads_examined: int = 0
    threads_deleted: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    bytes_freed: int = 0
    dry_run: bool = False

    def add(self, other: RetentionReport) -> None:
        """Count ``other``'s deletions in this report too."""
        self.threads_examined += other.threads_examined
        self.threads_deleted += other.threads_deleted
        self.checkpoints_deleted += other.checkpoints_deleted
        self.writes_deleted += other.writes_deleted
        self.bytes_freed += other.bytes_freed


def check_keep_last(keep_last: Any) -> None:
    if keep_last is not None and (type(keep_last) is not int or keep_last < 1):
        raise InvalidArgumentError(f"keep_last must be a positive int or None, got {keep_last!r}")


def cutoff_of(
    older_than: datetime.timedelta | float | None, now: datetime.datetime | None
) -> datetime.datetime | None:
    """The moment before which a thread's last checkpoint makes it idle, or None."""
    if older_than is None:
        return None
    if isinstance(older_than, datetime.timedelta):
        span = older_than
    elif type(older_than) in (int, float) and older_than >= 0:
        span = datetime.timedelta(seconds=older_than)
    else:
        raise InvalidArgumentError(
            f"older_than must be a datetime.timedelta or seconds >= 0, got {older_than!r}"
        )
    if span < datetime.timedelta(0):
        raise InvalidArgumentError(f"older_than must not be negative, got {older_than!r}")
    if now is None:
        now = datetime.datetime.now(datetime.UTC)
    elif now.tzinfo is None:
        raise InvalidArgumentError("now must be an aware datetime (with a tzinfo)")
    return now - span


@dataclasses.dataclass
class _Row:
    """One checkpoint of a namespace as a plan needs it."""

    key: str
    parent_id: str | None
    metadata: dict[str, Any]
    versions: dict[str, Any]
    inline: dict[str, list[Any]] | None
    ts: str
    size: int
    writes: list[tuple[str, int]]  # (key, stored bytes)


class Retainer:
    """Plans and runs retention over one store for a saver."""

    def __init__(self, store: BaseStore, values: Values) -> None:
        self.store = store
        self.values = values
        self._lock = threading.Lock()
        self._written: set[str] = set()
        self._puts = 0
        self._cursor = ""

    # -- one run ---------------------------------------------------------------

    def run(
        self,
        serde: Any,
        *,
        keep_last: int | None,
        cutoff: datetime.datetime | None,
        thread_ids: Iterable[str] | None,
        dry_run: bool,
        progress: Callable[[int, int], object] | None = None,
    ) -> RetentionReport:
        report = RetentionReport(dry_run=dry_run)
        threads = T.list_threads(self.store) if thread_ids is None else sorted(set(thread_ids))
        for done, thread_id in enumerate(threads, 1):
            report.add(self.thread(serde, thread_id, keep_last, cutoff, dry_run))
            if progress is not None:
                progress(done, len(threads))
        return report

    def thread(
        self,
        serde: Any,
        thread_id: str,
        keep_last: int | None,
        cutoff: datetime.datetime | None,
        dry_run: bool,
    ) -> RetentionReport:
        """Retention for one thread: expire it whole when idle, else keep its newest."""
        report = RetentionReport(dry_run=dry_run)
        scopes = [
            scope
            for ns in self.store.namespaces(K.thread_prefix(thread_id))
            if (scope := K.parse_scope(ns)) is not None
        ]
        if not scopes:
            return report
        report.threads_examined = 1
        if cutoff is not None and self._idle(serde, scopes, cutoff):
            report.threads_deleted = 1
            for scope in scopes:
                rows = self._rows(serde, *scope)
                report.checkpoints_deleted += len(rows)
                report.writes_deleted += sum(len(row.writes) for row in rows)
            report.bytes_freed = _entry_bytes(self.store, K.thread_prefix(thread_id))
            if not dry_run:
                self._expire(serde, thread_id, scopes, cutoff)
            return report
        if keep_last is None:
            return report
        for scope in scopes:
            report.add(self._keep(serde, scope, keep_last, dry_run))
        return report

    def _idle(self, serde: Any, scopes: list[tuple[str, str]], cutoff: datetime.datetime) -> bool:
        """Whether the newest checkpoint of every namespace is older than ``cutoff``."""
        for scope in scopes:
            for _, entry, _ in R.groups(self.store.items, K.scope(*scope), None, 4):
                ts = E.decode(serde, entry).checkpoint.get("ts")
                if not isinstance(ts, str) or _moment(ts) >= cutoff:
                    return False
                break  # the newest checkpoint is the one that counts
        return True

    def _expire(
        self, serde: Any, thread_id: str, scopes: list[tuple[str, str]], cutoff: datetime.datetime
    ) -> None:
        # Batches first, so that the last, atomic delete is small; then look
        # again: a thread that came back to life meanwhile is not deleted.
        for scope in scopes:
            self._keep(serde, scope, 1, dry_run=False)
        if self._idle(serde, scopes, cutoff):
            T.delete_thread(self.store, self.values, thread_id)

    def _keep(
        self, serde: Any, scope: tuple[str, str], keep: int, dry_run: bool
    ) -> RetentionReport:
        """Keep the newest ``keep`` checkpoints of one namespace (and what they need)."""
        thread_id, checkpoint_ns = scope
        report = RetentionReport(dry_run=dry_run)
        values_ns, segments_ns = K.values(*scope), K.segments(*scope)
        # Values and segments are listed before the checkpoints are read: one a
        # concurrent put writes is either not listed or referenced by a row read.
        stored = {
            (ns, key): len(value)
            for ns in (values_ns, segments_ns)
            for key, value in self.values.scan(ns)
        }
        rows = self._rows(serde, thread_id, checkpoint_ns)
        kept = _needed(rows, keep)
        doomed = [row for row in rows if row.key not in kept]
        if not doomed:
            return report
        used: set[tuple[str, str]] = set()
        for row in rows:
            if row.key in kept and row.inline is not None:
                used.update(_references(row, values_ns, segments_ns))
        unused = [pair for pair in stored if pair not in used]
        namespace = K.scope(thread_id, checkpoint_ns)
        report.checkpoints_deleted = len(doomed)
        report.writes_deleted = sum(len(row.writes) for row in doomed)
        size = self.store._footprint
        report.bytes_freed = sum(
            size(namespace, row.key, row.size)
            + sum(size(namespace, key, n) for key, n in row.writes)
            for row in doomed
        ) + sum(size(*pair, stored[pair]) for pair in unused)
        if dry_run:
            return report
        # Oldest first, checkpoints before what they referenced: a reader never
        # meets a live checkpoint whose values are gone.
        pairs = [
            (namespace, key)
            for row in reversed(doomed)
            for key in (row.key, *(key for key, _ in row.writes))
        ]
        _delete(self.store, pairs)
        _delete(self.store, unused)
        self.values.forget(thread_id)
        return report

    def _rows(self, serde: Any, thread_id: str, checkpoint_ns: str) -> list[_Row]:
        """Every checkpoint of a namespace, newest first, with its writes' keys and sizes."""
        rows: list[_Row] = []
        writes: list[tuple[str, int]] = []
        for key, entry in reversed(list(self.values.scan(K.scope(thread_id, checkpoint_ns)))):
            if key[-1] != K.CHECKPOINT:
                writes.append((key, len(entry)))
                continue
            head = key[:-1]
            mine = [w for w in writes if w[0].startswith(head)]
            writes = []
            decoded = E.decode(serde, entry)
            rows.append(
                _Row(
                    key,
                    decoded.parent_id,
                    decoded.metadata,
                    decoded.checkpoint["channel_versions"],
                    decoded.inline,
                    str(decoded.checkpoint.get("ts", "")),
                    len(entry),
                    mine,
                )
            )
        return rows

    # -- the policy a saver applies as it writes --------------------------------

    def wrote(self, serde: Any, policy: Retention, thread_id: str) -> None:
        """Count a put; every ``policy.every`` puts, apply the policy (errors are logged)."""
        with self._lock:
            self._written.add(thread_id)
            self._puts += 1
            if self._puts < policy.every:
                return
            written, self._written, self._puts = self._written, set(), 0
            sweep = self._next_threads(policy.sweep) if policy.older_than is not None else []
        try:
            cutoff = cutoff_of(policy.older_than, None)
            for thread in sorted(set(sweep) | written):
                self.thread(serde, thread, policy.keep_last, cutoff, dry_run=False)
        except Exception:  # the put itself succeeded; retention tries again next time
            logger.exception("swarmstate retention failed; it will be tried again")

    def _next_threads(self, count: int) -> list[str]:
        """The next ``count`` thread ids after the sweep's cursor, wrapping around."""
        threads = T.list_threads(self.store)
        after = [t for t in threads if t > self._cursor][:count]
        if len(after) < count:
            after += threads[: count - len(after)]
            self._cursor = after[-1] if after else ""
        else:
            self._cursor = after[-1]
        return after


def _needed(rows: list[_Row], keep: int) -> set[str]:
    """Keys of the checkpoints to keep: the newest ``keep`` and their delta ancestors."""
    kept = {row.key for row in rows[:keep]}
    by_id = {K.parse_entry_key(row.key)[0]: row for row in rows}
    for row in rows[:keep]:
        delta = row.metadata.get("counters_since_delta_snapshot")
        if not isinstance(delta, dict):
            continue
        for channel in delta:
            current: _Row | None = row
            seen: set[str] = set()
            while current is not None and current.key not in seen:
                seen.add(current.key)
                kept.add(current.key)
                if _stores(current, channel):
                    break
                current = by_id.get(current.parent_id) if current.parent_id else None
    return kept


def _stores(row: _Row, channel: str) -> bool:
    """Whether a checkpoint holds a stored value of ``channel`` at its version."""
    if row.inline is None:
        return True  # an entry of the earlier layout holds every value itself
    return channel in row.inline


def _references(row: _Row, values_ns: str, segments_ns: str) -> Iterable[tuple[str, str]]:
    assert row.inline is not None
    for channel, version in row.versions.items():
        form = row.inline.get(channel)
        if form is None:
            continue
        if form[0] == APART:
            key = K.value_key(channel, version)
            if key is not None:
                yield values_ns, key
        elif form[0] == LIST:
            for ref in form[1]:
                yield segments_ns, ref[0]


def _moment(ts: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(ts)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _entry_bytes(store: BaseStore, prefix: str) -> int:
    total = 0
    for namespace in store.namespaces(prefix):
        start: str | None = None
        while True:
            page = store.items(namespace, start=start, limit=BATCH, raw=True)
            total += sum(store._footprint(namespace, key, len(value)) for key, value in page)
            if len(page) < BATCH:
                break
            start = page[-1][0] + "\x00"
    return total


def _delete(store: BaseStore, pairs: Sequence[tuple[str, str]]) -> None:
    for start in range(0, len(pairs), BATCH):
        store.delete_many(pairs[start : start + BATCH])

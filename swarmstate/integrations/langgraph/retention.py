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
* the chunks any kept checkpoint references.

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
from swarmstate.integrations.langgraph import catalog, reads, threads
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.values import Values, scan, write_chunks

__all__ = ["BATCH", "Retainer", "Retention", "RetentionReport", "cutoff_of"]

BATCH = 256
"""Entries deleted per write transaction."""
_WALK_PAGE = 4096
"""Checkpoints an idle sweep reads at a time."""
_COUNTED_MAX = 65536
logger = logging.getLogger("swarmstate")


@dataclasses.dataclass(frozen=True)
class Retention:
    """A retention policy the saver applies by itself as graphs write.

    Args:
        keep_last: Keep this many newest checkpoints per thread namespace.
        older_than: Delete threads whose newest checkpoint is older than
            this (a ``timedelta`` or seconds).
        every: ``keep_last`` is applied to a thread once per this many puts
            to it (so a thread holds at most ``keep_last + every`` checkpoints
            per namespace from the start), and ``older_than`` once per this
            many puts of the saver: each time, the checkpoints made before
            the cutoff since the last sweep, up to ``sweep`` of them, are walked
            in order and the threads they belong to looked at (a cost that
            does not grow with the number of threads).
        sweep: Checkpoints walked for ``older_than`` each time.
    """

    keep_last: int | None = None
    older_than: datetime.timedelta | float | None = None
    every: int = 8
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
    if now is not None and (not isinstance(now, datetime.datetime) or now.tzinfo is None):
        raise InvalidArgumentError(
            f"now must be an aware datetime.datetime (with a tzinfo), got {now!r}"
        )
    if isinstance(older_than, datetime.timedelta):
        seconds = older_than.total_seconds()
    elif type(older_than) in (int, float) and older_than >= 0:  # NaN compares False
        seconds = float(older_than)
    else:
        raise InvalidArgumentError(
            f"older_than must be a datetime.timedelta or seconds >= 0, got {older_than!r}"
        )
    if seconds < 0:
        raise InvalidArgumentError(f"older_than must not be negative, got {older_than!r}")
    if now is None:
        now = datetime.datetime.now(datetime.UTC)
    try:
        return now - datetime.timedelta(seconds=seconds)
    except OverflowError:
        # Further back than datetime can go (inf, timedelta.max, 1e12 s): no
        # checkpoint is that old, so nothing expires.
        return datetime.datetime.min.replace(tzinfo=datetime.UTC)


@dataclasses.dataclass
class _Row:
    """One checkpoint of a namespace as a plan needs it."""

    key: str
    parent_id: str | None
    metadata: dict[str, Any]
    versions: dict[str, Any]
    decoded: entry.Decoded
    ts: str
    size: int
    writes: list[tuple[str, int]]  # (key, stored bytes)
    write_chunks: list[str] = dataclasses.field(default_factory=list)
    """The chunks its pending writes stored as chunks name."""


class Retainer:
    """Plans and runs retention over one store for a saver."""

    def __init__(self, store: BaseStore, values: Values) -> None:
        self.store = store
        self.values = values
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}  # puts per thread since its last trim
        self._puts = 0

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
        if (
            thread_ids is None
            and keep_last is None
            and cutoff is not None
            and catalog.converted(self.store)
        ):
            return self.sweep(serde, cutoff, None, dry_run, progress)
        report = RetentionReport(dry_run=dry_run)
        thread_list = catalog.threads(self.store) if thread_ids is None else sorted(set(thread_ids))
        for done, thread_id in enumerate(thread_list, 1):
            report.add(self.thread(serde, thread_id, keep_last, cutoff, dry_run))
            if progress is not None:
                progress(done, len(thread_list))
        return report

    def sweep(
        self,
        serde: Any,
        cutoff: datetime.datetime,
        limit: int | None,
        dry_run: bool,
        progress: Callable[[int, int], object] | None = None,
    ) -> RetentionReport:
        """Expire the threads idle since ``cutoff``, found by walking the order tags.

        Walks the checkpoints made before the cutoff, oldest first, from the
        mark the previous sweep left (at most about ``limit`` of them), and
        looks at each thread met once: one whose newest checkpoint is older
        than the cutoff is deleted; the others are alive, and their newest
        checkpoint, past the cutoff, is met by a later sweep. A real run then
        moves the mark past what it walked (:mod:`.catalog`), so over all
        sweeps each checkpoint is walked once and a sweep with nothing new
        to walk reads one row.
        """
        report = RetentionReport(dry_run=dry_run)
        start, stored = catalog.sweep_start(self.store)
        stop = catalog.cutoff_id(cutoff.timestamp())
        left = limit
        looked: set[str] = set()  # threads met on an earlier page of this sweep
        while left is None or left > 0:
            page = _WALK_PAGE if left is None else min(left, _WALK_PAGE)
            met, after = catalog.walk(self.store, start, stop, page)
            fresh = [thread_id for thread_id, _ in met if thread_id not in looked]
            looked.update(fresh)
            for thread_id in fresh:
                report.add(self.thread(serde, thread_id, None, cutoff, dry_run))
                if progress is not None:
                    progress(len(looked), len(looked))
            if after is None:
                break
            if not dry_run:
                stored = catalog.advance(self.store, stored, after)
                if stored is None:
                    break  # another writer moved the mark: the next sweep goes on from it
            start = after
            if left is not None:
                left -= page
            if catalog.walked_all(self.store, start, stop):
                break
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
        scopes = threads.scopes_of(self.store, thread_id)
        if not scopes:
            return report
        report.threads_examined = 1
        if cutoff is not None and self._idle(serde, scopes, cutoff):
            report.threads_deleted = 1
            for scope in scopes:
                rows = self._rows(serde, *scope)
                report.checkpoints_deleted += len(rows)
                report.writes_deleted += sum(len(row.writes) for row in rows)
            report.bytes_freed = _entry_bytes(self.store, keys.thread_prefix(thread_id))
            # Looked at again right before: a thread that came back to life
            # meanwhile is kept whole.
            if not dry_run and self._idle(serde, scopes, cutoff):
                threads.delete_thread(self.store, self.values, thread_id)
            return report
        if keep_last is None:
            return report
        if dry_run:
            return self._keep(serde, thread_id, scopes, keep_last, report)
        with threads.leased(self.store, thread_id):
            return self._keep(
                serde, thread_id, threads.scopes_of(self.store, thread_id), keep_last, report
            )

    def _idle(self, serde: Any, scopes: list[tuple[str, str]], cutoff: datetime.datetime) -> bool:
        """Whether the newest checkpoint of every namespace is older than ``cutoff``."""
        for scope in scopes:
            for _, stored_entry, _ in reads.groups(self.store.items, keys.scope(*scope), None, 4):
                ts = entry.decode(serde, stored_entry).checkpoint.get("ts")
                if not isinstance(ts, str) or _moment(ts) >= cutoff:
                    return False
                break  # the newest checkpoint is the one that counts
        return True

    def _keep(
        self,
        serde: Any,
        thread_id: str,
        scopes: list[tuple[str, str]],
        keep: int,
        report: RetentionReport,
    ) -> RetentionReport:
        """Keep the newest ``keep`` checkpoints of each namespace (and what they need).

        A dry run plans and counts; a real run (under the thread's lease)
        deletes the other checkpoints, newest first, then sweeps the chunks
        only they referenced (:func:`.threads.sweep`, which says why nothing
        a live checkpoint needs can go).
        """
        size = self.store.footprint
        doomed: list[tuple[str, _Row]] = []
        kept_chunks: set[str] = set()
        kept_earlier: set[Any] = set()
        for thread, checkpoint_ns in scopes:
            rows = self._rows(serde, thread, checkpoint_ns, kept_chunks)
            kept = _needed(rows, keep)
            namespace = keys.scope(thread, checkpoint_ns)
            for row in rows:
                if row.key not in kept:
                    doomed.append((namespace, row))
                elif report.dry_run:
                    kept_chunks.update(row.write_chunks)
                    if row.decoded.forms is not None:
                        threads.add_references(
                            thread, checkpoint_ns, row.decoded, kept_chunks, kept_earlier
                        )
        if not doomed:
            return report
        report.checkpoints_deleted = len(doomed)
        report.writes_deleted = sum(len(row.writes) for _, row in doomed)
        report.bytes_freed = sum(
            size(namespace, row.key, row.size)
            + sum(size(namespace, key, n) for key, n in row.writes)
            for namespace, row in doomed
        )
        if report.dry_run:
            stored = threads.stored_values(self.store, thread_id)
            gone = threads.dead(thread_id, stored, kept_chunks, kept_earlier)
        else:
            # Newest first, checkpoints before their writes: a reader never meets
            # a live checkpoint whose writes or values are gone, nor one whose
            # ancestors are (a DeltaChannel history walks them), so a walk that
            # misses an ancestor finds its own checkpoint gone too.
            pairs = [
                (namespace, key)
                for namespace, row in doomed
                for key in (row.key, *(key for key, _ in row.writes))
            ]
            threads.delete_pairs(self.store, pairs)
            gone = threads.sweep(self.store, serde, thread_id)
        report.bytes_freed += sum(size(namespace, key, n) for namespace, key, n in gone)
        return report

    def _rows(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        orphaned: set[str] | None = None,
    ) -> list[_Row]:
        """Every checkpoint of a namespace, newest first, with its writes' keys and sizes.

        The chunks named by writes whose checkpoint is not stored (it has not
        landed yet, or never will) are added to ``orphaned``: retention keeps
        those writes, and so what they name.
        """
        rows: list[_Row] = []
        writes: list[tuple[str, int]] = []
        borrowed: dict[str, list[str]] = {}  # write key -> the chunks it names
        for key, stored_entry in scan(
            self.store, keys.scope(thread_id, checkpoint_ns), reverse=True
        ):
            if key[-1] != keys.CHECKPOINT:
                writes.append((key, len(stored_entry)))
                named = write_chunks(stored_entry)
                if named:
                    borrowed[key] = named
                continue
            head = key[:-1]
            mine = [w for w in writes if w[0].startswith(head)]
            writes = []
            decoded = entry.decode(serde, stored_entry)
            rows.append(
                _Row(
                    key,
                    decoded.parent_id,
                    decoded.metadata,
                    decoded.checkpoint["channel_versions"],
                    decoded,
                    str(decoded.checkpoint.get("ts", "")),
                    len(stored_entry),
                    mine,
                    [chunk for k, _ in mine for chunk in borrowed.pop(k, ())],
                )
            )
        if orphaned is not None:
            for named in borrowed.values():
                orphaned.update(named)
        return rows

    # -- the policy a saver applies as it writes --------------------------------

    def wrote(self, serde: Any, policy: Retention, thread_id: str) -> None:
        """Count a put; apply the policy when it is due (errors are logged, not raised)."""
        trim = sweep = False
        with self._lock:
            if policy.keep_last is not None:
                counts = self._counts
                if len(counts) > _COUNTED_MAX:
                    counts.clear()
                count = counts.get(thread_id, 0) + 1
                trim = count >= policy.every
                counts[thread_id] = 0 if trim else count
            if policy.older_than is not None:
                self._puts += 1
                sweep = self._puts >= policy.every
                if sweep:
                    self._puts = 0
        if not (trim or sweep):
            return
        try:
            if trim:
                self.thread(serde, thread_id, policy.keep_last, None, dry_run=False)
            if sweep:
                cutoff = cutoff_of(policy.older_than, None)
                assert cutoff is not None
                if catalog.converted(self.store):
                    self.sweep(serde, cutoff, policy.sweep, dry_run=False)
        except Exception:  # the put itself succeeded; retention tries again next time
            logger.exception("swarmstate retention failed; it will be tried again")


def _needed(rows: list[_Row], keep: int) -> set[str]:
    """Keys of the checkpoints to keep: the newest ``keep`` and their delta ancestors."""
    kept = {row.key for row in rows[:keep]}
    by_id = {keys.parse_entry_key(row.key)[0]: row for row in rows}
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
    forms = row.decoded.forms
    if forms is None:
        return True  # an entry of the earlier layout holds every value itself
    return channel in forms


def _moment(ts: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(ts)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _entry_bytes(store: BaseStore, prefix: str) -> int:
    total = 0
    for namespace in store.namespaces(prefix):
        start: str | None = None
        while True:
            page = store.items(namespace, start=start, limit=BATCH, raw=True)
            total += sum(store.footprint(namespace, key, len(value)) for key, value in page)
            if len(page) < BATCH:
                break
            start = page[-1][0] + "\x00"
    return total


def _delete(store: BaseStore, pairs: Sequence[tuple[str, str]]) -> None:
    for start in range(0, len(pairs), BATCH):
        store.delete_many(pairs[start : start + BATCH])

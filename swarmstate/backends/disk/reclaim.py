"""DiskStore.reclaim(): give a file's free pages back to the file system, in short steps.

Deleting rows leaves their pages on SQLite's freelist: the file keeps its
size. DiskStore creates its files with ``auto_vacuum = INCREMENTAL`` (see
:func:`swarmstate.backends.disk.opening.use_incremental_vacuum`), so the free
pages can be handed back a few at a time:

1. ``PRAGMA incremental_vacuum(N)`` moves the last pages of the file into
   free slots and cuts the tail, one short write transaction per step. ``N``
   adapts so that a step holds the write lock for about :data:`STEP_SECONDS`,
   and the next step waits at least as long as this one took: a writer of
   another thread or process that arrived meanwhile gets the lock in between.
2. A passive WAL checkpoint copies the log into the file (and cuts the file
   to its new size) without waiting for anyone.
3. ``PRAGMA wal_checkpoint(TRUNCATE)`` empties the ``-wal`` file. It must
   wait for readers still using the log, and holds new writers back while
   it waits, so it waits at most :data:`CHECKPOINT_WAIT`; if a reader is
   still there the report says the log was not truncated (a later call
   finishes the job).

A file created before this (``auto_vacuum = NONE``) cannot shrink in steps:
``reclaim()`` then only truncates the log and reports the free pages left;
``reclaim(full=True)`` runs one ``VACUUM``, which rewrites the whole file
with ``auto_vacuum = INCREMENTAL`` and blocks every writer while it runs.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from functools import partial
from typing import Any, Final

from swarmstate._reclaim import ReclaimReport
from swarmstate.backends.disk import opening
from swarmstate.backends.disk.connections import Connections
from swarmstate.backends.disk.driver import Connection, apsw

__all__ = ["CHECKPOINT_WAIT", "STEP_SECONDS", "footprint", "page_size", "reclaim"]

STEP_SECONDS: Final = 0.005
"""How long one incremental step aims to hold the write lock."""
CHECKPOINT_WAIT: Final = 0.02
"""The longest the final checkpoint waits for readers (holding new writers back)."""
_FIRST_PAGES, _MIN_PAGES, _MAX_PAGES = 256, 16, 16_384
_CHECKPOINT_TRIES = 10
_INCREMENTAL = 2  # PRAGMA auto_vacuum: 0 NONE, 1 FULL, 2 INCREMENTAL


def _varint(n: int) -> int:
    """Length of SQLite's big-endian varint of ``n`` (1 to 9 bytes)."""
    return 9 if n >= 1 << 56 else max(1, (n.bit_length() + 6) // 7)


def _int_bytes(n: int) -> int:
    """Bytes of a record's INTEGER column holding ``n`` >= 0 (serial types 1 to 6)."""
    for width in (1, 2, 3, 4, 6):
        if n < 1 << (8 * width - 1):
            return width
    return 8


_ROWID = 4  # a rowid of up to 2**28 entries: its varint, and its column in the index
_POINTER = 2  # each cell's slot in its page's pointer array


def footprint(page_size: int, namespace: str, key: str, size: int) -> int:
    """Bytes one live entry occupies in a DiskStore file, by SQLite's file format.

    Its cell in the ``entries`` table (the record header and columns, the
    rowid, and the overflow pages a value too large for one page spills
    into, each counted whole), plus its cell in the ``entries_live`` index.
    What this leaves out: partly filled pages and interior pages.
    """
    ns, k = len(namespace.encode()), len(key.encode())
    text = _varint(2 * ns + 13) + _varint(2 * k + 13)
    # entries: id (the rowid, NULL in the record), ns, key, ended (NULL), size, value
    header = 1 + 1 + text + 1 + 1 + _varint(2 * size + 12)
    payload = header + ns + k + _int_bytes(size) + size
    usable = page_size  # no reserved bytes per page in the files DiskStore makes
    most, least = usable - 35, (usable - 12) * 32 // 255 - 23
    overflow = 0
    local = payload
    if payload > most:
        local = least + (payload - least) % (usable - 4)
        local = local if local <= most else least
        overflow = -(-(payload - local) // (usable - 4))
    cell = _varint(payload) + _varint(1 << (7 * _ROWID - 1)) + local + (4 if overflow else 0)
    index = 1 + text + 1 + ns + k + _ROWID  # entries_live: ns, key, rowid
    return cell + _POINTER + overflow * page_size + _varint(index) + index + _POINTER


def file_bytes(path: str) -> int:
    """Bytes of the database file and its ``-wal`` (the ``-shm`` index aside)."""
    total = 0
    for name in (path, path + "-wal"):
        with suppress(FileNotFoundError):
            total += os.stat(name).st_size
    return total


def _pragma(conn: Connection, name: str) -> int:
    row = conn.execute(f"PRAGMA {name}").fetchone()
    return 0 if row is None else int(row[0])


def page_size(conn: Connection) -> int:
    """The file's page size in bytes."""
    return _pragma(conn, "page_size")


def reclaim(db: Connections, full: bool) -> ReclaimReport:
    """Run the steps above on the file ``db`` opens; the report of what they gave back."""
    started = time.monotonic()
    path = db.path
    before = file_bytes(path)
    conn = db.conn()
    try:
        mode = _pragma(conn, "auto_vacuum")
        steps, longest = 0, 0.0
        if full:
            freed, longest = _vacuum(db, conn)
            steps = 1
        elif mode == _INCREMENTAL:
            freed, steps, longest = _incremental(db, conn)
        else:
            freed = 0
        truncated = _checkpoint(db, conn)
        left = _pragma(conn, "freelist_count")
    except apsw.Error as exc:
        raise db.fail(exc, "reclaim space") from exc
    notes = []
    if left and not full and mode != _INCREMENTAL:
        notes.append(
            f"this file was created without incremental reclaim: its {left} free pages "
            "go back only with reclaim(full=True), which rewrites the file and blocks "
            "writers while it runs (once; later reclaims are incremental)"
        )
    elif left:
        notes.append(f"{left} pages were freed by writes during the run; run reclaim() again")
    if not truncated:
        notes.append(
            "the -wal log was not truncated: a reader was still using it; run reclaim() again"
        )
    return ReclaimReport(
        backend="DiskStore",
        bytes_before=before,
        bytes_after=file_bytes(path),
        pages_freed=freed,
        pages_left=left,
        full=full,
        complete=truncated and not left,
        steps=steps,
        longest_step_seconds=longest,
        seconds=time.monotonic() - started,
        note="; ".join(notes),
    )


def _incremental(db: Connections, conn: Connection) -> tuple[int, int, float]:
    """Vacuum the freelist in short steps; (pages freed, steps, longest step in seconds).

    Stops when the freelist is empty, or once as many pages as it held at
    the start are freed: pages that writes free meanwhile are left for the
    next call, so a busy deleter cannot keep it running. The log is
    checkpointed between steps, off the lock, rather than by SQLite's
    automatic checkpoint at the end of a commit: a step's time is then the
    time it held the lock, which is what the step size adapts to.
    """
    pages, freed, steps, longest = _FIRST_PAGES, 0, 0, 0.0
    target: int | None = None
    automatic = _pragma(conn, "wal_autocheckpoint")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        while target is None or freed < target:
            began, free, left = db.write("reclaim space", partial(_step, pages=pages), conn)
            now = time.monotonic()
            elapsed = now - began
            if target is None:
                target = free
            if free == 0 or left >= free:
                break
            freed += free - left
            steps += 1
            longest = max(longest, elapsed)
            if elapsed < STEP_SECONDS / 2:
                pages = min(pages * 2, _MAX_PAGES)
            elif elapsed > STEP_SECONDS * 1.5:
                pages = max(pages // 2, _MIN_PAGES)
            # Off the lock at least as long as the step was on it: a writer
            # that arrived meanwhile gets in.
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            time.sleep(max(0.0, now + max(elapsed, STEP_SECONDS / 5) - time.monotonic()))
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(automatic)}")
    return freed, steps, longest


def _step(conn: Connection, pages: int) -> tuple[float, int, int]:
    """One incremental step, inside a write transaction: (its start, free pages before, after)."""
    began = time.monotonic()  # the write lock is held from here
    free = _pragma(conn, "freelist_count")
    if free:
        conn.execute(f"PRAGMA incremental_vacuum({int(pages)})").fetchall()
    return began, free, _pragma(conn, "freelist_count")


def _vacuum(db: Connections, conn: Connection) -> tuple[int, float]:
    """Rewrite the file whole, as INCREMENTAL; (pages freed, seconds the lock was held).

    Its temporary copy goes to a file (``temp_store = FILE``), not to memory
    as DiskStore's other temporary b-trees do: a copy of a large store could
    exhaust memory.
    """

    def run() -> tuple[int, float]:
        count = _pragma(conn, "page_count")
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA temp_store = FILE")
        try:
            began = time.monotonic()
            db.retry_busy(lambda: conn.execute("VACUUM"))
            took = time.monotonic() - began
        finally:
            conn.execute("PRAGMA temp_store = MEMORY")
        return count - _pragma(conn, "page_count"), took

    db.check_writable()
    with db.write_lock:
        try:
            return run()
        except apsw.Error as exc:
            raise db.fail(exc, "rewrite the file (VACUUM)") from exc


def _checkpoint(db: Connections, conn: Connection) -> bool:
    """Copy the log into the file, then empty it; whether the ``-wal`` was truncated.

    The passive checkpoint copies without waiting for anyone; the truncating
    one then has little left to copy and waits at most
    :data:`CHECKPOINT_WAIT` for readers. It is tried a few times, off the
    lock in between: it fails at once while another connection runs a
    checkpoint (a writer's automatic one at the end of its commit).
    """
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    opening.set_busy_timeout(conn, CHECKPOINT_WAIT)
    try:
        for attempt in range(_CHECKPOINT_TRIES):
            if attempt:
                time.sleep(CHECKPOINT_WAIT)
            try:
                row: Any = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except apsw.BusyError:
                continue
            if row is not None and row[0] == 0:
                return True
    finally:
        opening.set_busy_timeout(conn, db.busy_timeout)
    return False

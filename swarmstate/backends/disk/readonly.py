"""Read-only opening of a DiskStore file: nothing created, written or removed.

A read-only open works on read-only files, directories and media, never
waits behind a writer's transaction, and leaves the database file and the
set of files beside it as they were. Which SQLite open does that depends on
what is beside the file (see :func:`open_readonly`). The one file it may
write is a ``-shm`` some process already made: the shared-memory index that
every reader and writer of a WAL database updates.
"""

from __future__ import annotations

import os
import stat
import urllib.parse

from swarmstate._errors import IncompatibleStoreError, StorageError
from swarmstate.backends.disk import opening, schema
from swarmstate.backends.disk.driver import apsw

__all__ = [
    "Stamp",
    "check_readonly_file",
    "configure_readonly",
    "file_stamp",
    "identify_readonly",
    "open_readonly",
    "went_stale",
]

Stamp = tuple[int, int, int, int]
"""Identity of a database file and its last change: device, inode, size, mtime (ns)."""

_UNTOUCHED = "it was left untouched"


def check_readonly_file(path: str) -> None:
    """Refuse, before SQLite sees it, a path that a read-only open cannot read as it is.

    Only ``stat`` calls: opening the file here would block on a FIFO, and
    closing a descriptor of a file SQLite has open in this process drops
    SQLite's POSIX locks on it.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise StorageError(
            f"{path} does not exist; a read-only DiskStore opens only an existing store"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise StorageError(f"{path} is not a regular file; give DiskStore a database file")
    if info.st_size == 0:
        raise IncompatibleStoreError(f"{path} is empty, not a swarmstate store; {_UNTOUCHED}")
    if os.path.exists(path + "-wal") and not os.path.exists(path + "-shm"):
        raise StorageError(
            f"{path}-wal exists without {path}-shm (copied files, or a cleanup cut short); "
            "reading that log needs the -shm file, which a read-only open does not create: "
            "open the store read-write once to fold the log into the database"
        )


def file_stamp(path: str) -> Stamp | None:
    """The database file's :data:`Stamp`, or None once a ``-wal`` exists (or it is gone)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if os.path.exists(path + "-wal"):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def open_readonly(path: str) -> tuple[apsw.Connection, Stamp | None]:
    """Open ``path`` for reading only: no file is created, written or removed.

    With a ``-wal`` beside the file, a process has the store open (or one
    crashed and left its log): a read-only WAL connection reads the last
    commit through the shared-memory index, like any reader, and never waits
    for a writer's transaction. Without one, no process has the store open
    and the file holds every commit: it is opened ``immutable`` (no locks, no
    ``-wal``/``-shm`` made, which a plain read-only WAL open would create),
    and the :data:`Stamp` returned lets the caller notice a writer arriving
    (see :func:`went_stale`) and open again.
    """
    check_readonly_file(path)
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW
    stamp = file_stamp(path)
    if stamp is None:
        conn = apsw.Connection(path, flags=flags)
    else:
        uri = f"file:{urllib.parse.quote(path)}?immutable=1"
        conn = apsw.Connection(uri, flags=flags | apsw.SQLITE_OPEN_URI)
    # A read-only connection cannot checkpoint; never let its close try.
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    return conn, stamp


def went_stale(path: str, stamp: Stamp | None) -> bool:
    """Whether an ``immutable`` connection opened at ``stamp`` may miss commits now."""
    return stamp is not None and file_stamp(path) != stamp


def configure_readonly(conn: apsw.Connection, busy_timeout: float) -> None:
    """Per-connection setup of a read-only connection (no synchronous level to set)."""
    opening.set_busy_timeout(conn, busy_timeout)
    conn.execute("PRAGMA temp_store = MEMORY")
    opening.set_stable_plans(conn)


def identify_readonly(conn: apsw.Connection, path: str) -> tuple[str, int]:
    """The uid and schema version of a swarmstate store this code reads; refuses anything else.

    A file of a version from :data:`~.schema.READONLY_SINCE` on is read as
    it is (a version 2 file has no tags: ``tagged`` finds none there).

    Reads only, in one read transaction, so a refused file is left untouched.
    """
    try:
        conn.execute("BEGIN")
        try:
            application_id, version, tables = opening.identity(conn)
            if application_id != schema.APPLICATION_ID:
                raise opening.foreign_error(path, application_id, tables, _UNTOUCHED)
            if version > schema.SCHEMA_VERSION:
                raise opening.newer_error(path, version)
            if version < schema.READONLY_SINCE:
                raise IncompatibleStoreError(
                    f"{path} has swarmstate schema version {version}, older than this "
                    f"swarmstate reads ({schema.READONLY_SINCE}); open it read-write once "
                    "to migrate it"
                )
            return opening.check_meta(path, opening.read_meta(conn)), version
        finally:
            conn.execute("COMMIT")
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise IncompatibleStoreError(
            f"{path} is damaged or not a SQLite database ({exc}); {_UNTOUCHED}"
        ) from exc

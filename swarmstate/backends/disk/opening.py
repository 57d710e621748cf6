"""Opening a DiskStore file: connection settings, the file's checks and identity, setup.

A file is checked before SQLite opens it (a regular file, not a link,
with SQLite's header: :func:`prepare_file`), then identified by its
``application_id`` and ``meta`` table as a swarmstate store of a schema
this code reads (:func:`probe`, :func:`identify`), and created or migrated
in one ``BEGIN IMMEDIATE`` transaction (:func:`setup`). Each connection
gets the same settings (:func:`configure`). The schema and statements are
in :mod:`swarmstate.backends.disk.schema` and
:mod:`swarmstate.backends.disk.statements`.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from typing import Any

from swarmstate._errors import (
    IncompatibleStoreError,
    InvalidArgumentError,
    ReadOnlyStoreError,
    StorageError,
)
from swarmstate.backends.disk.driver import apsw
from swarmstate.backends.disk.schema import (
    APPLICATION_ID,
    CODEC,
    FORMAT,
    MIGRATIONS,
    SCHEMA_VERSION,
    SQLITE_HEADER,
    SYNCHRONOUS_LEVELS,
)

__all__ = [
    "check_header",
    "check_meta",
    "check_regular",
    "configure",
    "file_mode",
    "foreign_error",
    "identify",
    "identity",
    "newer_error",
    "open_connection",
    "open_readonly",
    "prepare_file",
    "probe",
    "read_meta",
    "set_busy_timeout",
    "set_connection_limits",
    "set_stable_plans",
    "set_synchronous",
    "setup",
    "translate",
    "use_incremental_vacuum",
    "use_wal",
]

logger = logging.getLogger("swarmstate")


def translate(exc: BaseException, path: str, action: str) -> Exception:
    """The swarmstate error for an apsw failure while doing ``action`` on ``path``."""
    if isinstance(exc, apsw.NotADBError | apsw.CorruptError):
        return IncompatibleStoreError(
            f"{path} is damaged or not a SQLite database ({exc}); restore it from a "
            "backup or point DiskStore at another path"
        )
    if isinstance(exc, apsw.ReadOnlyError):
        return ReadOnlyStoreError(
            f"{path} cannot be written (read-only open, file or filesystem) while trying "
            f"to {action}: {exc}"
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StorageError(
            f"{path} stayed locked by another writer longer than busy_timeout while "
            f"trying to {action}; raise busy_timeout or keep write transactions short"
        )
    if isinstance(exc, apsw.CantOpenError):
        return StorageError(f"cannot open {path}: {exc}; check the path and its permissions")
    return StorageError(f"SQLite failed to {action} on {path}: {exc}")


def open_connection(path: str) -> apsw.Connection:
    """Open ``path`` read-write; the file must already exist (we create it 0600)."""
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_NOFOLLOW
    return apsw.Connection(path, flags=flags)


def open_readonly(path: str, busy_timeout: float) -> apsw.Connection:
    """Open ``path`` for reading only: a connection that never changes the file or its WAL.

    It reads committed transactions still in ``-wal`` (a crashed writer's),
    but cannot checkpoint them into the file, and closing it deletes
    nothing. Only the ``-shm`` index, a cache SQLite rebuilds at will, may be
    created or rewritten.
    """
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW
    conn = apsw.Connection(path, flags=flags)
    try:
        set_busy_timeout(conn, busy_timeout)
    except BaseException:
        conn.close()
        raise
    return conn


def set_busy_timeout(conn: apsw.Connection, seconds: float) -> None:
    """Wait up to ``seconds`` for another connection's lock instead of failing at once."""
    conn.set_busy_timeout(int(seconds * 1000))


def set_synchronous(conn: apsw.Connection, level: str) -> None:
    """Apply the durability level; a per-connection setting, so every connection runs it."""
    if level not in SYNCHRONOUS_LEVELS:  # guards the f-string below
        raise InvalidArgumentError(f"synchronous must be one of {SYNCHRONOUS_LEVELS}")
    conn.execute(f"PRAGMA synchronous = {level}")


def set_connection_limits(conn: apsw.Connection) -> None:
    """Keep temp b-trees (UNION in diff/restore) in memory, and the WAL file bounded."""
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA journal_size_limit = 67108864")


def set_stable_plans(conn: apsw.Connection) -> None:
    """Plan each statement once, whatever values are bound to it.

    apsw's SQLite is built with STAT4; there the planner of a range query
    (``ns = ?1 ... ORDER BY key``) looks at the bound ``ns``, which marks
    the statement to be re-prepared every time ``?1`` is bound again: about
    4 us on each ``keys``/``items`` call, more than the read itself. With
    the query planner stability guarantee the cached statement is reused.
    Every statement here has one intended plan (an index, never statistics),
    and the plans are the same with or without it.
    """
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)


def configure(conn: apsw.Connection, synchronous: str, busy_timeout: float) -> None:
    """Per-connection setup. Foreign keys are not used: no table references another."""
    set_busy_timeout(conn, busy_timeout)
    set_synchronous(conn, synchronous)
    set_connection_limits(conn)
    set_stable_plans(conn)


def use_incremental_vacuum(conn: apsw.Connection) -> None:
    """Make a new file one whose free pages can be given back in steps (``reclaim()``).

    SQLite fixes ``auto_vacuum`` when the file's first page is written, which
    the switch to WAL already does: so every opener runs this before
    :func:`use_wal`, and whichever process writes the first page writes it
    INCREMENTAL. A file that has pages is left alone (the pragma would write
    to it): one made before this stays NONE until ``reclaim(full=True)``.
    """
    if _scalar(conn, "PRAGMA page_count") == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


def use_wal(conn: apsw.Connection, path: str) -> None:
    """Switch the file to write-ahead logging (persistent: stored in the file)."""
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        raise StorageError(
            f"{path} cannot use write-ahead logging (journal_mode stayed {mode}); "
            "DiskStore needs a local filesystem that supports shared memory (not NFS)"
        )


def check_regular(path: str) -> bool:
    """Whether ``path`` exists; refuse anything there that is not a regular file.

    A FIFO would block the first read forever and a device or socket is no
    database: each is refused at once, before anything opens it.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot inspect {path}: {exc.strerror}") from exc
    if stat.S_ISREG(mode):
        return True
    kind = (
        "a directory" if stat.S_ISDIR(mode)
        else "a symbolic link" if stat.S_ISLNK(mode)
        else "a FIFO" if stat.S_ISFIFO(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "a device"
    )  # fmt: skip
    raise StorageError(f"{path} is {kind}, not a regular file; give DiskStore a file path")


def check_header(path: str) -> None:
    """Refuse a non-empty file that does not start with the SQLite header.

    Opened without blocking and checked again through the open descriptor,
    so a FIFO swapped in after :func:`check_regular` is refused too.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"{path} is not a regular file; give DiskStore a file path")
        head = handle.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise IncompatibleStoreError(
            f"{path} is not a SQLite database (its first bytes are {head[:16]!r}); "
            "DiskStore only opens files it created: point it at a new path"
        )


def identify(conn: apsw.Connection, path: str) -> None:
    """Refuse a SQLite file made by something else, or by a newer swarmstate.

    Runs only reads, so a refused file is left exactly as it was. The three
    facts come from one statement, so one read transaction: read apart, a
    concurrent opener's setup could commit between them (tables seen, not
    yet the application id).
    """
    application_id, version, tables = identity(conn)
    if application_id == 0 and tables == 0:
        return  # a new, empty database: setup() will make it ours
    if application_id != APPLICATION_ID:
        raise foreign_error(
            path, application_id, tables, "DiskStore will not touch it: point it at a new path"
        )
    if version > SCHEMA_VERSION:
        raise newer_error(path, version)


def identity(conn: apsw.Connection) -> tuple[int, int, int]:
    """Application id, schema version and schema object count, read in one statement."""
    row = conn.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_schema)"
    ).fetchone()
    assert row is not None  # a SELECT without FROM always yields one row
    return int(row[0]), int(row[1]), int(row[2])


def foreign_error(
    path: str, application_id: int, tables: int, advice: str
) -> IncompatibleStoreError:
    """The refusal of a SQLite file another program made, with what to do about it."""
    return IncompatibleStoreError(
        f"{path} is a SQLite database not made by swarmstate (application_id "
        f"{application_id:#x}, {tables} schema objects); {advice}"
    )


def newer_error(path: str, version: int) -> IncompatibleStoreError:
    """The refusal of a file a newer swarmstate wrote."""
    return IncompatibleStoreError(
        f"{path} has swarmstate schema version {version}, newer than this "
        f"swarmstate understands ({SCHEMA_VERSION}); upgrade swarmstate to open it"
    )


def probe(path: str, busy_timeout: float) -> None:
    """Refuse a foreign or newer file through a read-only connection (see :func:`identify`).

    Run before any read-write connection: a read-write one would fold a
    foreign file's leftover ``-wal`` into it and delete the ``-wal`` on close.
    """
    try:
        conn = open_readonly(path, busy_timeout)
    except apsw.CantOpenError:
        return  # no read-only view possible here (rare): the read-write open decides
    try:
        identify(conn, path)
    except apsw.ReadOnlyError as exc:
        raise IncompatibleStoreError(
            f"{path} has a rollback journal left by a crashed writer, so it is not a "
            f"file DiskStore made (those always use write-ahead logging; {exc}); "
            "point DiskStore at a new path"
        ) from exc
    finally:
        conn.close()


def setup(conn: apsw.Connection, path: str) -> str:
    """Create or migrate the schema, idempotently, and return the store's uid.

    Runs in one IMMEDIATE transaction so concurrent openers do not race.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        identify(conn, path)
        version = _scalar(conn, "PRAGMA user_version")
        for target, sql in MIGRATIONS:
            if target > version:
                conn.execute(sql)
        # PRAGMA arguments cannot be bound; both values are our integer constants.
        conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
        conn.execute(f"PRAGMA application_id = {int(APPLICATION_ID)}")
        defaults = {"format": FORMAT, "codec": CODEC, "uid": secrets.token_hex(16)}
        for name, value in defaults.items():
            conn.execute("INSERT OR IGNORE INTO meta VALUES (?1, ?2)", (name, value))
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?1)", (str(SCHEMA_VERSION),)
        )
        meta = read_meta(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return check_meta(path, meta)


def check_meta(path: str, meta: dict[str, str]) -> str:
    """The store's uid, once the file's recorded format and codec are ours."""
    if meta.get("format") != FORMAT or meta.get("codec") != CODEC or "uid" not in meta:
        raise IncompatibleStoreError(
            f"{path} records format {meta.get('format')!r} and codec {meta.get('codec')!r}; "
            f"this swarmstate reads only {FORMAT!r} with {CODEC!r}"
        )
    return meta["uid"]


def read_meta(conn: apsw.Connection) -> dict[str, str]:
    """The ``meta`` table: format, codec, uid, schema version."""
    rows: list[Any] = conn.execute("SELECT name, value FROM meta").fetchall()
    return {str(name): str(value) for name, value in rows}


def _scalar(conn: apsw.Connection, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


def file_mode(path: str) -> int | None:
    """Permission bits of ``path``, or None when it does not exist."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return None


def prepare_file(path: str) -> bool:
    """Check the directory, refuse what is not a SQLite file, create a new file 0600.

    Returns whether ``path`` already existed (it then still needs
    :func:`probe`). Reads at most the file's first bytes. The WAL and
    shared-memory files SQLite makes later copy the database file's mode,
    so they are 0600 too.
    """
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise StorageError(
            f"cannot create {path}: directory {directory} does not exist; create it first"
        )
    for name in (path + "-wal", path + "-shm"):
        check_regular(name)
    if not check_regular(path):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            check_regular(path)  # another process was quicker
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc.strerror}") from exc
        else:
            os.close(fd)
            return False
    try:
        check_header(path)
    except OSError as exc:
        if isinstance(exc, StorageError):
            raise
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    for name in (path, path + "-wal", path + "-shm"):
        mode = file_mode(name)
        if mode is not None and mode & 0o077 and (name, mode) not in _WARNED_MODES:
            _WARNED_MODES.add((name, mode))  # once per file and mode in a process
            logger.warning(
                "%s has mode %o: other users can %s the store; run chmod 600 on it "
                "(DiskStore creates its files 0600)",
                name,
                mode,
                "read and change" if mode & 0o022 else "read",
            )
    return True


_WARNED_MODES: set[tuple[str, int]] = set()

"""SQLite plumbing for DiskStore: schema, migrations, connection setup, SQL text.

Every SQL statement the disk backend runs lives here, parameterized.

Layout (schema version 1). ``entries`` keeps every row version a retained
snapshot may still need (multi-version rows, no copies):

* ``id`` only grows past each snapshot's mark, so "created after snapshot
  s" is ``id >= snapshots.mark`` for s: the table's own rowid order answers
  it with no extra index.
* ``ended`` is NULL while the row is current; when a write replaces or
  deletes a row that a snapshot still needs, the row is kept and ``ended``
  is set to the id of the next snapshot (``counters.epoch``). Snapshot ``s``
  sees a row when ``id < mark(s)`` and ``ended IS NULL OR ended > s``.
* A row created after the latest snapshot (``id >= counters.floor``) is
  needed by no snapshot, so a write overwrites it in place (one UPSERT) and
  a delete removes it.

``counters`` holds the live count and byte total as of the latest
snapshot; ``snapshot()`` and ``len()`` add the rows written since (a range
of ``id`` and of ``ended``), so a write touches no counter row.

Keys are ``TEXT`` compared with SQLite's default BINARY collation: memcmp of
UTF-8, which is Unicode code point order, the same as Python's ``str`` order.
SQL string functions are never applied to keys (``length()`` stops at NUL).
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from typing import Any, Final

from swarmstate._errors import (
    IncompatibleStoreError,
    InvalidArgumentError,
    MissingDependencyError,
    ReadOnlyStoreError,
    StorageError,
)

try:
    import apsw
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingDependencyError(
        'DiskStore needs the apsw package; install it with: pip install "swarmstate[disk]"'
    ) from exc

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Connection",
    "apsw",
    "check_header",
    "check_meta",
    "check_regular",
    "configure",
    "foreign_error",
    "identify",
    "identity",
    "newer_error",
    "open_connection",
    "open_readonly",
    "prepare_file",
    "probe",
    "read_meta",
    "setup",
    "translate",
    "use_incremental_vacuum",
    "use_wal",
]

Connection = apsw.Connection
logger = logging.getLogger("swarmstate")

APPLICATION_ID: Final = 0x53775374  # "SwSt" in the SQLite header: marks our files
SCHEMA_VERSION: Final = 2
FORMAT: Final = "swarmstate"
CODEC: Final = "msgpack"
SQLITE_HEADER: Final = b"SQLite format 3\x00"
SYNCHRONOUS_LEVELS: Final = ("NORMAL", "FULL")

_SCHEMA_V1 = """
CREATE TABLE meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE counters (
    one        INTEGER PRIMARY KEY CHECK (one = 1),
    epoch      INTEGER NOT NULL,  -- id the next snapshot gets; stamps rows ended now
    floor      INTEGER NOT NULL,  -- first entries.id after the latest snapshot
    head       INTEGER,           -- last snapshot taken or restored
    base_count INTEGER NOT NULL,  -- live entries at the latest snapshot
    base_bytes INTEGER NOT NULL   -- their encoded bytes
);
INSERT INTO counters VALUES (1, 1, 1, NULL, 0, 0);

CREATE TABLE entries (
    id    INTEGER PRIMARY KEY,
    ns    TEXT NOT NULL,
    key   TEXT NOT NULL,
    ended INTEGER,
    size  INTEGER NOT NULL,
    value BLOB NOT NULL
);
CREATE UNIQUE INDEX entries_live ON entries (ns, key) WHERE ended IS NULL;
CREATE INDEX entries_past ON entries (ns, key, ended) WHERE ended IS NOT NULL;
CREATE INDEX entries_ended ON entries (ended) WHERE ended IS NOT NULL;

CREATE TABLE snapshots (
    id         INTEGER PRIMARY KEY,
    mark       INTEGER NOT NULL,  -- first entries.id written after it
    parent     INTEGER,
    timestamp  REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    count      INTEGER NOT NULL
);
"""

# A random token per snapshot, checked whenever a snapshot is used: a copy of
# the file shares the uid, never the tokens of snapshots taken after the copy.
# Snapshots taken before version 2 keep NULL, which their handles carry too.
_SCHEMA_V2 = "ALTER TABLE snapshots ADD COLUMN token INTEGER;"

MIGRATIONS: Final[tuple[tuple[int, str], ...]] = ((1, _SCHEMA_V1), (2, _SCHEMA_V2))
"""``(version, sql)`` in order; :func:`setup` applies those above the file's version."""

# -- statements --------------------------------------------------------------

# New row ids: above every row and never below the latest snapshot's mark,
# so "created after snapshot s" stays "id >= mark(s)" even after the
# highest rows are deleted. No counter row is written per insert.
_NEXT_ID = "max(coalesce((SELECT max(id) FROM entries), 0) + 1, (SELECT floor FROM counters))"
_FLOOR = "(SELECT floor FROM counters)"
_EPOCH = "(SELECT epoch FROM counters)"

# The common write, one statement: insert, or overwrite in place a current
# row no snapshot needs. A row a snapshot needs makes it change nothing
# (changes() == 0) and the caller takes the END_OLD + PUT path.
PUT_FAST = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value WHERE entries.id >= {_FLOOR}
"""
# PUT_FAST on the condition that (?5, ?6) has no live value, in the same
# statement: a conditional write of one row as one autocommit transaction.
# changes() == 0 when the condition fails or PUT_FAST would change nothing;
# the caller then takes the checked path in a transaction of its own.
PUT_FAST_UNLESS = f"""
INSERT INTO entries (id, ns, key, size, value)
SELECT {_NEXT_ID}, ?1, ?2, ?3, ?4
WHERE NOT EXISTS (SELECT 1 FROM entries WHERE ns = ?5 AND key = ?6 AND ended IS NULL)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value WHERE entries.id >= {_FLOOR}
"""
END_OLD = f"""
UPDATE entries SET ended = {_EPOCH}
WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id < {_FLOOR}
"""
PUT = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value
"""
PUT_IF_ABSENT = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL DO NOTHING
"""


def put_if_absent_unless(rows: int) -> str:
    """PUT_IF_ABSENT of ``rows`` rows on the condition that (?1, ?2) has no live value.

    One statement, so one autocommit transaction, all or nothing. The rows
    are bound after the condition, four parameters each (ns, key, size,
    value), and get ids counted up from one next id in their order. changes()
    is the rows written; 0 when the condition fails, and also when every key
    held a value already: the caller then takes the checked path, which
    tells the two apart.
    """
    values = ", ".join(
        f"({i}, ?{3 + 4 * i}, ?{4 + 4 * i}, ?{5 + 4 * i}, ?{6 + 4 * i})" for i in range(rows)
    )
    return f"""
INSERT INTO entries (id, ns, key, size, value)
SELECT base.id + row.column1, row.column2, row.column3, row.column4, row.column5
FROM (SELECT {_NEXT_ID} AS id) AS base, (VALUES {values}) AS row
WHERE NOT EXISTS (SELECT 1 FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL)
ORDER BY row.column1
ON CONFLICT (ns, key) WHERE ended IS NULL DO NOTHING
"""


PUT_IF_ABSENT_UNLESS_MAX: Final = 32
"""The most rows :func:`put_if_absent_unless` writes in one statement."""
PUT_IF_ABSENT_UNLESS: Final = {
    rows: put_if_absent_unless(rows) for rows in range(1, PUT_IF_ABSENT_UNLESS_MAX + 1)
}
DELETE_NEW = f"""
DELETE FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id >= {_FLOOR}
"""
END_LIVE = f"UPDATE entries SET ended = {_EPOCH} WHERE ns = ?1 AND key = ?2 AND ended IS NULL"

GET = "SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL"
EXISTS = "SELECT 1 FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL"
COUNT = "SELECT count(*) FROM entries WHERE ns = ?1 AND ended IS NULL"
# Live totals = totals at the latest snapshot + rows written since - rows
# ended since: costs the writes since that snapshot, and keeps writes free
# of a counter update (an extra page in every commit).
TOTALS = f"""
SELECT epoch, floor, head, {_NEXT_ID},
    base_count
      + (SELECT count(*) FROM entries NOT INDEXED WHERE id >= floor AND ended IS NULL)
      - (SELECT count(*) FROM entries INDEXED BY entries_ended WHERE ended = epoch),
    base_bytes
      + (SELECT coalesce(sum(size), 0) FROM entries NOT INDEXED
         WHERE id >= floor AND ended IS NULL)
      - (SELECT coalesce(sum(size), 0) FROM entries INDEXED BY entries_ended
         WHERE ended = epoch)
FROM counters
"""


def range_sql(columns: str, has_start: bool, has_stop: bool, reverse: bool) -> str:
    """A ``keys``/``items`` query over one namespace, served by ``entries_live``."""
    where = "ns = ?1 AND ended IS NULL"
    if has_start:
        where += " AND key >= ?2"
    if has_stop:
        where += " AND key < ?3"
    order = "DESC" if reverse else "ASC"
    return f"SELECT {columns} FROM entries WHERE {where} ORDER BY key {order} LIMIT ?4"


RANGE_SQL: Final = {
    (columns, has_start, has_stop, reverse): range_sql(columns, has_start, has_stop, reverse)
    for columns in ("key", "key, value")
    for has_start in (False, True)
    for has_stop in (False, True)
    for reverse in (False, True)
}


def _prefix_where(has_stop: bool) -> str:
    return "ended IS NULL AND ns >= ?1" + (" AND ns < ?2" if has_stop else "")


def namespaces_sql(has_stop: bool) -> str:
    """Distinct namespaces under a prefix by an index skip-scan: one seek per name."""
    bound = " AND ns < ?2" if has_stop else ""
    return f"""
WITH RECURSIVE names(ns) AS (
    SELECT min(ns) FROM entries WHERE ended IS NULL AND ns >= ?1{bound}
    UNION ALL
    SELECT (SELECT min(ns) FROM entries WHERE ended IS NULL AND ns > names.ns{bound})
    FROM names WHERE names.ns IS NOT NULL
)
SELECT ns FROM names WHERE ns IS NOT NULL
"""


NAMESPACES_SQL: Final = {flag: namespaces_sql(flag) for flag in (False, True)}
PREFIX_ROWS_SQL: Final = {
    flag: f"SELECT ns, key, size, value FROM entries WHERE {_prefix_where(flag)} ORDER BY ns, key"
    for flag in (False, True)
}
PREFIX_DELETE_NEW_SQL: Final = {
    flag: f"DELETE FROM entries WHERE {_prefix_where(flag)} AND id >= {_FLOOR}"
    for flag in (False, True)
}
PREFIX_END_SQL: Final = {
    flag: f"UPDATE entries SET ended = {_EPOCH} WHERE {_prefix_where(flag)}"
    for flag in (False, True)
}
CLEAR_DELETE_NEW = f"DELETE FROM entries WHERE ended IS NULL AND id >= {_FLOOR}"
CLEAR_END = f"UPDATE entries SET ended = {_EPOCH} WHERE ended IS NULL"

# -- snapshots ---------------------------------------------------------------

SNAPSHOT_INSERT = """
INSERT INTO snapshots (id, mark, parent, timestamp, size_bytes, count, token)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
"""
SNAPSHOT_ADVANCE = """
UPDATE counters SET epoch = epoch + 1, floor = ?2, head = ?1, base_count = ?3, base_bytes = ?4
"""
SNAPSHOT_KEEP_FROM = "SELECT id FROM snapshots ORDER BY id DESC LIMIT 1 OFFSET ?1"
SNAPSHOT_EVICT = "DELETE FROM snapshots WHERE id < ?1"
# A row ended at e was last seen by snapshot e - 1; once every snapshot
# below ``keep_from`` is gone, rows ended at or before it serve nobody.
COLLECT_GARBAGE = "DELETE FROM entries WHERE ended IS NOT NULL AND ended <= ?1"
SNAPSHOT_LIST = """
SELECT id, mark, parent, timestamp, size_bytes, count, token FROM snapshots ORDER BY id
"""
SNAPSHOT_MARK = "SELECT mark, token FROM snapshots WHERE id = ?1"
SET_HEAD = "UPDATE counters SET head = ?1"

# Row id of (ns, key) as snapshot :v (taken at :m) saw it, via the two
# partial indexes: the current row if it is old enough, else the past row
# that was current at :v.
_ROW_AT = """COALESCE(
    (SELECT e.id FROM entries e
     WHERE e.ns = c.ns AND e.key = c.key AND e.ended IS NULL AND e.id < :{m}),
    (SELECT e.id FROM entries e
     WHERE e.ns = c.ns AND e.key = c.key AND e.ended > :{v} AND e.id < :{m}))"""

# Keys touched between two versions: created in [lo_m, hi_m) or ended in (lo, hi].
# INDEXED BY: without it the planner may scan all of entries_past to merge
# the UNION in (ns, key) order, which costs the history, not the change.
_CHANGED_KEYS = """
    SELECT ns, key FROM entries WHERE id >= :lo_m AND id < :hi_m
    UNION
    SELECT ns, key FROM entries INDEXED BY entries_ended WHERE ended > :lo AND ended <= :hi
"""

DIFF = f"""
WITH c(ns, key) AS ({_CHANGED_KEYS}),
rows(ns, key, a, b) AS MATERIALIZED (
    SELECT c.ns, c.key, {_ROW_AT.format(m="a_m", v="a")}, {_ROW_AT.format(m="b_m", v="b")}
    FROM c
)
SELECT ns, key, a, b,
    a IS NOT NULL AND b IS NOT NULL AND a != b
    AND (SELECT value FROM entries WHERE id = a) != (SELECT value FROM entries WHERE id = b)
FROM rows
"""

# For each key written since snapshot :v (taken at :m): the row it saw, the
# current row, when the former ended, and whether both hold the same bytes.
# The current row is looked up once and is also the snapshot's row when it
# predates :m; each of the two rows is then read once (a join, not one
# subquery per column): restore costs a few seeks per changed key.
RESTORE_PLAN = """
WITH c(ns, key) AS (
    SELECT ns, key FROM entries WHERE id >= :m
    UNION
    SELECT ns, key FROM entries INDEXED BY entries_ended WHERE ended > :v
),
live(ns, key, cur) AS MATERIALIZED (
    SELECT c.ns, c.key,
        (SELECT e.id FROM entries e WHERE e.ns = c.ns AND e.key = c.key AND e.ended IS NULL)
    FROM c
),
plan(was, cur) AS MATERIALIZED (
    SELECT CASE WHEN cur < :m THEN cur ELSE
        (SELECT e.id FROM entries e
         WHERE e.ns = live.ns AND e.key = live.key AND e.ended > :v AND e.id < :m) END,
        cur
    FROM live
)
SELECT was, cur, w.ended, coalesce(w.value = n.value, 0)
FROM plan
LEFT JOIN entries w ON w.id = plan.was
LEFT JOIN entries n ON n.id = plan.cur
WHERE was IS NOT cur
"""
EPOCH_FLOOR = "SELECT epoch, floor FROM counters"
# A row ended since the latest snapshot can become current again in place:
# every snapshot that sees it keeps seeing it (they all predate the end).
REVIVE_ROW = "UPDATE entries SET ended = NULL WHERE id = ?1"
DELETE_ROW = "DELETE FROM entries WHERE id = ?1"
END_ROW = f"UPDATE entries SET ended = {_EPOCH} WHERE id = ?1"
COPY_ROW = f"""
INSERT INTO entries (id, ns, key, size, value)
SELECT {_NEXT_ID}, ns, key, size, value FROM entries WHERE id = ?1
"""

SNAPSHOT_GET = """
SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id < ?3
UNION ALL
SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended > ?4 AND id < ?3
"""
SNAPSHOT_KEYS = """
SELECT ns, key FROM entries WHERE id < ?1 AND (ended IS NULL OR ended > ?2) ORDER BY ns, key
"""

# -- connection setup --------------------------------------------------------


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
        if mode is not None and mode & 0o077:
            logger.warning(
                "%s has mode %o: other users can read or change the store; "
                "run chmod 600 on it (DiskStore creates its files 0600)",
                name,
                mode,
            )
    return True

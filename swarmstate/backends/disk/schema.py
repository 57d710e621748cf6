"""DiskStore's file format: how a file is marked as ours, its tables, and their migrations.

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

Tags (schema version 3): ``tag_order`` and ``tag_group`` hold an entry's
ordered secondary keys on its own row (NULL: none), so a row version keeps
the tags it was written with and snapshots, restore and copies carry them.
Two partial indexes over live tagged rows, ``(tag, ns, key)``, give
``tagged`` its order and ``tag_deletes`` their range; an untagged row is in
neither. Every statement that overwrites a row sets both columns.

Keys are ``TEXT`` compared with SQLite's default BINARY collation: memcmp of
UTF-8, which is Unicode code point order, the same as Python's ``str`` order.
SQL string functions are never applied to keys (``length()`` stops at NUL).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPLICATION_ID",
    "CODEC",
    "FORMAT",
    "MIGRATIONS",
    "READONLY_SINCE",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "SYNCHRONOUS_LEVELS",
    "TAGS_SINCE",
]

APPLICATION_ID: Final = 0x53775374  # "SwSt" in the SQLite header: marks our files
SCHEMA_VERSION: Final = 3
TAGS_SINCE: Final = 3
"""The first version with tags: an older file opened read-only has none."""
READONLY_SINCE: Final = 2
"""The oldest version a read-only open reads (snapshot tokens came with 2)."""
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

# Tags: two nullable columns (adding them rewrites no row) and their indexes.
_SCHEMA_V3 = """
ALTER TABLE entries ADD COLUMN tag_order TEXT;
ALTER TABLE entries ADD COLUMN tag_group TEXT;
CREATE INDEX entries_order ON entries (tag_order, ns, key)
    WHERE ended IS NULL AND tag_order IS NOT NULL;
CREATE INDEX entries_group ON entries (tag_group, ns, key)
    WHERE ended IS NULL AND tag_group IS NOT NULL;
"""

MIGRATIONS: Final[tuple[tuple[int, str], ...]] = (
    (1, _SCHEMA_V1),
    (2, _SCHEMA_V2),
    (3, _SCHEMA_V3),
)
"""``(version, sql)`` in order; :func:`setup` applies those above the file's version."""

"""Every SQL statement DiskStore runs, parameterized, grouped by what runs it.

Writes come first, in the order of the paths :mod:`.writes` tries (its
docstring says which path a write takes): path 1's single statements, each
its own transaction, then what paths 2 and 3 run row by row inside a write
transaction. Then deletes, reads, prefix operations and snapshots. The
tables are described in :mod:`.schema`.

Path 1's statements for batches of several rows are made from their shape:
:func:`put_fast_when` (up to 8 rows under up to 8 conditions, each that a
key holds no value or holds one) and :func:`put_one_when` (one row of
``store.write`` under up to 8 conditions, key ranges that must be empty
among them), made when a shape first runs and kept, and
:data:`PUT_IF_ABSENT_UNLESS` (1 to 32 rows, 32 texts built at import by
:func:`put_if_absent_unless`).
"""

from __future__ import annotations

import functools
from typing import Final

# New row ids: above every row and never below the latest snapshot's mark,
# so "created after snapshot s" stays "id >= mark(s)" even after the
# highest rows are deleted. No counter row is written per insert.
_NEXT_ID = "max(coalesce((SELECT max(id) FROM entries), 0) + 1, (SELECT floor FROM counters))"
_FLOOR = "(SELECT floor FROM counters)"
_EPOCH = "(SELECT epoch FROM counters)"

# -- path 1: one statement, its own transaction --------------------------------
# Each writes all its rows or none, and changes nothing (changes() == 0)
# when it cannot do the whole write: the write then takes path 2 or 3.

# The common write, one statement: insert, or overwrite in place a current
# row no snapshot needs. A row a snapshot needs makes it change nothing
# (changes() == 0) and the write takes path 2 (END_OLD + PUT).
PUT_FAST = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value, tag_order = NULL, tag_group = NULL
WHERE entries.id >= {_FLOOR}
"""
# PUT_FAST on the condition that (?5, ?6) has no live value, in the same
# statement: a conditional write of one row as one autocommit transaction.
# The condition sits in VALUES, not in an INSERT ... SELECT ... WHERE: a
# SELECT reading the table it inserts into is first copied to a temporary
# b-tree, about a quarter of this statement's instructions. When (?5, ?6)
# has a live value the row's ns is NULL, which breaks ns's NOT NULL, and OR
# IGNORE drops the row (OR IGNORE leaves the ON CONFLICT target to its DO
# UPDATE).
# changes() == 0 when the condition fails or PUT_FAST would change nothing
# (or any other constraint failed); the write then takes path 3, the
# checked transaction, which tells these apart.
PUT_FAST_UNLESS = f"""
INSERT OR IGNORE INTO entries (id, ns, key, size, value)
VALUES ({_NEXT_ID},
        CASE WHEN EXISTS (SELECT 1 FROM entries WHERE ns = ?5 AND key = ?6 AND ended IS NULL)
        THEN NULL ELSE ?1 END,
        ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value, tag_order = NULL, tag_group = NULL
WHERE entries.id >= {_FLOOR}
"""


@functools.lru_cache(maxsize=128)
def put_fast_when(rows: int, absent: tuple[bool, ...]) -> str:
    """PUT_FAST of ``rows`` rows on conditions about other keys, as one statement.

    ``absent[j]`` says whether condition ``j``'s key must have no live value
    (True) or must have one (False). One statement, one autocommit
    transaction, all or nothing: besides the conditions, it writes only if
    no row's key has a current row a snapshot still needs (which PUT_FAST
    cannot overwrite). Then every row is inserted or overwritten in place,
    in order, with ids counted up from one next id, and changes() is
    ``rows``; otherwise nothing is written, changes() is 0, and the write
    takes path 3, the checked transaction, which tells the cases apart.
    Bound first the conditions' keys, two parameters each (ns, key), then the
    rows, four each (ns, key, size, value). Made once per shape, when a write
    of that shape first runs.
    """
    checks = [
        ("NOT " if must_be_absent else "")
        + f"EXISTS (SELECT 1 FROM entries WHERE ns = ?{2 * j + 1} AND key = ?{2 * j + 2}"
        " AND ended IS NULL)"
        for j, must_be_absent in enumerate(absent)
    ]
    first = 2 * len(absent)
    checks += [
        f"NOT EXISTS (SELECT 1 FROM entries WHERE ns = ?{first + 4 * i + 1}"
        f" AND key = ?{first + 4 * i + 2} AND ended IS NULL AND id < {_FLOOR})"
        for i in range(rows)
    ]
    values = ", ".join(
        f"({i}, ?{first + 4 * i + 1}, ?{first + 4 * i + 2}, ?{first + 4 * i + 3},"
        f" ?{first + 4 * i + 4})"
        for i in range(rows)
    )
    holds = "\n  AND ".join(checks)
    return f"""
INSERT INTO entries (id, ns, key, size, value)
SELECT base.id + row.column1, row.column2, row.column3, row.column4, row.column5
FROM (SELECT {_NEXT_ID} AS id) AS base, (VALUES {values}) AS row
WHERE {holds}
ORDER BY row.column1
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value, tag_order = NULL, tag_group = NULL
"""


PUT_FAST_WHEN_MAX: Final = 8
"""The most rows (and conditions) :func:`put_fast_when` writes in one statement."""


def put_if_absent_unless(rows: int) -> str:
    """PUT_IF_ABSENT of ``rows`` rows on the condition that (?1, ?2) has no live value.

    One statement, so one autocommit transaction, all or nothing. The rows
    are bound after the condition, four parameters each (ns, key, size,
    value), and get ids counted up from one next id in their order. changes()
    is the rows written; 0 when the condition fails, and also when every key
    held a value already: the write then takes path 3, the checked
    transaction, which tells the two apart.
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


@functools.lru_cache(maxsize=128)
def put_one_when(
    conditions: tuple[tuple[str, bool, bool], ...], if_absent: bool, tagged: bool = False
) -> str:
    """One row of a transaction (``store.write``) on its conditions, as one statement.

    ``conditions`` gives each condition's shape: ``("absent", _, _)`` and
    ``("present", _, _)`` take a key (two parameters, ns and key);
    ``("empty", has_start, has_stop)`` a key range of a namespace (the ns,
    then the bounds it has). They are bound after the row (?1 to ?4: ns, key,
    size, value). As in :data:`PUT_FAST_UNLESS`, the conditions sit in
    VALUES: when one fails the row's ns is NULL and OR IGNORE drops it (an
    ``INSERT ... SELECT ... WHERE`` reading ``entries`` would first copy it to
    a temporary b-tree). Without ``if_absent`` the row is inserted or
    overwritten in place unless a snapshot needs the current row; with it,
    inserted only where the key has no live value. changes() == 0 when
    nothing was written, for whatever reason: the write then takes the
    transaction (:func:`.writes.transaction`), which tells the reasons apart.
    ``tagged``: the row's tags are bound as ?5 (order) and ?6 (group), and
    the conditions after them. Made once per shape, when a write of that
    shape first runs.
    """
    broken = []
    n = 6 if tagged else 4
    for kind, has_start, has_stop in conditions:
        if kind == "empty":
            where = f"ns = ?{n + 1} AND ended IS NULL"
            n += 1
            if has_start:
                where += f" AND key >= ?{n + 1}"
                n += 1
            if has_stop:
                where += f" AND key < ?{n + 1}"
                n += 1
            broken.append(f"EXISTS (SELECT 1 FROM entries WHERE {where})")
        else:
            probe = (
                f"SELECT 1 FROM entries WHERE ns = ?{n + 1} AND key = ?{n + 2} AND ended IS NULL"
            )
            n += 2
            broken.append(("EXISTS" if kind == "absent" else "NOT EXISTS") + f" ({probe})")
    tags = (
        "excluded.tag_order, tag_group = excluded.tag_group" if tagged else "NULL, tag_group = NULL"
    )
    conflict = (
        "DO NOTHING"
        if if_absent
        else "DO UPDATE SET size = excluded.size, value = excluded.value, "
        f"tag_order = {tags} WHERE entries.id >= {_FLOOR}"
    )
    ns = f"CASE WHEN {' OR '.join(broken)} THEN NULL ELSE ?1 END" if broken else "?1"
    columns, values = (", tag_order, tag_group", ", ?5, ?6") if tagged else ("", "")
    return f"""
INSERT OR IGNORE INTO entries (id, ns, key, size, value{columns})
VALUES ({_NEXT_ID}, {ns}, ?2, ?3, ?4{values})
ON CONFLICT (ns, key) WHERE ended IS NULL
{conflict}
"""


PUT_ONE_WHEN_MAX: Final = 8
"""The most conditions :func:`put_one_when` checks in one statement."""


# -- paths 2 and 3: row by row inside a write transaction ----------------------
# PUT_FAST first; where it changed nothing (a snapshot needs the current
# row), END_OLD keeps that row for the snapshots and PUT inserts the new one.
END_OLD = f"""
UPDATE entries SET ended = {_EPOCH}
WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id < {_FLOOR}
"""
PUT = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value, tag_order = NULL, tag_group = NULL
"""
PUT_IF_ABSENT = f"""
INSERT INTO entries (id, ns, key, size, value) VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4)
ON CONFLICT (ns, key) WHERE ended IS NULL DO NOTHING
"""
# The same three for a row with tags, bound after the row: ?5 order, ?6 group
# (either NULL). A row without tags takes the statements above, whose
# overwrite clears any tags the key had.
PUT_FAST_TAGGED = f"""
INSERT INTO entries (id, ns, key, size, value, tag_order, tag_group)
VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value,
    tag_order = excluded.tag_order, tag_group = excluded.tag_group
WHERE entries.id >= {_FLOOR}
"""
PUT_TAGGED = f"""
INSERT INTO entries (id, ns, key, size, value, tag_order, tag_group)
VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (ns, key) WHERE ended IS NULL
DO UPDATE SET size = excluded.size, value = excluded.value,
    tag_order = excluded.tag_order, tag_group = excluded.tag_group
"""
PUT_IF_ABSENT_TAGGED = f"""
INSERT INTO entries (id, ns, key, size, value, tag_order, tag_group)
VALUES ({_NEXT_ID}, ?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (ns, key) WHERE ended IS NULL DO NOTHING
"""
# An ensured row's key is looked up first: it usually holds a value already.
EXISTS = "SELECT 1 FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL"


def empty_sql(has_start: bool, has_stop: bool) -> str:
    """Whether a key range of a namespace holds a live key (an ``Empty`` condition)."""
    where = "ns = ?1 AND ended IS NULL"
    if has_start:
        where += " AND key >= ?2"
    if has_stop:
        where += f" AND key < ?{3 if has_start else 2}"
    return f"SELECT 1 FROM entries WHERE {where} LIMIT 1"


EMPTY_SQL: Final = {
    (has_start, has_stop): empty_sql(has_start, has_stop)
    for has_start in (False, True)
    for has_stop in (False, True)
}

# -- deletes (inside a write transaction) -----------------------------------------
# A row created since the latest snapshot is deleted; an older one is ended,
# kept for the snapshots that see it.
DELETE_NEW = f"""
DELETE FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id >= {_FLOOR}
"""
END_LIVE = f"UPDATE entries SET ended = {_EPOCH} WHERE ns = ?1 AND key = ?2 AND ended IS NULL"


def _tag_where(tag: str, has_start: bool, has_stop: bool) -> str:
    # The tag's partial index: its WHERE repeated, so the planner can use it.
    column = f"tag_{tag}"
    where = f"ended IS NULL AND {column} IS NOT NULL"
    if has_start:
        where += f" AND {column} >= ?1"
    if has_stop:
        where += f" AND {column} < ?{2 if has_start else 1}"
    return where


_TAG_SHAPES: Final = [
    (tag, has_start, has_stop)
    for tag in ("order", "group")
    for has_start in (False, True)
    for has_stop in (False, True)
]
# Tag deletes, as prefix deletes: rows created since the latest snapshot are
# deleted, the rest ended. Bound: the start, then the stop, those not None.
TAG_DELETE_NEW_SQL: Final = {
    shape: f"DELETE FROM entries WHERE {_tag_where(*shape)} AND id >= {_FLOOR}"
    for shape in _TAG_SHAPES
}
TAG_END_SQL: Final = {
    shape: f"UPDATE entries SET ended = {_EPOCH} WHERE {_tag_where(*shape)}"
    for shape in _TAG_SHAPES
}
# tagged(): the bounds as for tag deletes, then the limit; read in order from
# the tag's index.
TAGGED_SQL: Final = {
    (*shape, reverse): (
        f"SELECT tag_{shape[0]}, ns, key FROM entries WHERE {_tag_where(*shape)} "
        f"ORDER BY tag_{shape[0]} {d}, ns {d}, key {d} LIMIT ?{1 + shape[1] + shape[2]}"
    )
    for shape in _TAG_SHAPES
    for reverse, d in ((False, "ASC"), (True, "DESC"))
}

# -- reads ---------------------------------------------------------------------
GET = "SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL"
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
    flag: f"SELECT ns, key, size, value, tag_order, tag_group FROM entries "
    f"WHERE {_prefix_where(flag)} ORDER BY ns, key"
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
# current row, when the former ended, and whether both hold the same bytes and tags.
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
SELECT was, cur, w.ended,
    coalesce(w.value = n.value AND w.tag_order IS n.tag_order AND w.tag_group IS n.tag_group, 0)
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
INSERT INTO entries (id, ns, key, size, value, tag_order, tag_group)
SELECT {_NEXT_ID}, ns, key, size, value, tag_order, tag_group FROM entries WHERE id = ?1
"""

SNAPSHOT_GET = """
SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended IS NULL AND id < ?3
UNION ALL
SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND ended > ?4 AND id < ?3
"""
SNAPSHOT_KEYS = """
SELECT ns, key FROM entries WHERE id < ?1 AND (ended IS NULL OR ended > ?2) ORDER BY ns, key
"""

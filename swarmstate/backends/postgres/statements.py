"""Every SQL statement PostgresStore runs; the schema they run on is in :mod:`.schema`.

Statements use ``{schema}`` for the schema identifier (quoted by
``psycopg.sql.Identifier``) and psycopg placeholders for every value. The
module-level statements suit every schema version, but ``READ_RANGE`` needs
version 3 (before it, ``RANGE_BEFORE_V3_*``); :data:`SINCE_V6` holds
the ones that replace them (or are new) from version 6 on: names longer than
the index holds, snapshot tokens. From version 6, names are passed to every
lookup in their index form and to every range or prefix as they are, and
keys and namespaces come back whole (see the schema's docstring).
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION_TABLE: Final = """
CREATE TABLE IF NOT EXISTS {schema}.migrations (
    v integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""

SETUP_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# Taken by a call that must not overlap a migration (setup() holds the lock
# above); shared, so such calls do not wait for each other.
SETUP_LOCK_SHARED: Final = "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))"
CREATE_SCHEMA: Final = "CREATE SCHEMA IF NOT EXISTS {schema}"
APPLIED_VERSION: Final = "SELECT coalesce(max(v), 0) FROM {schema}.migrations"
RECORD_VERSION: Final = "INSERT INTO {schema}.migrations (v) VALUES (%s)"

# -- reads -------------------------------------------------------------------

OPEN: Final = """
SELECT m.uid, (SELECT max(v) FROM {schema}.migrations) FROM {schema}.meta m"""

# Positional (ns, key): a point read, planned once per connection (its
# generic plan, the unique index lookup, costs what a custom one does).
GET: Final = """
SELECT value FROM {schema}.entries
WHERE ns = %b AND key = %b AND deleted_v IS NULL"""

# One index probe per pair whatever the statistics say: a join of the pairs
# with the table was planned as a hash join over every live row.
GET_MANY: Final = """
SELECT i.ord, e.value
FROM unnest(%(ns)b::bytea[], %(key)b::bytea[]) WITH ORDINALITY AS i(ns, key, ord)
CROSS JOIN LATERAL (
    SELECT value FROM {schema}.entries
    WHERE ns = i.ns AND key = i.key AND deleted_v IS NULL LIMIT 1
) e"""

# Positional (ns, start, stop, limit, descending, with values): see read_range.
READ_RANGE: Final = """
SELECT r_key, r_value FROM {schema}.read_range(%b, %b, %b, %s::bigint, %s, %s)"""

# Before version 3 (no read_range): the same ranges as plain statements.
RANGE_BEFORE_V3_ASC: Final = """
SELECT key, CASE WHEN %(values)s THEN value END FROM {schema}.entries
WHERE ns = %(ns)b AND deleted_v IS NULL AND key >= %(start)b AND key < %(stop)b
ORDER BY key ASC LIMIT %(limit)s::bigint"""

RANGE_BEFORE_V3_DESC: Final = """
SELECT key, CASE WHEN %(values)s THEN value END FROM {schema}.entries
WHERE ns = %(ns)b AND deleted_v IS NULL AND key >= %(start)b AND key < %(stop)b
ORDER BY key DESC LIMIT %(limit)s::bigint"""

# A loose index scan: one index probe per namespace, not one row per entry.
NAMESPACES: Final = """
WITH RECURSIVE walk(ns) AS (
    (SELECT ns FROM {schema}.entries
     WHERE deleted_v IS NULL AND ns >= %(lo)b AND ns < %(hi)b ORDER BY ns LIMIT 1)
    UNION ALL
    SELECT (SELECT e.ns FROM {schema}.entries e
            WHERE e.deleted_v IS NULL AND e.ns > w.ns AND e.ns < %(hi)b
            ORDER BY e.ns LIMIT 1)
    FROM walk w WHERE w.ns IS NOT NULL
)
SELECT ns FROM walk WHERE ns IS NOT NULL"""

COUNT: Final = """
SELECT count(*) FROM {schema}.entries WHERE ns = %(ns)b AND deleted_v IS NULL"""

LENGTH: Final = "SELECT total_count FROM {schema}.meta"

# -- writes ------------------------------------------------------------------
# Keyed writes are the functions created by the migrations: one statement,
# one round trip each. CLEAR and SNAPSHOT run after LOCK in one pipeline (one
# implicit transaction, one round trip): under READ COMMITTED the second
# statement's view is taken after the lock is granted, so it sees every
# write committed before it and none can commit while it runs.

LOCK: Final = "SELECT version FROM {schema}.meta FOR UPDATE"

# Positional: the conditions (ns, key, state, value arrays), then put_ensure's
# arguments; raises when a condition breaks, writing nothing (version 7).
PUT_CHECKED: Final = (
    "SELECT {schema}.put_checked(%b, %b, %s::smallint[], %b, %b, %b, %b, %b, %b, %b, %s)"
)

# Positional: store.write's conditions (kind, ns, key, value arrays), the
# prefixes' ranges, the pairs to delete, then the entries (as PUT_MANY_LONG,
# long forms last); returns {written, deleted}, raises when a condition
# breaks, writing nothing (version 9).
WRITE_ALL: Final = """
SELECT {schema}.write_all(%s::smallint[], %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %s, %b, %b)"""

# Positional: WRITE_ALL's conditions, prefix ranges and pairs, the tag ranges
# (tag 0 order / 1 group, lows, highs), then the entries with their long
# forms and tags (version 10).
WRITE_TAGGED: Final = """
SELECT {schema}.write_tagged(%s::smallint[], %b, %b, %b, %b, %b, %b, %b,
    %s::smallint[], %b, %b, %b, %b, %b, %s, %b, %b, %b, %b)"""


def _tagged_sql(column: str, direction: str, by_full_names: bool) -> str:
    # The tag's index gives (tag, index forms) order; by_full_names sorts by
    # the names themselves, for a page holding a name longer than HEAD_BYTES.
    full = ("coalesce(ns_long, ns)", "coalesce(key_long, key)")
    names = ", ".join(full)
    order = full if by_full_names else ("ns", "key")
    keys = ", ".join(f"{part} {direction}" for part in (column, *order))
    return f"""
SELECT {column}, {names}, octet_length(ns) > 1024 OR octet_length(key) > 1024
FROM {{schema}}.entries
WHERE deleted_v IS NULL AND {column} IS NOT NULL AND {column} >= %b AND {column} < %b
ORDER BY {keys} LIMIT %s::bigint"""


# Positional (start, stop, limit): tagged() (version 10), by tag and direction.
TAGGED_ORDER_ASC: Final = _tagged_sql("tag_order", "ASC", False)
TAGGED_ORDER_DESC: Final = _tagged_sql("tag_order", "DESC", False)
TAGGED_GROUP_ASC: Final = _tagged_sql("tag_group", "ASC", False)
TAGGED_GROUP_DESC: Final = _tagged_sql("tag_group", "DESC", False)
TAGGED_ORDER_ASC_SORTED: Final = _tagged_sql("tag_order", "ASC", True)
TAGGED_ORDER_DESC_SORTED: Final = _tagged_sql("tag_order", "DESC", True)
TAGGED_GROUP_ASC_SORTED: Final = _tagged_sql("tag_group", "ASC", True)
TAGGED_GROUP_DESC_SORTED: Final = _tagged_sql("tag_group", "DESC", True)

# Positional parameters (ns, key, value, if_absent): the hottest statement,
# and a tuple is cheaper to adapt than a dict.
PUT_MANY: Final = "SELECT {schema}.put_many(%b, %b, %b, %s)"

# One entry (every checkpoint put): the same function, its one-element arrays
# built by the server. Three bytes parameters adapt in ~1 µs; three Python
# lists adapted as binary arrays cost ~13 µs of client CPU per call.
PUT_ONE: Final = """
SELECT {schema}.put_many(ARRAY[%b::bytea], ARRAY[%b::bytea], ARRAY[%b::bytea], false)"""

# Ensured entries then items, as arrays (large batches); small ones use a
# statement with server-built arrays (put_ensure_sql), cheaper to adapt.
PUT_ENSURE: Final = "SELECT {schema}.put_ensure(%b, %b, %b, %b, %b, %b, %s)"


def put_ensure_sql(ensured: int, items: int) -> str:
    """``put_ensure`` for ``ensured`` + ``items`` entries, one bytes parameter each.

    The parameters are the ensured entries' namespaces, keys and values, then
    the items', then ``if_absent``; ``{schema}`` is still to be filled.
    """

    def array(n: int) -> str:
        # An empty array literal; its braces doubled for the format step.
        return "ARRAY[" + ", ".join(["%b::bytea"] * n) + "]" if n else "'{{}}'::bytea[]"

    arrays = [array(ensured)] * 3 + [array(items)] * 3
    return f"SELECT {{schema}}.put_ensure({', '.join(arrays)}, %s)"


def put_checked_sql(conditions: int, ensured: int, items: int) -> str:
    """``put_checked`` for a small batch, one parameter per value (as :func:`put_ensure_sql`).

    The parameters: the conditions' namespaces, keys, states and expected
    bytes, then the ensured entries', then the items', then ``if_absent``.
    """

    def array(n: int, kind: str = "bytea", placeholder: str = "%b") -> str:
        if not n:
            return f"'{{{{}}}}'::{kind}[]"
        return "ARRAY[" + ", ".join([f"{placeholder}::{kind}"] * n) + "]"

    arrays = [array(conditions)] * 2 + [array(conditions, "smallint", "%s"), array(conditions)]
    arrays += [array(ensured)] * 3 + [array(items)] * 3
    return f"SELECT {{schema}}.put_checked({', '.join(arrays)}, %s)"


REMOVE_MANY: Final = "SELECT {schema}.remove_many(%(ns)b, %(key)b)"

REMOVE_RANGE: Final = "SELECT {schema}.remove_range(%(lo)b, %(hi)b)"

COPY_RANGE: Final = "SELECT {schema}.copy_range(%(lo)b, %(hi)b, %(target)b, %(cut)s::integer)"

# Delete the live rows created at the current version (no snapshot sees
# them); mark the older ones deleted for the snapshots that still do.
CLEAR: Final = """
WITH cur AS (SELECT version FROM {schema}.meta),
gone AS (
    DELETE FROM {schema}.entries e USING cur
    WHERE e.deleted_v IS NULL AND e.created_v = cur.version
),
sealed AS (
    UPDATE {schema}.entries e SET deleted_v = cur.version FROM cur
    WHERE e.deleted_v IS NULL AND e.created_v < cur.version
)
UPDATE {schema}.meta SET total_count = 0, total_bytes = 0
RETURNING 0"""

# -- snapshots ---------------------------------------------------------------

SNAPSHOT: Final = """
WITH m AS (SELECT * FROM {schema}.meta),
snap AS (
    INSERT INTO {schema}.snapshots (id, version, parent, taken_at, entry_count, size_bytes)
    SELECT next_snapshot, version, head, extract(epoch FROM clock_timestamp()),
           total_count, total_bytes
    FROM m
    RETURNING id, parent, taken_at, size_bytes, entry_count, version
),
moved AS (
    UPDATE {schema}.meta SET version = version + 1, next_snapshot = next_snapshot + 1,
        head = (SELECT id FROM snap)
)
SELECT id, parent, taken_at, size_bytes, entry_count, version FROM snap"""

# Evict all but the newest %(keep)s snapshots, then drop the row versions no
# retained snapshot can see: with consecutive snapshot versions, those are
# exactly the rows deleted at or before the oldest retained version.
EVICT: Final = """
WITH newest AS (SELECT max(id) AS id FROM {schema}.snapshots),
evicted AS (
    DELETE FROM {schema}.snapshots s USING newest
    WHERE s.id <= newest.id - %(keep)s::bigint
),
floor AS (
    SELECT min(s.version) AS v FROM {schema}.snapshots s, newest
    WHERE s.id > newest.id - %(keep)s::bigint
)
DELETE FROM {schema}.entries e USING floor
WHERE e.deleted_v IS NOT NULL AND e.deleted_v <= floor.v"""

SNAPSHOTS: Final = """
SELECT id, parent, taken_at, size_bytes, entry_count, version
FROM {schema}.snapshots ORDER BY id"""

# (retained, has the handle's token): without tokens, both the same count.
IS_LIVE: Final = """
SELECT count(*), count(*)
FROM {schema}.snapshots WHERE id = %(id)s::bigint AND version = %(v)s::bigint"""

_LIVE: Final = """EXISTS (
    SELECT 1 FROM {schema}.snapshots WHERE id = %(id)s::bigint AND version = %(v)s::bigint
)"""

SNAPSHOT_GET: Final = (
    """
SELECT value FROM {schema}.entries
WHERE ns = %(ns)b AND key = %(key)b AND created_v <= %(v)s::bigint
  AND (deleted_v IS NULL OR deleted_v > %(v)s::bigint) AND """
    + _LIVE
)

SNAPSHOT_KEYS: Final = (
    """
SELECT ns, key FROM {schema}.entries
WHERE created_v <= %(v)s::bigint AND (deleted_v IS NULL OR deleted_v > %(v)s::bigint) AND """
    + _LIVE
    + " ORDER BY ns, key"
)

# Rows whose visibility differs between versions lo < hi were created or
# deleted in (lo, hi]. Among them, the row visible at lo was deleted in that
# range, and the row visible at hi was created in it and outlived it.
SNAPSHOT_DIFF: Final = """
WITH live AS (
    SELECT count(*) AS c FROM {schema}.snapshots
    WHERE (id = %(id1)s::bigint AND version = %(v1)s::bigint)
       OR (id = %(id2)s::bigint AND version = %(v2)s::bigint)
),
cand AS (
    SELECT ns, key, created_v, deleted_v, value FROM {schema}.entries, live
    WHERE live.c = %(need)s::bigint
      AND ((created_v > %(lo)s::bigint AND created_v <= %(hi)s::bigint)
        OR (deleted_v > %(lo)s::bigint AND deleted_v <= %(hi)s::bigint))
),
at_lo AS (SELECT ns, key, value FROM cand WHERE created_v <= %(lo)s::bigint),
at_hi AS (
    SELECT ns, key, value FROM cand
    WHERE created_v > %(lo)s::bigint AND (deleted_v IS NULL OR deleted_v > %(hi)s::bigint)
)
SELECT coalesce(a.ns, b.ns), coalesce(a.key, b.key), a.ns IS NOT NULL, b.ns IS NOT NULL
FROM at_lo a FULL JOIN at_hi b ON a.ns = b.ns AND a.key = b.key
WHERE a.ns IS NULL OR b.ns IS NULL OR a.value <> b.value"""

RESTORE: Final = "SELECT {schema}.restore_to(%(id)s::bigint, %(v)s::bigint)"


# -- from schema version 6 on -----------------------------------------------------

SINCE_V6: Final[dict[str, str]] = {
    # The walk visits index forms in order; the full names come back sorted.
    # Each step is bounded by index forms only, and the full names are
    # filtered after the walk: with the full-name filter inside the step, the
    # planner estimated one row and read every later entry of the range, a
    # bitmap scan sorted per step, instead of one index probe (5 s against
    # 27 ms for 2,000 namespaces under a thread of 3,000 checkpoints).
    "NAMESPACES": """
WITH RECURSIVE walk(ns, ns_long) AS (
    (SELECT ns, ns_long FROM {schema}.entries
     WHERE deleted_v IS NULL
       AND ns >= substring(%(lo)b FROM 1 FOR 1024)
       AND ns < substring(%(hi)b FROM 1 FOR 1024)
           || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
     ORDER BY ns LIMIT 1)
    UNION ALL
    SELECT n.ns, n.ns_long FROM walk w CROSS JOIN LATERAL (
        SELECT e.ns, e.ns_long FROM {schema}.entries e
        WHERE e.deleted_v IS NULL AND e.ns > w.ns
          AND e.ns < substring(%(hi)b FROM 1 FOR 1024)
              || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
        ORDER BY e.ns LIMIT 1
    ) n
)
SELECT coalesce(ns_long, ns) AS name FROM walk
WHERE coalesce(ns_long, ns) >= %(lo)b AND coalesce(ns_long, ns) < %(hi)b
ORDER BY name""",
    # A page of keys holding one longer than HEAD_BYTES, read again sorted by
    # the full keys (the index orders index forms).
    "READ_RANGE_SORTED_ASC": """
SELECT coalesce(e.key_long, e.key), CASE WHEN %(values)s THEN e.value END
FROM {schema}.entries e
WHERE e.ns = %(ns)b AND e.deleted_v IS NULL
  AND e.key >= substring(%(start)b FROM 1 FOR 1024)
  AND e.key < substring(%(stop)b FROM 1 FOR 1024)
      || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
  AND coalesce(e.key_long, e.key) >= %(start)b AND coalesce(e.key_long, e.key) < %(stop)b
ORDER BY coalesce(e.key_long, e.key) ASC LIMIT %(limit)s::bigint""",
    "READ_RANGE_SORTED_DESC": """
SELECT coalesce(e.key_long, e.key), CASE WHEN %(values)s THEN e.value END
FROM {schema}.entries e
WHERE e.ns = %(ns)b AND e.deleted_v IS NULL
  AND e.key >= substring(%(start)b FROM 1 FOR 1024)
  AND e.key < substring(%(stop)b FROM 1 FOR 1024)
      || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
  AND coalesce(e.key_long, e.key) >= %(start)b AND coalesce(e.key_long, e.key) < %(stop)b
ORDER BY coalesce(e.key_long, e.key) DESC LIMIT %(limit)s::bigint""",
    # Batches holding a long name: put_many and put_ensure with the long forms.
    "PUT_ONE_LONG": """
SELECT {schema}.put_many(ARRAY[%b::bytea], ARRAY[%b::bytea], ARRAY[%b::bytea], false,
                         ARRAY[%b::bytea], ARRAY[%b::bytea])""",
    "PUT_MANY_LONG": "SELECT {schema}.put_many(%b, %b, %b, %s, %b, %b)",
    "PUT_ENSURE_LONG": "SELECT {schema}.put_ensure(%b, %b, %b, %b, %b, %b, %b, %b, %s, %b, %b)",
    "SNAPSHOT": """
WITH m AS (SELECT * FROM {schema}.meta),
snap AS (
    INSERT INTO {schema}.snapshots (id, version, parent, taken_at, entry_count, size_bytes, token)
    SELECT next_snapshot, version, head, extract(epoch FROM clock_timestamp()),
           total_count, total_bytes, %(token)s::bigint
    FROM m
    RETURNING id, parent, taken_at, size_bytes, entry_count, version
),
moved AS (
    UPDATE {schema}.meta SET version = version + 1, next_snapshot = next_snapshot + 1,
        head = (SELECT id FROM snap)
)
SELECT id, parent, taken_at, size_bytes, entry_count, version FROM snap""",
    "SNAPSHOTS": """
SELECT id, parent, taken_at, size_bytes, entry_count, version, token
FROM {schema}.snapshots ORDER BY id""",
    "IS_LIVE": """
SELECT count(*), count(*) FILTER (WHERE token IS NOT DISTINCT FROM %(t)s::bigint)
FROM {schema}.snapshots WHERE id = %(id)s::bigint AND version = %(v)s::bigint""",
    "SNAPSHOT_GET": """
SELECT value FROM {schema}.entries
WHERE ns = %(ns)b AND key = %(key)b AND created_v <= %(v)s::bigint
  AND (deleted_v IS NULL OR deleted_v > %(v)s::bigint) AND EXISTS (
    SELECT 1 FROM {schema}.snapshots WHERE id = %(id)s::bigint AND version = %(v)s::bigint
      AND token IS NOT DISTINCT FROM %(t)s::bigint
)""",
    "SNAPSHOT_KEYS": """
SELECT coalesce(ns_long, ns), coalesce(key_long, key) FROM {schema}.entries
WHERE created_v <= %(v)s::bigint AND (deleted_v IS NULL OR deleted_v > %(v)s::bigint)
  AND EXISTS (
    SELECT 1 FROM {schema}.snapshots WHERE id = %(id)s::bigint AND version = %(v)s::bigint
      AND token IS NOT DISTINCT FROM %(t)s::bigint
) ORDER BY 1, 2""",
    "SNAPSHOT_DIFF": """
WITH live AS (
    SELECT count(*) AS c FROM {schema}.snapshots
    WHERE (id = %(id1)s::bigint AND version = %(v1)s::bigint
           AND token IS NOT DISTINCT FROM %(t1)s::bigint)
       OR (id = %(id2)s::bigint AND version = %(v2)s::bigint
           AND token IS NOT DISTINCT FROM %(t2)s::bigint)
),
cand AS (
    SELECT ns, key, ns_long, key_long, created_v, deleted_v, value FROM {schema}.entries, live
    WHERE live.c = %(need)s::bigint
      AND ((created_v > %(lo)s::bigint AND created_v <= %(hi)s::bigint)
        OR (deleted_v > %(lo)s::bigint AND deleted_v <= %(hi)s::bigint))
),
at_lo AS (SELECT ns, key, ns_long, key_long, value FROM cand WHERE created_v <= %(lo)s::bigint),
at_hi AS (
    SELECT ns, key, ns_long, key_long, value FROM cand
    WHERE created_v > %(lo)s::bigint AND (deleted_v IS NULL OR deleted_v > %(hi)s::bigint)
)
SELECT coalesce(a.ns_long, b.ns_long, a.ns, b.ns), coalesce(a.key_long, b.key_long, a.key, b.key),
       a.ns IS NOT NULL, b.ns IS NOT NULL
FROM at_lo a FULL JOIN at_hi b ON a.ns = b.ns AND a.key = b.key
WHERE a.ns IS NULL OR b.ns IS NULL OR a.value <> b.value""",
    # restore_to runs only for a snapshot this schema took (its token matches).
    "RESTORE": """
SELECT {schema}.restore_to(%(id)s::bigint, %(v)s::bigint) FROM {schema}.snapshots
WHERE id = %(id)s::bigint AND version = %(v)s::bigint
  AND token IS NOT DISTINCT FROM %(t)s::bigint""",
}

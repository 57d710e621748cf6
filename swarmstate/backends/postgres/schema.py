"""PostgresStore's schema in force, whole: its tables, indexes and functions as they are now.

``setup()`` creates a new schema from :data:`CREATE`, in order; a schema of an
earlier version is brought here by :mod:`.migrations`. Every statement uses
``{schema}`` for the schema's identifier (quoted by
``psycopg.sql.Identifier``, so a literal brace is doubled: ``'{{}}'`` is an
empty array).

Tables (one schema per store, named by the ``schema=`` option):

``entries(ns, key, created_v, deleted_v, value, ns_long, key_long, tag_order, tag_group)``
    One row per value version. ``ns``/``key`` hold the UTF-8 bytes of the
    names (``bytea``: byte order is code point order, and unlike ``text`` it
    holds U+0000), or a long name's *index form* (below). A row is live
    while ``deleted_v`` is NULL; the snapshot taken at version ``s`` sees it
    when ``created_v <= s < deleted_v``. ``tag_order``/``tag_group`` hold
    the entry's tags (UTF-8 bytes, NULL: none) on its own row, so each row
    version keeps the tags it was written with; ``entries_order`` and
    ``entries_group`` index live tagged rows by ``(tag, ns, key)``.
``meta`` (one row)
    The store's uid, the version writes are stamped with, the snapshot id
    counter, the head snapshot and running totals (count, bytes), so a
    snapshot is one row insert. Every writer locks this row first, which
    serializes writers and fixes the version of its transaction.
``snapshots(id, version, parent, taken_at, entry_count, size_bytes, token)``
    The retained snapshots, shared by every process. ``token`` is random per
    snapshot: a handle carries it, and a snapshot is used only where the row
    with its id also has its token (a restored dump of the schema refuses
    the snapshots the original takes later).
``migrations(v, applied_at)``
    The versions applied (created by ``setup()`` before anything else).

Writes stamp rows with the current version ``V``. Replacing or deleting a
live row created at ``V`` (no snapshot can see it) deletes it; one created
before ``V`` is kept for the snapshots and marked ``deleted_v = V``. A
snapshot records ``V`` and moves the store to ``V + 1``.

Names of any length. A btree index row holds at most ~2.7 kB, so a
namespace plus key longer than that could not be indexed: the ``ns`` and
``key`` columns hold each name's index form, the name itself when it has at
most :data:`HEAD_BYTES` bytes (nearly always), else its first
:data:`HEAD_BYTES` bytes followed by its SHA-256, with the whole name in
``ns_long``/``key_long``. The index form identifies a name (a short one
exactly, a long one by its digest, and the two never have the same length),
so ``entries_live`` keeps one live row per key, and short names are found
by the statements that know nothing of long ones. It also orders names as
the names themselves, except two longer than :data:`HEAD_BYTES` that share
their first bytes: a page holding such a key is read again, sorted by the
full keys, and bounds or prefixes that long are compared in full (in the
functions below, ``x >= substring(lo FROM 1 FOR 1024) AND x <
substring(hi FROM 1 FOR 1024) || 33 bytes of 0xff`` scans the index forms
every name in ``[lo, hi)`` can have, then the full names are compared).

The writes are functions, so that a batch is one statement and one round
trip. Key by key, every statement in them is a point lookup on
``entries_live`` whatever the table statistics say (one set-based statement
got a sequential-scan generic plan on small tables); a prefix's removal
(``remove_range``) is set-based over its range of ``entries_live``, as its
reads were. In READ COMMITTED each
statement of a volatile function reads a fresh view, so the rows read after
the ``meta`` lock are current. A checkpoint's write is ``put_checked``
(conditions), which calls ``put_ensure`` (entries written only where
absent), which calls ``put_many`` (the entries). ``store.write`` is
``write_all`` (conditions, then ``remove_range``, ``remove_many`` and
``put_many``); a transaction with tags is ``write_tagged`` (``write_all``
without its sets, the tag ranges' ``remove_many``, then ``put_many`` with
the tags). A write without tags clears the tags of every row it overwrites.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CREATE",
    "FUNCTIONS",
    "HEAD_BYTES",
    "REQUIRE_SQLSTATE",
    "SCHEMA_VERSION",
    "TABLES",
    "TAG_COLUMNS",
    "VALUES_LZ4",
]

SCHEMA_VERSION: Final = 11
"""The version a schema has after ``setup()`` with this code."""

HEAD_BYTES: Final = 1024
"""Bytes of a name its index form keeps before the digest."""

REQUIRE_SQLSTATE: Final = "SWRQ1"
"""What ``put_checked`` raises when a condition does not hold."""

# -- tables and indexes --------------------------------------------------------

META: Final = """
CREATE TABLE {schema}.meta (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    uid text NOT NULL,
    version bigint NOT NULL,
    next_snapshot bigint NOT NULL,
    head bigint,
    total_count bigint NOT NULL,
    total_bytes bigint NOT NULL
)"""

META_ROW: Final = """
INSERT INTO {schema}.meta (uid, version, next_snapshot, head, total_count, total_bytes)
VALUES (replace(gen_random_uuid()::text, '-', ''), 1, 1, NULL, 0, 0)"""

ENTRIES: Final = """
CREATE TABLE {schema}.entries (
    ns bytea NOT NULL,
    key bytea NOT NULL,
    created_v bigint NOT NULL,
    deleted_v bigint,
    value bytea NOT NULL,
    ns_long bytea,
    key_long bytea,
    tag_order bytea,
    tag_group bytea
)"""

# Values compress with lz4. A value over ~2 kB (a checkpoint is ~12 kB) is
# compressed before it is moved out of line; pglz, the server default, spends
# ~165 µs of server CPU per 12 kB msgpack checkpoint only to give up (it keeps
# a result only if it saves 25%), which was ~20% of a durable put. lz4 costs a
# few µs and keeps whatever it saves. Servers before 14 or built without lz4
# keep pglz. The table is named through its row type so the schema name is
# never put in a literal.
VALUES_LZ4: Final = """
DO $do$
DECLARE
    t regclass;
BEGIN
    IF current_setting('server_version_num')::integer < 140000 THEN
        RETURN;
    END IF;
    SELECT typrelid::regclass INTO t
    FROM pg_type WHERE oid = pg_typeof(NULL::{schema}.entries);
    EXECUTE format('ALTER TABLE %s ALTER COLUMN value SET COMPRESSION lz4', t);
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$do$"""

# The hot path: point reads, ordered ranges, latest, prefix scans.
ENTRIES_LIVE: Final = """
CREATE UNIQUE INDEX entries_live ON {schema}.entries (ns, key) WHERE deleted_v IS NULL"""
# Snapshot reads of keys changed since the snapshot.
ENTRIES_DEAD: Final = """
CREATE INDEX entries_dead ON {schema}.entries (ns, key, created_v) WHERE deleted_v IS NOT NULL"""
# Restore and diff find the rows changed between two versions with these two.
ENTRIES_CREATED: Final = """
CREATE INDEX entries_created ON {schema}.entries (created_v)"""
ENTRIES_DELETED: Final = """
CREATE INDEX entries_deleted ON {schema}.entries (deleted_v) WHERE deleted_v IS NOT NULL"""

# tagged() and tag deletes, in tag order; rows without the tag are in neither.
ENTRIES_ORDER: Final = """
CREATE INDEX entries_order ON {schema}.entries (tag_order, ns, key)
WHERE deleted_v IS NULL AND tag_order IS NOT NULL"""
ENTRIES_GROUP: Final = """
CREATE INDEX entries_group ON {schema}.entries (tag_group, ns, key)
WHERE deleted_v IS NULL AND tag_group IS NOT NULL"""
TAG_COLUMNS: Final = """
ALTER TABLE {schema}.entries ADD COLUMN tag_order bytea, ADD COLUMN tag_group bytea"""
"""Version 10's table step, before its two indexes."""

SNAPSHOTS: Final = """
CREATE TABLE {schema}.snapshots (
    id bigint PRIMARY KEY,
    version bigint NOT NULL,
    parent bigint,
    taken_at double precision NOT NULL,
    entry_count bigint NOT NULL,
    size_bytes bigint NOT NULL,
    token bigint
)"""

TABLES: Final = (
    META,
    META_ROW,
    ENTRIES,
    VALUES_LZ4,
    ENTRIES_LIVE,
    ENTRIES_DEAD,
    ENTRIES_CREATED,
    ENTRIES_DELETED,
    ENTRIES_ORDER,
    ENTRIES_GROUP,
    SNAPSHOTS,
)
"""The tables, their first row and their indexes, in the order they are created."""

# -- functions: writes ---------------------------------------------------------

# Writes a batch of distinct keys whose names are their index forms (no long
# name). The meta row is locked by the UPDATE that adds the batch's totals as
# if every key were new, and all keys go in with one INSERT: every key new (as
# with each checkpoint) costs these two statements. Only keys that already
# exist take the key-by-key path, which then corrects the totals.
PUT_MANY: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_many(
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint := coalesce(cardinality(p_ns), 0);
    v bigint;
    got bigint;
    new_ns bytea[];
    new_key bytea[];
    i integer;
    old_v bigint;
    old_n bigint;
    new_n bigint;
    d_count bigint;
    d_bytes bigint := 0;
    written bigint;
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    UPDATE {schema}.meta
    SET total_count = total_count + n,
        total_bytes = total_bytes
            + (SELECT coalesce(sum(octet_length(x)), 0) FROM unnest(p_value) AS x)
    RETURNING version INTO v;
    WITH ins AS (
        INSERT INTO {schema}.entries (ns, key, created_v, value)
        SELECT u.ns, u.key, v, u.value
        FROM unnest(p_ns, p_key, p_value) AS u(ns, key, value)
        ON CONFLICT (ns, key) WHERE deleted_v IS NULL DO NOTHING
        RETURNING ns, key
    )
    SELECT count(*), array_agg(ns), array_agg(key) INTO got, new_ns, new_key FROM ins;
    IF got = n THEN
        RETURN n;
    END IF;
    -- Some keys exist: none of them adds to the count, and each
    -- replaces (or, with p_if_absent, keeps) its old value.
    d_count := got - n;
    written := got;
    FOR i IN
        SELECT u.ord::integer
        FROM unnest(p_ns, p_key) WITH ORDINALITY AS u(ns, key, ord)
        WHERE NOT EXISTS (
            SELECT 1 FROM unnest(new_ns, new_key) AS g(ns, key)
            WHERE g.ns = u.ns AND g.key = u.key
        )
        ORDER BY u.ord
    LOOP
        new_n := octet_length(p_value[i]);
        IF p_if_absent THEN
            d_bytes := d_bytes - new_n;
            CONTINUE;
        END IF;
        SELECT created_v, octet_length(value) INTO old_v, old_n
        FROM {schema}.entries
        WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        IF old_v = v THEN
            -- No snapshot can see the old value: replace it in place.
            UPDATE {schema}.entries SET value = p_value[i], tag_order = NULL, tag_group = NULL
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        ELSE
            UPDATE {schema}.entries SET deleted_v = v
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
            INSERT INTO {schema}.entries (ns, key, created_v, value)
            VALUES (p_ns[i], p_key[i], v, p_value[i]);
        END IF;
        d_bytes := d_bytes - old_n;
        written := written + 1;
    END LOOP;
    UPDATE {schema}.meta
    SET total_count = total_count + d_count, total_bytes = total_bytes + d_bytes;
    RETURN written;
END
$fn$"""

# put_many for a batch holding a long name: the same, with the long forms
# beside the index forms (NULL where a name is short).
PUT_MANY_LONG: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_many(
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean,
    p_ns_long bytea[], p_key_long bytea[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint := coalesce(cardinality(p_ns), 0);
    v bigint;
    got bigint;
    new_ns bytea[];
    new_key bytea[];
    i integer;
    old_v bigint;
    old_n bigint;
    new_n bigint;
    d_count bigint;
    d_bytes bigint := 0;
    written bigint;
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    UPDATE {schema}.meta
    SET total_count = total_count + n,
        total_bytes = total_bytes
            + (SELECT coalesce(sum(octet_length(x)), 0) FROM unnest(p_value) AS x)
    RETURNING version INTO v;
    WITH ins AS (
        INSERT INTO {schema}.entries (ns, key, ns_long, key_long, created_v, value)
        SELECT u.ns, u.key, u.ns_long, u.key_long, v, u.value
        FROM unnest(p_ns, p_key, p_ns_long, p_key_long, p_value)
            AS u(ns, key, ns_long, key_long, value)
        ON CONFLICT (ns, key) WHERE deleted_v IS NULL DO NOTHING
        RETURNING ns, key
    )
    SELECT count(*), array_agg(ns), array_agg(key) INTO got, new_ns, new_key FROM ins;
    IF got = n THEN
        RETURN n;
    END IF;
    -- Some keys exist: none of them adds to the count, and each
    -- replaces (or, with p_if_absent, keeps) its old value.
    d_count := got - n;
    written := got;
    FOR i IN
        SELECT u.ord::integer
        FROM unnest(p_ns, p_key) WITH ORDINALITY AS u(ns, key, ord)
        WHERE NOT EXISTS (
            SELECT 1 FROM unnest(new_ns, new_key) AS g(ns, key)
            WHERE g.ns = u.ns AND g.key = u.key
        )
        ORDER BY u.ord
    LOOP
        new_n := octet_length(p_value[i]);
        IF p_if_absent THEN
            d_bytes := d_bytes - new_n;
            CONTINUE;
        END IF;
        SELECT created_v, octet_length(value) INTO old_v, old_n
        FROM {schema}.entries
        WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        IF old_v = v THEN
            -- No snapshot can see the old value: replace it in place.
            UPDATE {schema}.entries SET value = p_value[i], tag_order = NULL, tag_group = NULL
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        ELSE
            UPDATE {schema}.entries SET deleted_v = v
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
            INSERT INTO {schema}.entries (ns, key, ns_long, key_long, created_v, value)
            VALUES (p_ns[i], p_key[i], p_ns_long[i], p_key_long[i], v, p_value[i]);
        END IF;
        d_bytes := d_bytes - old_n;
        written := written + 1;
    END LOOP;
    UPDATE {schema}.meta
    SET total_count = total_count + d_count, total_bytes = total_bytes + d_bytes;
    RETURN written;
END
$fn$"""

# put_many with each entry's tags (order, group: NULL where it has none),
# which the entry's row takes in place of any it had.
PUT_MANY_TAGGED: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_many(
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean,
    p_ns_long bytea[], p_key_long bytea[], p_order bytea[], p_group bytea[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint := coalesce(cardinality(p_ns), 0);
    v bigint;
    got bigint;
    new_ns bytea[];
    new_key bytea[];
    i integer;
    old_v bigint;
    old_n bigint;
    new_n bigint;
    d_count bigint;
    d_bytes bigint := 0;
    written bigint;
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    UPDATE {schema}.meta
    SET total_count = total_count + n,
        total_bytes = total_bytes
            + (SELECT coalesce(sum(octet_length(x)), 0) FROM unnest(p_value) AS x)
    RETURNING version INTO v;
    WITH ins AS (
        INSERT INTO {schema}.entries
            (ns, key, ns_long, key_long, created_v, value, tag_order, tag_group)
        SELECT u.ns, u.key, u.ns_long, u.key_long, v, u.value, u.tag_order, u.tag_group
        FROM unnest(p_ns, p_key, p_ns_long, p_key_long, p_value, p_order, p_group)
            AS u(ns, key, ns_long, key_long, value, tag_order, tag_group)
        ON CONFLICT (ns, key) WHERE deleted_v IS NULL DO NOTHING
        RETURNING ns, key
    )
    SELECT count(*), array_agg(ns), array_agg(key) INTO got, new_ns, new_key FROM ins;
    IF got = n THEN
        RETURN n;
    END IF;
    -- Some keys exist: none of them adds to the count, and each
    -- replaces (or, with p_if_absent, keeps) its old value.
    d_count := got - n;
    written := got;
    FOR i IN
        SELECT u.ord::integer
        FROM unnest(p_ns, p_key) WITH ORDINALITY AS u(ns, key, ord)
        WHERE NOT EXISTS (
            SELECT 1 FROM unnest(new_ns, new_key) AS g(ns, key)
            WHERE g.ns = u.ns AND g.key = u.key
        )
        ORDER BY u.ord
    LOOP
        new_n := octet_length(p_value[i]);
        IF p_if_absent THEN
            d_bytes := d_bytes - new_n;
            CONTINUE;
        END IF;
        SELECT created_v, octet_length(value) INTO old_v, old_n
        FROM {schema}.entries
        WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        IF old_v = v THEN
            -- No snapshot can see the old value: replace it in place.
            UPDATE {schema}.entries
            SET value = p_value[i], tag_order = p_order[i], tag_group = p_group[i]
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        ELSE
            UPDATE {schema}.entries SET deleted_v = v
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
            INSERT INTO {schema}.entries
                (ns, key, ns_long, key_long, created_v, value, tag_order, tag_group)
            VALUES (p_ns[i], p_key[i], p_ns_long[i], p_key_long[i], v, p_value[i],
                    p_order[i], p_group[i]);
        END IF;
        d_bytes := d_bytes - old_n;
        written := written + 1;
    END LOOP;
    UPDATE {schema}.meta
    SET total_count = total_count + d_count, total_bytes = total_bytes + d_bytes;
    RETURN written;
END
$fn$"""

# set_many(items, ensure=...): entries written only where their key has no
# live value, then the items. The ensured keys are checked under the store's
# lock, so a concurrent delete cannot slip between the check and the write.
# When they all exist (the usual case: a run index entry written once) this
# is one lookup each and one put_many of the items: no write for them.
PUT_ENSURE: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_ensure(
    e_ns bytea[], e_key bytea[], e_value bytea[],
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    m_ns bytea[] := '{{}}';
    m_key bytea[] := '{{}}';
    m_value bytea[] := '{{}}';
    ensured bigint := 0;
BEGIN
    PERFORM 1 FROM {schema}.meta FOR UPDATE;
    -- Key by key: each lookup is planned on the unique index, whatever
    -- the statistics (a set-based anti join was planned with a scan).
    FOR i IN 1 .. coalesce(cardinality(e_ns), 0) LOOP
        PERFORM 1 FROM {schema}.entries
        WHERE ns = e_ns[i] AND key = e_key[i] AND deleted_v IS NULL;
        IF NOT FOUND THEN
            m_ns := m_ns || e_ns[i];
            m_key := m_key || e_key[i];
            m_value := m_value || e_value[i];
        END IF;
    END LOOP;
    IF cardinality(m_ns) > 0 THEN
        ensured := {schema}.put_many(m_ns, m_key, m_value, true);
    END IF;
    RETURN ensured + {schema}.put_many(p_ns, p_key, p_value, p_if_absent);
END
$fn$"""

# put_ensure for a batch holding a long name: the long forms go along.
PUT_ENSURE_LONG: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_ensure(
    e_ns bytea[], e_key bytea[], e_value bytea[], e_ns_long bytea[], e_key_long bytea[],
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean,
    p_ns_long bytea[], p_key_long bytea[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    m_ns bytea[] := '{{}}';
    m_key bytea[] := '{{}}';
    m_value bytea[] := '{{}}';
    m_ns_long bytea[] := '{{}}';
    m_key_long bytea[] := '{{}}';
    ensured bigint := 0;
BEGIN
    PERFORM 1 FROM {schema}.meta FOR UPDATE;
    -- Key by key: each lookup is planned on the unique index, whatever
    -- the statistics (a set-based anti join was planned with a scan).
    FOR i IN 1 .. coalesce(cardinality(e_ns), 0) LOOP
        PERFORM 1 FROM {schema}.entries
        WHERE ns = e_ns[i] AND key = e_key[i] AND deleted_v IS NULL;
        IF NOT FOUND THEN
            m_ns := m_ns || e_ns[i];
            m_key := m_key || e_key[i];
            m_value := m_value || e_value[i];
            m_ns_long := m_ns_long || e_ns_long[i];
            m_key_long := m_key_long || e_key_long[i];
        END IF;
    END LOOP;
    IF cardinality(m_ns) > 0 THEN
        ensured := {schema}.put_many(m_ns, m_key, m_value, true, m_ns_long, m_key_long);
    END IF;
    RETURN ensured
        + {schema}.put_many(p_ns, p_key, p_value, p_if_absent, p_ns_long, p_key_long);
END
$fn$"""

# set_many(require=...) in the same statement as the write: take the store's
# lock (as every writer does first), check each condition (state 0: no live
# value, 1: a live value, 2: a live value equal to c_value), raise
# REQUIRE_SQLSTATE at the first one that does not hold (the transaction, and
# so the write, is then undone), else write as put_ensure does.
PUT_CHECKED: Final = """
CREATE OR REPLACE FUNCTION {schema}.put_checked(
    c_ns bytea[], c_key bytea[], c_state smallint[], c_value bytea[],
    e_ns bytea[], e_key bytea[], e_value bytea[],
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    found_value bytea;
BEGIN
    PERFORM 1 FROM {schema}.meta FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(c_ns, 1), 0) LOOP
        SELECT value INTO found_value FROM {schema}.entries
        WHERE ns = c_ns[i] AND key = c_key[i] AND deleted_v IS NULL;
        IF (c_state[i] = 0 AND FOUND) OR (c_state[i] > 0 AND NOT FOUND)
           OR (c_state[i] = 2 AND found_value <> c_value[i]) THEN
            RAISE EXCEPTION 'swarmstate: requirement % does not hold', i
                USING ERRCODE = 'SWRQ1';
        END IF;
    END LOOP;
    RETURN {schema}.put_ensure(e_ns, e_key, e_value, p_ns, p_key, p_value, p_if_absent);
END
$fn$"""

# store.write(Transaction(...)) in one statement: take the store's lock, check
# each condition in order (kind 0: no live value, 1: a live value, 2: a live
# value equal to c_value, 3: no live key of namespace c_ns in [c_key,
# c_value)), raise REQUIRE_SQLSTATE with the condition's number as DETAIL at
# the first that does not hold (the transaction is then undone), else remove
# the prefixes' ranges, then the pairs, then write the entries. Names are
# index forms, range bounds and prefixes full names; the long forms of the
# entries may be shorter arrays than the entries (unnest pads them with
# NULL: no long name). Returns {written, deleted}.
WRITE_ALL: Final = """
CREATE OR REPLACE FUNCTION {schema}.write_all(
    c_kind smallint[], c_ns bytea[], c_key bytea[], c_value bytea[],
    x_lo bytea[], x_hi bytea[], d_ns bytea[], d_key bytea[],
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean,
    p_ns_long bytea[], p_key_long bytea[]
) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
    found_value bytea;
    holds boolean;
    deleted bigint := 0;
BEGIN
    PERFORM 1 FROM {schema}.meta FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(c_kind, 1), 0) LOOP
        IF c_kind[i] = 3 THEN
            IF octet_length(c_key[i]) > 1024 OR octet_length(c_value[i]) > 1024 THEN
                PERFORM 1 FROM {schema}.entries e
                WHERE e.ns = c_ns[i] AND e.deleted_v IS NULL
                  AND e.key >= substring(c_key[i] FROM 1 FOR 1024)
                  AND e.key < substring(c_value[i] FROM 1 FOR 1024)
                  || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
                  AND coalesce(e.key_long, e.key) >= c_key[i]
                  AND coalesce(e.key_long, e.key) < c_value[i]
                LIMIT 1;
            ELSE
                PERFORM 1 FROM {schema}.entries e
                WHERE e.ns = c_ns[i] AND e.deleted_v IS NULL
                  AND e.key >= c_key[i] AND e.key < c_value[i]
                LIMIT 1;
            END IF;
            holds := NOT FOUND;
        ELSE
            SELECT value INTO found_value FROM {schema}.entries
            WHERE ns = c_ns[i] AND key = c_key[i] AND deleted_v IS NULL;
            holds := CASE c_kind[i] WHEN 0 THEN NOT FOUND WHEN 1 THEN FOUND
                     ELSE FOUND AND found_value = c_value[i] END;
        END IF;
        IF NOT holds THEN
            RAISE EXCEPTION 'swarmstate: condition % does not hold', i
                USING ERRCODE = 'SWRQ1', DETAIL = i::text;
        END IF;
    END LOOP;
    FOR j IN 1 .. coalesce(array_length(x_lo, 1), 0) LOOP
        deleted := deleted + {schema}.remove_range(x_lo[j], x_hi[j]);
    END LOOP;
    IF coalesce(array_length(d_ns, 1), 0) > 0 THEN
        deleted := deleted + {schema}.remove_many(d_ns, d_key);
    END IF;
    RETURN ARRAY[
        {schema}.put_many(p_ns, p_key, p_value, p_if_absent, p_ns_long, p_key_long),
        deleted
    ];
END
$fn$"""

# store.write(Transaction(...)) with tags or tag deletes: write_all's
# conditions, prefix ranges and pairs (no entries), then each tag range's
# live rows (t_tag 0: tag_order, 1: tag_group; [t_lo, t_hi)) through
# remove_many, then the entries with their tags. Returns {written, deleted}.
WRITE_TAGGED: Final = """
CREATE OR REPLACE FUNCTION {schema}.write_tagged(
    c_kind smallint[], c_ns bytea[], c_key bytea[], c_value bytea[],
    x_lo bytea[], x_hi bytea[], d_ns bytea[], d_key bytea[],
    t_tag smallint[], t_lo bytea[], t_hi bytea[],
    p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean,
    p_ns_long bytea[], p_key_long bytea[], p_order bytea[], p_group bytea[]
) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
    done bigint[];
    deleted bigint;
    a_ns bytea[];
    a_key bytea[];
BEGIN
    done := {schema}.write_all(
        c_kind, c_ns, c_key, c_value, x_lo, x_hi, d_ns, d_key,
        '{{}}', '{{}}', '{{}}', p_if_absent, '{{}}', '{{}}'
    );
    deleted := done[2];
    FOR j IN 1 .. coalesce(array_length(t_tag, 1), 0) LOOP
        IF t_tag[j] = 0 THEN
            SELECT array_agg(ns), array_agg(key) INTO a_ns, a_key FROM {schema}.entries
            WHERE deleted_v IS NULL AND tag_order IS NOT NULL
              AND tag_order >= t_lo[j] AND tag_order < t_hi[j];
        ELSE
            SELECT array_agg(ns), array_agg(key) INTO a_ns, a_key FROM {schema}.entries
            WHERE deleted_v IS NULL AND tag_group IS NOT NULL
              AND tag_group >= t_lo[j] AND tag_group < t_hi[j];
        END IF;
        IF a_ns IS NOT NULL THEN
            deleted := deleted + {schema}.remove_many(a_ns, a_key);
        END IF;
    END LOOP;
    RETURN ARRAY[
        {schema}.put_many(
            p_ns, p_key, p_value, p_if_absent, p_ns_long, p_key_long, p_order, p_group
        ),
        deleted
    ];
END
$fn$"""

REMOVE_MANY: Final = """
CREATE OR REPLACE FUNCTION {schema}.remove_many(p_ns bytea[], p_key bytea[])
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v bigint;
    old_v bigint;
    old_n bigint;
    removed bigint := 0;
    d_bytes bigint := 0;
BEGIN
    SELECT version INTO v FROM {schema}.meta FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(p_ns, 1), 0) LOOP
        SELECT created_v, octet_length(value) INTO old_v, old_n
        FROM {schema}.entries
        WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        CONTINUE WHEN NOT FOUND;
        IF old_v = v THEN
            DELETE FROM {schema}.entries
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        ELSE
            UPDATE {schema}.entries SET deleted_v = v
            WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
        END IF;
        removed := removed + 1;
        d_bytes := d_bytes + old_n;
    END LOOP;
    UPDATE {schema}.meta
    SET total_count = total_count - removed, total_bytes = total_bytes - d_bytes;
    RETURN removed;
END
$fn$"""

# Removes the live keys under a prefix (given in full) found through
# entries_live, set-based: one DELETE of the rows created at the current
# version (no snapshot sees them) and one UPDATE marking the older ones, each
# scanning the range once. The cost follows the range, not the table.
REMOVE_RANGE: Final = """
CREATE OR REPLACE FUNCTION {schema}.remove_range(p_lo bytea, p_hi bytea)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v bigint;
    gone bigint;
    gone_bytes bigint;
    kept bigint;
    kept_bytes bigint;
BEGIN
    SELECT version INTO v FROM {schema}.meta FOR UPDATE;
    WITH removed AS (
        DELETE FROM {schema}.entries
        WHERE ns >= substring(p_lo FROM 1 FOR 1024)
          AND ns < substring(p_hi FROM 1 FOR 1024)
              || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
          AND coalesce(ns_long, ns) >= p_lo AND coalesce(ns_long, ns) < p_hi
          AND deleted_v IS NULL AND created_v = v
        RETURNING octet_length(value) AS n
    )
    SELECT count(*), coalesce(sum(n), 0) INTO gone, gone_bytes FROM removed;
    WITH marked AS (
        UPDATE {schema}.entries SET deleted_v = v
        WHERE ns >= substring(p_lo FROM 1 FOR 1024)
          AND ns < substring(p_hi FROM 1 FOR 1024)
              || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
          AND coalesce(ns_long, ns) >= p_lo AND coalesce(ns_long, ns) < p_hi
          AND deleted_v IS NULL AND created_v <> v
        RETURNING octet_length(value) AS n
    )
    SELECT count(*), coalesce(sum(n), 0) INTO kept, kept_bytes FROM marked;
    IF gone + kept > 0 THEN
        UPDATE {schema}.meta
        SET total_count = total_count - gone - kept,
            total_bytes = total_bytes - gone_bytes - kept_bytes;
    END IF;
    RETURN gone + kept;
END
$fn$"""

# Reads the source after taking the lock, then writes it through put_many
# (which takes the lock it already holds), tags and all. The source is read in full first,
# so a target that overlaps it copies what was there when the call started.
# Each copied namespace gets its own index form (a short source name may
# become a long one).
COPY_RANGE: Final = """
CREATE OR REPLACE FUNCTION {schema}.copy_range(
    p_lo bytea, p_hi bytea, p_target bytea, p_cut integer
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    a_ns bytea[];
    a_key bytea[];
    a_value bytea[];
    a_ns_long bytea[];
    a_key_long bytea[];
    a_order bytea[];
    a_group bytea[];
BEGIN
    PERFORM 1 FROM {schema}.meta FOR UPDATE;
    SELECT array_agg(CASE WHEN octet_length(t) > 1024
                          THEN substring(t FROM 1 FOR 1024) || sha256(t) ELSE t END),
           array_agg(key), array_agg(value),
           array_agg(CASE WHEN octet_length(t) > 1024 THEN t END), array_agg(key_long),
           array_agg(tag_order), array_agg(tag_group)
    INTO a_ns, a_key, a_value, a_ns_long, a_key_long, a_order, a_group
    FROM (
        SELECT p_target || substring(coalesce(ns_long, ns) FROM p_cut) AS t,
               key, key_long, value, tag_order, tag_group
        FROM {schema}.entries
        WHERE ns >= substring(p_lo FROM 1 FOR 1024)
          AND ns < substring(p_hi FROM 1 FOR 1024)
              || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
          AND coalesce(ns_long, ns) >= p_lo AND coalesce(ns_long, ns) < p_hi
          AND deleted_v IS NULL
    ) AS copied;
    IF a_ns IS NULL THEN
        RETURN 0;
    END IF;
    RETURN {schema}.put_many(
        a_ns, a_key, a_value, false, a_ns_long, a_key_long, a_order, a_group
    );
END
$fn$"""

# Make the live state equal the snapshot taken at version p_v: retire the
# live rows created after it, then bring back copies of its rows deleted
# since. Costs the rows changed since the snapshot. NULL means the snapshot
# is no longer retained (nothing changed).
RESTORE_TO: Final = """
CREATE OR REPLACE FUNCTION {schema}.restore_to(p_id bigint, p_v bigint)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v bigint;
    snap {schema}.snapshots%ROWTYPE;
    brought bigint;
BEGIN
    SELECT version INTO v FROM {schema}.meta FOR UPDATE;
    SELECT * INTO snap FROM {schema}.snapshots WHERE id = p_id AND version = p_v;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    DELETE FROM {schema}.entries
    WHERE deleted_v IS NULL AND created_v > p_v AND created_v = v;
    UPDATE {schema}.entries SET deleted_v = v
    WHERE deleted_v IS NULL AND created_v > p_v;
    INSERT INTO {schema}.entries
        (ns, key, ns_long, key_long, created_v, value, tag_order, tag_group)
    SELECT ns, key, ns_long, key_long, v, value, tag_order, tag_group FROM {schema}.entries
    WHERE deleted_v > p_v AND created_v <= p_v;
    GET DIAGNOSTICS brought = ROW_COUNT;
    UPDATE {schema}.meta
    SET total_count = snap.entry_count, total_bytes = snap.size_bytes, head = snap.id;
    RETURN brought;
END
$fn$"""

# -- functions: reads ------------------------------------------------------------

# Ordered range reads (keys, items, the checkpointer's latest and list). As a
# plain prepared statement, whether a connection kept re-planning it on every
# call (about 100 µs, more than the read) or reused a generic plan depended on
# the costs of that connection's first five calls: a latest read in a long
# namespace looks cheaper planned. Here the plan is made once per connection
# and reused. It cannot go wrong for some arguments: the only index giving
# this order is entries_live, and the generic estimate of a key range between
# two parameters is a small part of a namespace, so the plan is that index
# scan (checked with auto_explain). Keys come back whole; a bound longer than
# HEAD_BYTES is compared in full (the first two queries). ``p_values`` false
# returns NULL values unread.
READ_RANGE: Final = """
CREATE OR REPLACE FUNCTION {schema}.read_range(
    p_ns bytea, p_start bytea, p_stop bytea, p_limit bigint,
    p_desc boolean, p_values boolean
) RETURNS TABLE (r_key bytea, r_value bytea)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    IF octet_length(p_start) > 1024 OR octet_length(p_stop) > 1024 THEN
        IF p_desc THEN
            RETURN QUERY
            SELECT coalesce(e.key_long, e.key), CASE WHEN p_values THEN e.value END
            FROM {schema}.entries e
            WHERE e.ns = p_ns AND e.deleted_v IS NULL
              AND e.key >= substring(p_start FROM 1 FOR 1024)
              AND e.key < substring(p_stop FROM 1 FOR 1024)
                  || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
              AND coalesce(e.key_long, e.key) >= p_start
              AND coalesce(e.key_long, e.key) < p_stop
            ORDER BY coalesce(e.key_long, e.key) DESC LIMIT p_limit;
        ELSE
            RETURN QUERY
            SELECT coalesce(e.key_long, e.key), CASE WHEN p_values THEN e.value END
            FROM {schema}.entries e
            WHERE e.ns = p_ns AND e.deleted_v IS NULL
              AND e.key >= substring(p_start FROM 1 FOR 1024)
              AND e.key < substring(p_stop FROM 1 FOR 1024)
                  || '\\xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'::bytea
              AND coalesce(e.key_long, e.key) >= p_start
              AND coalesce(e.key_long, e.key) < p_stop
            ORDER BY coalesce(e.key_long, e.key) ASC LIMIT p_limit;
        END IF;
    ELSIF p_desc THEN
        RETURN QUERY
        SELECT coalesce(e.key_long, e.key), CASE WHEN p_values THEN e.value END
        FROM {schema}.entries e
        WHERE e.ns = p_ns AND e.deleted_v IS NULL
          AND e.key >= p_start AND e.key < p_stop
        ORDER BY e.key DESC LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT coalesce(e.key_long, e.key), CASE WHEN p_values THEN e.value END
        FROM {schema}.entries e
        WHERE e.ns = p_ns AND e.deleted_v IS NULL
          AND e.key >= p_start AND e.key < p_stop
        ORDER BY e.key ASC LIMIT p_limit;
    END IF;
END
$fn$"""

FUNCTIONS: Final = (
    PUT_MANY,
    PUT_MANY_LONG,
    PUT_MANY_TAGGED,
    PUT_ENSURE,
    PUT_ENSURE_LONG,
    PUT_CHECKED,
    WRITE_ALL,
    WRITE_TAGGED,
    REMOVE_MANY,
    REMOVE_RANGE,
    COPY_RANGE,
    RESTORE_TO,
    READ_RANGE,
)
"""Every function of the schema in force; each statement creates or replaces one."""

CREATE: Final = (*TABLES, *FUNCTIONS)
"""The statements making a new schema the schema in force, in order."""

"""PostgresStore's schema as versioned migrations: ``setup()`` applies those a schema lacks.

Each entry of :data:`MIGRATIONS` is one schema version, the statements that
bring a schema from the version before to it, run in one transaction. Never
edit a released entry: append one. Statements use ``{schema}`` for the schema
identifier; the layout is described in :mod:`swarmstate.backends.postgres.statements`.

Names of any length (version 6). A btree index row holds at most ~2.7 kB, so
a namespace plus key longer than that could not be indexed. From version 6
the ``ns`` and ``key`` columns hold each name's *index form*: the name
itself when it has at most :data:`HEAD_BYTES` bytes (nearly always), else its
first :data:`HEAD_BYTES` bytes followed by its SHA-256; a longer name is kept
whole in ``ns_long``/``key_long``. The index form identifies a name (a short
one exactly, a long one by its digest, and the two never have the same
length), so ``entries_live`` keeps one live row per key, and the statements
that find short names are those of version 5. It also orders names as the
names themselves, except two longer than :data:`HEAD_BYTES` that share their
first bytes: a page holding such a key is read again, sorted by the full
keys (``read_range_sorted``), and bounds or prefixes that long are compared
in full (:func:`within`).
"""

from __future__ import annotations

from typing import Final

from swarmstate.backends.postgres.migrations_early import EARLIER as _EARLIER

__all__ = [
    "HEAD_BYTES",
    "MIGRATIONS",
    "PUT_ENSURE_SINCE",
    "REQUIRE_SINCE",
    "SCHEMA_VERSION",
    "TOKENS_SINCE",
    "full_name",
    "index_form",
    "long_form",
    "read_range_sorted",
    "within",
]

HEAD_BYTES: Final = 1024
"""Bytes of a name its index form keeps before the digest (version 6)."""

# Greater than every index form that starts with a given head: a digest is 32 bytes.
_PAST_DIGESTS: Final = "'\\x" + "ff" * 33 + "'::bytea"


def index_form(name: str) -> str:
    """SQL: the index form of the name ``name`` (see the module docstring)."""
    return (
        f"CASE WHEN octet_length({name}) > {HEAD_BYTES} "
        f"THEN substring({name} FROM 1 FOR {HEAD_BYTES}) || sha256({name}) ELSE {name} END"
    )


def long_form(name: str) -> str:
    """SQL: the name ``name`` when its index form is not the name itself, else NULL."""
    return f"CASE WHEN octet_length({name}) > {HEAD_BYTES} THEN {name} END"


def full_name(column: str) -> str:
    """SQL: the full name held by ``column`` (``ns`` or ``key``, maybe with an alias)."""
    return f"coalesce({column}_long, {column})"


def within(column: str, low: str, high: str) -> str:
    """SQL: the full name of ``column`` in ``[low, high)``, bounded through its index form.

    Every name in the range has an index form in ``[head(low), head(high) +
    0xff * 33)``: that range is scanned, and the full names compared.
    """
    return (
        f"{column} >= substring({low} FROM 1 FOR {HEAD_BYTES}) "
        f"AND {column} < substring({high} FROM 1 FOR {HEAD_BYTES}) || {_PAST_DIGESTS} "
        f"AND {full_name(column)} >= {low} AND {full_name(column)} < {high}"
    )


def read_range_sorted(ns: str, start: str, stop: str, order: str, limit: str, values: str) -> str:
    """SQL: a key range of a namespace (its index form) compared and sorted by full keys."""
    return f"""
    SELECT {full_name("e.key")}, CASE WHEN {values} THEN e.value END
    FROM {{schema}}.entries e
    WHERE e.ns = {ns} AND e.deleted_v IS NULL AND {within("e.key", start, stop)}
    ORDER BY {full_name("e.key")} {order} LIMIT {limit}"""


def _rewritten(function: str, *changes: tuple[str, str]) -> str:
    """The latest released statement creating ``function``, with each ``(old, new)`` applied.

    Every ``old`` must occur in it. A released ``CREATE FUNCTION`` becomes
    ``CREATE OR REPLACE FUNCTION``: the same signature replaces that
    function, another one adds an overload beside it.
    """
    released = next(
        statement
        for version in reversed(_EARLIER)
        for statement in version
        if f"FUNCTION {{schema}}.{function}(" in statement
    )
    released = released.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    for old, new in changes:
        if old not in released:
            raise AssertionError(f"{old!r} is not in the statement it should rewrite")
        released = released.replace(old, new)
    return released


_LONG_ARGS = "p_ns_long bytea[], p_key_long bytea[]"
_SORTED_IN_FUNCTION = {
    order: read_range_sorted("p_ns", "p_start", "p_stop", order, "p_limit", "p_values")
    for order in ("ASC", "DESC")
}

_V6: Final = (
    # Version 6: names of any length (see the module docstring), and a random
    # token per snapshot, so a dumped and restored copy of a schema (same
    # uid, same snapshot ids) refuses the snapshots the original takes later.
    "ALTER TABLE {schema}.entries ADD COLUMN ns_long bytea, ADD COLUMN key_long bytea",
    # Names over HEAD_BYTES that version 5 could hold (up to the index limit).
    f"""UPDATE {{schema}}.entries SET ns_long = ns, ns = {index_form("ns")}
        WHERE octet_length(ns) > {HEAD_BYTES}""",
    f"""UPDATE {{schema}}.entries SET key_long = key, key = {index_form("key")}
        WHERE octet_length(key) > {HEAD_BYTES}""",
    "ALTER TABLE {schema}.snapshots ADD COLUMN token bigint",
    # put_many with the long forms (NULL arrays when no name is long): a new
    # overload. The one without stays for batches of short names, whose
    # index forms are the names: it stores them as version 5 did.
    _rewritten(
        "put_many",
        (
            "p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean",
            f"p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean, {_LONG_ARGS}",
        ),
        (
            """INSERT INTO {schema}.entries (ns, key, created_v, value)
                SELECT u.ns, u.key, v, u.value
                FROM unnest(p_ns, p_key, p_value) AS u(ns, key, value)""",
            """INSERT INTO {schema}.entries (ns, key, ns_long, key_long, created_v, value)
                SELECT u.ns, u.key, u.ns_long, u.key_long, v, u.value
                FROM unnest(p_ns, p_key, p_ns_long, p_key_long, p_value)
                    AS u(ns, key, ns_long, key_long, value)""",
        ),
        (
            """INSERT INTO {schema}.entries (ns, key, created_v, value)
                    VALUES (p_ns[i], p_key[i], v, p_value[i]);""",
            """INSERT INTO {schema}.entries (ns, key, ns_long, key_long, created_v, value)
                    VALUES (p_ns[i], p_key[i], p_ns_long[i], p_key_long[i], v, p_value[i]);""",
        ),
    ),
    _rewritten(
        "put_ensure",
        (
            "e_ns bytea[], e_key bytea[], e_value bytea[],",
            "e_ns bytea[], e_key bytea[], e_value bytea[], e_ns_long bytea[], e_key_long bytea[],",
        ),
        (
            "p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean",
            f"p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean, {_LONG_ARGS}",
        ),
        (
            "m_value bytea[] := '{{}}';",
            "m_value bytea[] := '{{}}';\n            m_ns_long bytea[] := '{{}}';"
            "\n            m_key_long bytea[] := '{{}}';",
        ),
        (
            "m_value := m_value || e_value[i];",
            "m_value := m_value || e_value[i];\n                    m_ns_long := m_ns_long || "
            "e_ns_long[i];\n                    m_key_long := m_key_long || e_key_long[i];",
        ),
        (
            "put_many(m_ns, m_key, m_value, true)",
            "put_many(m_ns, m_key, m_value, true, m_ns_long, m_key_long)",
        ),
        (
            "put_many(p_ns, p_key, p_value, p_if_absent)",
            "put_many(p_ns, p_key, p_value, p_if_absent, p_ns_long, p_key_long)",
        ),
    ),
    # Prefixes arrive as full names: a long one is compared in full.
    _rewritten("remove_range", ("ns >= p_lo AND ns < p_hi", within("ns", "p_lo", "p_hi"))),
    _rewritten(
        "copy_range",
        (
            """SELECT array_agg(p_target || substring(ns FROM p_cut)), array_agg(key),
                   array_agg(value)
            INTO a_ns, a_key, a_value
            FROM {schema}.entries
            WHERE ns >= p_lo AND ns < p_hi AND deleted_v IS NULL;""",
            f"""SELECT array_agg({index_form("t")}), array_agg(key), array_agg(value),
                   array_agg({long_form("t")}), array_agg(key_long)
            INTO a_ns, a_key, a_value, a_ns_long, a_key_long
            FROM (
                SELECT p_target || substring({full_name("ns")} FROM p_cut) AS t,
                       key, key_long, value
                FROM {{schema}}.entries
                WHERE {within("ns", "p_lo", "p_hi")} AND deleted_v IS NULL
            ) AS copied;""",
        ),
        (
            "a_value bytea[];",
            "a_value bytea[];\n            a_ns_long bytea[];\n            a_key_long bytea[];",
        ),
        (
            "put_many(a_ns, a_key, a_value, false)",
            "put_many(a_ns, a_key, a_value, false, a_ns_long, a_key_long)",
        ),
    ),
    _rewritten(
        "restore_to",
        (
            """INSERT INTO {schema}.entries (ns, key, created_v, value)
            SELECT ns, key, v, value FROM {schema}.entries""",
            """INSERT INTO {schema}.entries (ns, key, ns_long, key_long, created_v, value)
            SELECT ns, key, ns_long, key_long, v, value FROM {schema}.entries""",
        ),
    ),
    # Keys come back whole. A bound longer than HEAD_BYTES is compared in full.
    _rewritten(
        "read_range",
        (
            """        BEGIN
            IF p_desc THEN""",
            f"""        BEGIN
            IF octet_length(p_start) > {HEAD_BYTES} OR octet_length(p_stop) > {HEAD_BYTES} THEN
                IF p_desc THEN
                    RETURN QUERY{_SORTED_IN_FUNCTION["DESC"]};
                ELSE
                    RETURN QUERY{_SORTED_IN_FUNCTION["ASC"]};
                END IF;
            ELSIF p_desc THEN""",
        ),
        (
            "SELECT e.key, CASE WHEN p_values THEN e.value END",
            f"SELECT {full_name('e.key')}, CASE WHEN p_values THEN e.value END",
        ),
    ),
)

# Version 7: set_many(require=...) in the same statement as the write. require_all
# takes the store lock (as every writer does first), then checks
# each condition (0: no live value, 1: a live value, 2: a live value equal to
# p_value) and raises REQUIRE_SQLSTATE at the first one that does not hold:
# the transaction it runs in, and the write queued after it, are then undone.
REQUIRE_SQLSTATE: Final = "SWRQ1"
_V7: Final[tuple[str, ...]] = (
    f"""
        CREATE FUNCTION {{schema}}.require_all(
            p_ns bytea[], p_key bytea[], p_state smallint[], p_value bytea[]
        ) RETURNS integer LANGUAGE plpgsql AS $fn$
        DECLARE
            found_value bytea;
        BEGIN
            PERFORM 1 FROM {{schema}}.meta FOR UPDATE;
            FOR i IN 1 .. coalesce(array_length(p_ns, 1), 0) LOOP
                SELECT value INTO found_value FROM {{schema}}.entries
                WHERE ns = p_ns[i] AND key = p_key[i] AND deleted_v IS NULL;
                IF (p_state[i] = 0 AND FOUND) OR (p_state[i] > 0 AND NOT FOUND)
                   OR (p_state[i] = 2 AND found_value <> p_value[i]) THEN
                    RAISE EXCEPTION 'swarmstate: requirement % does not hold', i
                        USING ERRCODE = '{REQUIRE_SQLSTATE}';
                END IF;
            END LOOP;
            RETURN 0;
        END
        $fn$""",
    # The conditions and the write in one statement: one round trip, atomic.
    """
        CREATE FUNCTION {schema}.put_checked(
            c_ns bytea[], c_key bytea[], c_state smallint[], c_value bytea[],
            e_ns bytea[], e_key bytea[], e_value bytea[],
            p_ns bytea[], p_key bytea[], p_value bytea[], p_if_absent boolean
        ) RETURNS bigint LANGUAGE plpgsql AS $fn$
        BEGIN
            PERFORM {schema}.require_all(c_ns, c_key, c_state, c_value);
            RETURN {schema}.put_ensure(e_ns, e_key, e_value, p_ns, p_key, p_value, p_if_absent);
        END
        $fn$""",
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (*_EARLIER, _V6, _V7)
"""One tuple of statements per schema version, oldest first."""

SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version a schema has after ``setup()`` with this code."""

# The versions from which the store uses what a migration added.
PUT_ENSURE_SINCE: Final = 5
"""``put_ensure``: ``set_many(ensure=...)`` in one statement."""
TOKENS_SINCE: Final = 6
"""Snapshot tokens, and names of any length."""
REQUIRE_SINCE: Final = 7
"""``put_checked``: ``set_many(require=...)`` in the same statement as the write."""

"""How ``setup()`` brings a schema of an earlier version to the schema in force.

A new schema gets :data:`~.schema.CREATE` whole. A schema of an earlier
version gets, in the same one transaction:

1. the table steps of each version above its own (:data:`TABLE_STEPS`), in
   order: versions 4, 6 and 10 are the only ones that changed a table;
2. every function of the schema in force (:data:`~.schema.FUNCTIONS`, each a
   ``CREATE OR REPLACE``): functions hold no data, so they are replaced
   whole rather than patched;
3. the drop of each function an earlier version had and the schema in force
   has not (:data:`DROPPED`).

Every version up to :data:`~.schema.SCHEMA_VERSION` is then recorded in
``migrations``, as it is for a new schema. The statements each released
version ran are kept with the tests, which bring a schema of every earlier
version to this one and compare it with a new schema: tables, indexes and
function bodies.

What each version changed:

1. the tables, their indexes and the write functions;
2. ``put_many``: every key new costs two statements;
3. ``read_range``: ordered ranges as a function, planned once per connection;
4. values compressed with lz4 (a table step);
5. ``put_ensure``: ``set_many(ensure=...)`` in one statement;
6. names of any length (``ns_long``/``key_long``, names longer than
   :data:`~.schema.HEAD_BYTES` moved to their index form: a table step) and
   snapshot tokens (a table step), with the functions that handle them;
7. ``put_checked``: ``set_many(require=...)`` in the same statement as the
   write, checking its conditions through ``require_all``;
8. ``put_checked`` checks the conditions itself (one function fewer on
   every checkpoint's write); ``require_all`` dropped;
9. ``write_all``: ``store.write(Transaction(...))`` (conditions, key ranges
   that must be empty, prefix deletes, deletes and sets) in one statement;
10. tags: ``tag_order``/``tag_group`` on ``entries`` with their partial
    indexes (a table step), ``put_many`` with tags, ``write_tagged``; every
    write without tags clears the tags of a row it overwrites;
11. ``remove_range`` set-based: a prefix delete (``delete_thread``) is one
    ``DELETE`` and one ``UPDATE`` over the range instead of two statements a
    key (20,000 keys: 44 ms against 260 ms).
"""

from __future__ import annotations

from typing import Final

from swarmstate.backends.postgres.schema import (
    ENTRIES_GROUP,
    ENTRIES_ORDER,
    TAG_COLUMNS,
    VALUES_LZ4,
)

__all__ = [
    "DROPPED",
    "PUT_ENSURE_SINCE",
    "READ_RANGE_SINCE",
    "REQUIRE_SINCE",
    "TABLE_STEPS",
    "TAGS_SINCE",
    "TOKENS_SINCE",
    "WRITE_ALL_SINCE",
]

# The versions from which the store uses what a migration added.
READ_RANGE_SINCE: Final = 3
"""``read_range``: ordered ranges (keys, items) as a function."""
PUT_ENSURE_SINCE: Final = 5
"""``put_ensure``: ``set_many(ensure=...)`` in one statement."""
TOKENS_SINCE: Final = 6
"""Snapshot tokens, and names of any length."""
REQUIRE_SINCE: Final = 7
"""``put_checked``: ``set_many(require=...)`` in the same statement as the write."""
WRITE_ALL_SINCE: Final = 9
"""``write_all``: a transaction (``store.write``) in one statement."""
TAGS_SINCE: Final = 10
"""Tags: ``tagged``, sets with tags, ``tag_deletes`` (``write_tagged``)."""

TABLE_STEPS: Final[dict[int, tuple[str, ...]]] = {
    4: (VALUES_LZ4,),
    6: (
        "ALTER TABLE {schema}.entries ADD COLUMN ns_long bytea, ADD COLUMN key_long bytea",
        # Names over HEAD_BYTES that version 5 could hold (up to the index
        # limit) move to their index form, kept whole beside it.
        """
UPDATE {schema}.entries
SET ns_long = ns, ns = substring(ns FROM 1 FOR 1024) || sha256(ns)
WHERE octet_length(ns) > 1024""",
        """
UPDATE {schema}.entries
SET key_long = key, key = substring(key FROM 1 FOR 1024) || sha256(key)
WHERE octet_length(key) > 1024""",
        "ALTER TABLE {schema}.snapshots ADD COLUMN token bigint",
    ),
    # Nullable columns with no default: adding them rewrites no row.
    10: (TAG_COLUMNS, ENTRIES_ORDER, ENTRIES_GROUP),
}
"""By version: the statements that changed a table, run before the functions."""

DROPPED: Final = (
    "DROP FUNCTION IF EXISTS {schema}.require_all(bytea[], bytea[], smallint[], bytea[])",
)
"""Functions of earlier versions that the schema in force has not."""

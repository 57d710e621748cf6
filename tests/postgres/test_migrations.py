"""PostgreSQL migrations: a schema of every released version, set up again, is the schema in force.

Each earlier version is built as its release left it (``tests/support/pg_releases.py``),
then ``setup()`` migrates it; the result must match a new schema in every
table (columns, types, defaults, compression), constraint, index and
function body, as the server's catalogs describe them.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import psycopg
import pytest

import swarmstate
from swarmstate.backends.postgres import schema as pg_schema
from tests.support.pg_releases import RELEASED
from tests.support.pgserver import create_schema_at_version

pytestmark = pytest.mark.postgres

_COLUMNS = """
SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), {compression}
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY 1, 2"""
_CONSTRAINTS = """
SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s ORDER BY 1, 2"""
_INDEXES = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1"
_FUNCTIONS = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %s ORDER BY 1"""


def _described(conninfo: str, schema: str) -> dict[str, Any]:
    """The schema as the catalogs describe it, its own name replaced by ``{schema}``."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        server = int(conn.execute("SHOW server_version_num").fetchone()[0])  # type: ignore[index]
        compression = "a.attcompression::text" if server >= 140000 else "NULL"

        def rows(query: str) -> list[tuple[Any, ...]]:
            return conn.execute(query, (schema,)).fetchall()

        described = {
            "columns": rows(_COLUMNS.format(compression=compression)),
            "constraints": rows(_CONSTRAINTS),
            "indexes": rows(_INDEXES),
            "functions": rows(_FUNCTIONS),
            "versions": conn.execute(f'SELECT v FROM "{schema}".migrations ORDER BY v').fetchall(),
            "meta": conn.execute(
                "SELECT version, next_snapshot, head, total_count, total_bytes "
                f'FROM "{schema}".meta'
            ).fetchall(),
        }
    name = re.compile(rf'"?\b{re.escape(schema)}\b"?')
    return {
        part: [tuple(name.sub("{schema}", v) if isinstance(v, str) else v for v in row)
               for row in found]
        for part, found in described.items()
    }  # fmt: skip


@pytest.mark.parametrize("version", range(1, pg_schema.SCHEMA_VERSION))
def test_setup_brings_a_schema_of_each_earlier_version_to_the_schema_in_force(
    pg_conninfo: str, pg_store_factory: Any, version: int
) -> None:
    fresh = pg_store_factory()  # setup() on a new schema
    older = f"at_{version}_{secrets.token_hex(4)}"
    create_schema_at_version(pg_conninfo, older, version)
    migrated = pg_store_factory(schema=older)  # setup() migrates it
    expected = _described(pg_conninfo, fresh.schema)
    assert expected["functions"], "the new schema has no functions"
    assert _described(pg_conninfo, older) == expected
    # The migrated schema serves every kind of write and read.
    migrated.set_many(
        [("t/a", "k", 1)], ensure=[("idx", "k", 0)], require=[("g", "k", swarmstate.ABSENT)]
    )
    before = migrated.snapshot()
    migrated.set("t/a", "k", 2)
    migrated.copy_prefix("t/", "u/")
    assert migrated.snapshot().diff(before)["added"] == [("u/a", "k")]
    migrated.restore(before)
    assert migrated.delete_prefix("t/") == 1
    assert migrated.items("idx") == [("k", 0)]
    done = migrated.write(
        swarmstate.Transaction(
            conditions=[swarmstate.Empty("t/a"), swarmstate.Present("idx", "k")],
            prefix_deletes=["idx"],
            sets=[("t/a", "k", 3)],
        )
    )
    assert done == swarmstate.WriteResult(written=1, deleted=1)
    # Tags, from version 10 on.
    migrated.write(
        swarmstate.Transaction(sets=[("t/a", "k", 4, swarmstate.Tags(order="o", group="g"))])
    )
    assert migrated.tagged("order") == [("o", "t/a", "k")]
    assert migrated.write(swarmstate.Transaction(tag_deletes=[("group", "g", None)])).deleted == 1


def test_every_earlier_version_has_the_statements_its_release_ran() -> None:
    assert pg_schema.SCHEMA_VERSION - 1 <= len(RELEASED) <= pg_schema.SCHEMA_VERSION


def test_a_broken_condition_raises_the_code_the_store_reads_as_one() -> None:
    raised = f"ERRCODE = '{pg_schema.REQUIRE_SQLSTATE}'"
    assert [text for text in pg_schema.FUNCTIONS if raised in text]

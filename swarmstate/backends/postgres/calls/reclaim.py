"""PostgresStore.reclaim(): ``VACUUM (ANALYZE)`` on the store's tables, sizes before and after.

Plain ``VACUUM`` takes a lock that lets reads and writes go on (SHARE UPDATE
EXCLUSIVE: only other maintenance and schema changes wait for it). It marks
the space of deleted row versions free for later writes of the same table,
and gives back to the operating system only the empty pages at the end of
each file (briefly taking an exclusive lock for that cut, which it skips
when others hold locks). ``VACUUM FULL`` would return everything, but it
rewrites each table under an ACCESS EXCLUSIVE lock that stops every read
and write of the store for the duration: never run from here (see
docs/postgres.md).
"""

from __future__ import annotations

import time
from typing import Any, Final

from swarmstate._reclaim import ReclaimReport
from swarmstate.backends.postgres.driver import psycopg, sql
from swarmstate.backends.postgres.session import Session

__all__ = ["TABLES", "reclaim"]

TABLES: Final = ("entries", "snapshots", "meta", "migrations")
"""The store's tables, largest first; each is vacuumed on its own."""

_NOT_FULL: Final = (
    "full=True ran plain VACUUM: VACUUM FULL would lock out every read and write "
    "of the store while it rewrites the tables; run it yourself in a maintenance window"
)
_SIZES: Final = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
       current_setting('block_size')::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind = 'r'"""


def reclaim(session: Session, full: bool) -> ReclaimReport:
    """Vacuum and analyze each of the store's tables; the sizes before and after.

    ``full`` runs the same plain ``VACUUM`` and says so in the note.
    """
    started = time.monotonic()
    session.ready()  # a schema without the store's tables gets setup()'s advice
    warnings: list[str] = []

    def note(diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.severity_nonlocalized == "WARNING" and diagnostic.message_primary:
            warnings.append(diagnostic.message_primary)

    def work(conn: psycopg.Connection[Any]) -> tuple[int, int, int, float]:
        autocommit = conn.autocommit
        conn.autocommit = True  # VACUUM cannot run inside a transaction block
        conn.add_notice_handler(note)
        try:
            with conn.cursor() as cur:
                before, block = _sizes(cur, session.schema)
                longest = 0.0
                for table in TABLES:
                    began = time.monotonic()
                    cur.execute(
                        sql.SQL("VACUUM (ANALYZE) {}.{}").format(
                            sql.Identifier(session.schema), sql.Identifier(table)
                        )
                    )
                    longest = max(longest, time.monotonic() - began)
                after, _ = _sizes(cur, session.schema)
        finally:
            conn.remove_notice_handler(note)
            conn.autocommit = autocommit
        return before, after, block, longest

    before, after, block, longest = session.run(work)
    return ReclaimReport(
        backend="PostgresStore",
        bytes_before=before,
        bytes_after=after,
        pages_freed=max(0, before - after) // block,
        complete=not warnings,
        steps=len(TABLES),
        longest_step_seconds=longest,
        seconds=time.monotonic() - started,
        note="; ".join(dict.fromkeys([*warnings, *([_NOT_FULL] if full else [])])),
    )


def _sizes(cur: psycopg.Cursor[Any], schema: str) -> tuple[int, int]:
    """Total bytes of the store's tables (indexes and TOAST included), and the page size."""
    row = cur.execute(_SIZES, (schema, list(TABLES))).fetchone()
    assert row is not None  # an aggregate always yields one row
    return int(row[0]), int(row[1])

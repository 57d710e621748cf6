"""PostgresStore.namespaces walks the index: about one row read per namespace.

The walk is a recursive query that asks the index for the next namespace
after the one it found. When its step also filtered by the full names, the
planner, on a saver's store of a thousand short threads and one long one,
estimated one row per step and read and sorted every later entry of the
range instead: quadratic in the entries, seconds for `thread_count` (and so
for ``swarmstate threads``). The test builds such a store through the saver
and reads the server's own account of the query (``EXPLAIN ANALYZE``).
"""

from __future__ import annotations

import json
import random
from typing import Any

import psycopg
from langgraph.checkpoint.base.id import uuid6
from psycopg import sql

from benchmarks.sections.threads.stores import ThreadWriter, thread_ids
from swarmstate._bench.conversation import Conversation
from swarmstate.backends.postgres import statements
from swarmstate.integrations.langgraph import SwarmStateSaver

THREADS = 1000
LONG = 3000


def _rows_read(plan: dict[str, Any]) -> int:
    """Rows every scan of ``entries`` in the plan produced, over all its loops."""
    total = 0
    if plan.get("Relation Name") == "entries":
        total += int(plan["Actual Rows"]) * int(plan["Actual Loops"])
    for child in plan.get("Plans", []):
        total += _rows_read(child)
    return total


def test_the_namespace_walk_reads_about_one_row_per_namespace(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    store = pg_store_factory()
    saver = SwarmStateSaver(store)
    writer = ThreadWriter(Conversation.record("7:walk", 4))
    for thread_id in thread_ids(random.Random(7), THREADS):
        writer.thread(saver, thread_id)
    checkpoint = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert checkpoint is not None
    parent = None
    for step in range(LONG):  # one long thread, its checkpoints in one namespace
        conf = {"thread_id": "long", "checkpoint_ns": ""}
        if parent is not None:
            conf["checkpoint_id"] = parent
        made = {**checkpoint.checkpoint, "id": str(uuid6(clock_seq=step))}
        saver.put({"configurable": conf}, made, {"step": step}, {})
        parent = made["id"]
    found = store.namespaces("langgraph:t")
    assert saver.thread_count() == THREADS + 1
    query = statements.SINCE_V6["NAMESPACES"].format(
        schema=sql.Identifier(store.schema).as_string()
    )
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}.entries").format(sql.Identifier(store.schema)))
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + query,
            {"lo": b"langgraph:t", "hi": b"langgraph:t\xff"},
        ).fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    read = _rows_read(plan[0]["Plan"])
    # One index probe a namespace, and the one after the last; reading the later
    # entries at each step would be millions.
    assert read <= 4 * (len(found) + 1), read

"""PostgresStore against hostile data and copies: long names, restored dumps, stale handles.

Each test here reproduces a defect an adversarial review found (issue 14)
against the real server, and failed before the fix.
"""

from __future__ import annotations

import random
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import swarmstate
from swarmstate._transfer import transfer
from swarmstate.backends.disk import DiskStore
from swarmstate.backends.postgres import PostgresStore
from swarmstate.backends.postgres import statements as _pg_sql
from tests.support.copies import check_a_copy_refuses_the_originals_later_snapshots
from tests.support.pgserver import create_schema_at_version, find_bindir

pytestmark = pytest.mark.postgres


def _text(seed: int, chars: int) -> str:
    """Text no compressor shrinks: random CJK characters, 3 bytes each in UTF-8."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(chars))


def _with_dbname(conninfo: str, dbname: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    params["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


def _client_args(conninfo: str) -> list[str]:
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    return ["-h", str(params["host"]), "-p", str(params["port"]), "-U", str(params["user"])]


# -- a dumped and restored schema --------------------------------------------------------


def test_a_restored_dump_refuses_the_snapshots_the_original_takes_later(
    pg_conninfo: str, pg_store_factory: Any, tmp_path: Path
) -> None:
    bindir = find_bindir()
    assert bindir is not None
    original = pg_store_factory()
    original.set("ns", "k", "shared")
    shared = original.snapshot()
    dump = tmp_path / "schema.dump"
    args = _client_args(pg_conninfo)
    subprocess.run(
        [str(bindir / "pg_dump"), *args, "-d", "postgres", "-n", original.schema,
         "-Fc", "-f", str(dump)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS restored_copy")
        conn.execute("CREATE DATABASE restored_copy")
    try:
        subprocess.run(
            [str(bindir / "pg_restore"), *args, "-d", "restored_copy", str(dump)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        with PostgresStore.from_conn_string(
            _with_dbname(pg_conninfo, "restored_copy"), schema=original.schema
        ) as copy:
            assert copy._uid == original._uid  # the dump carries the uid
            check_a_copy_refuses_the_originals_later_snapshots(original, copy, shared)
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS restored_copy WITH (FORCE)")


# -- long names ----------------------------------------------------------------------------


def test_a_2800_character_name_moves_from_disk_to_postgres_and_back(
    pg_store_factory: Any, tmp_path: Path
) -> None:
    thread = _text(4, 2800)
    entries = [(f"t/{thread}", f"{i:04d}", {"i": i}) for i in range(30)]
    entries += [("t/short", _text(5, 1500) + str(i), i) for i in range(5)]
    with DiskStore(tmp_path / "source.db") as disk:
        disk.set_many(entries)
        pg = pg_store_factory()
        assert transfer(disk, pg, batch_size=7) == len(entries)
    assert pg.keys(f"t/{thread}", reverse=True, limit=2) == ["0029", "0028"]
    assert pg.namespaces("t/") == sorted({ns for ns, _, _ in entries})
    with DiskStore(tmp_path / "back.db") as back:
        assert transfer(pg, back) == len(entries)
        for ns in back.namespaces():
            assert back.items(ns) == pg.items(ns)


_HOT = ["GET", "GET_MANY", "COUNT", "NAMESPACES"]


@pytest.mark.parametrize("name", _HOT)
def test_hot_statements_use_the_live_index_whatever_the_plan(
    pg_conninfo: str, pg_store_factory: Any, name: str
) -> None:
    store = pg_store_factory()
    store.set_many([(f"ns{i % 40}", f"k{i:05d}", i) for i in range(4000)])
    statement = _pg_sql.SINCE_V6.get(name, getattr(_pg_sql, name))
    text = sql.SQL(statement).format(schema=sql.Identifier(store.schema))
    query = text.as_string(None)
    names: list[str] = []
    for found in re.findall(r"%\((\w+)\)b", query):
        if found not in names:
            names.append(found)
    for number, param in enumerate(names, 1):
        query = query.replace(f"%({param})b", f"${number}")
    if "%b" in query:  # positional: (ns, key)
        names = ["ns", "key"]
        query = query.replace("%b", "$1", 1).replace("%b", "$2", 1)
    arrays = name == "GET_MANY"
    kind = "bytea[]" if arrays else "bytea"
    values = {"ns": "ns1", "key": "k00041", "lo": "ns", "hi": "ns\xff"}
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}.entries").format(sql.Identifier(store.schema)))
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE hot({', '.join([kind] * len(names))}) AS {query}")
        literals = [sql.Literal(values[p].encode()) for p in names]
        if arrays:
            literals = [sql.SQL("ARRAY[{}]").format(lit) for lit in literals]  # type: ignore[misc]
        explain = sql.SQL("EXPLAIN EXECUTE hot({})").format(sql.SQL(", ").join(literals))
        plan = "\n".join(row[0] for row in conn.execute(explain).fetchall())
    assert "entries_live" in plan, plan
    assert "Seq Scan on entries" not in plan, plan


# -- a handle opened before another process migrates ----------------------------------------


def test_a_handle_on_an_older_schema_follows_a_migration_run_elsewhere(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    schema = "at_version_5"
    create_schema_at_version(pg_conninfo, schema, 5)
    # Version 5 holds names up to the index limit: 1,500 bytes fit beside a short one.
    medium = _text(7, 500)
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old:
        old.set_many([("ns", "a", 1), ("ns", "b", 2), ("ns", medium, 0), (medium, "k", 0)])
        before = old.snapshot()
        assert before._token is None  # version 5 has no tokens
        migrated = pg_store_factory(schema=schema)  # setup(): version 6
        # The migration moved the 1,500-byte names to their index form.
        assert migrated.get("ns", medium) == 0
        assert migrated.items(medium) == [("k", 0)]
        assert migrated.namespaces() == sorted(["ns", medium])
        # The older handle stays correct through the statements it started with...
        old.set("ns", "c", 3)
        assert old.items("ns", limit=3) == [("a", 1), ("b", 2), ("c", 3)]
        old._session._recheck_at = 0.0  # ... and moves to version 6's when it looks again (30 s)
        long = _text(6, 1200)
        old.set("ns", long, 4)
        assert old.keys("ns", start="c") == sorted(["c", long, medium])
        later = old.snapshot()
        assert later._token is not None
        assert later.diff(before)["added"] == sorted([("ns", "c"), ("ns", long)])
        old.restore(before)
        assert migrated.items("ns") == sorted([("a", 1), ("b", 2), (medium, 0)])


def _live_rows(conninfo: str, schema: str) -> int:
    query = sql.SQL("SELECT count(*) FROM {}.entries WHERE deleted_v IS NULL").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_a_handle_on_version_5_passes_long_names_as_a_migration_elsewhere_stored_them(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    # Right after another process's setup() moved names over 1,024 bytes to
    # their index form (well inside the 30 s before this handle reads the
    # version again), every read and write of such a name is still right.
    schema = "long_names_at_version_5"
    create_schema_at_version(pg_conninfo, schema, 5)
    medium, other = _text(8, 500), _text(9, 350)  # 1,500 and 1,050 bytes: fine at version 5
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old:
        old.set_many([("ns", "a", 1), ("ns", medium, 0), (medium, "k", 0), (medium, other, 1)])
        before = old.snapshot()
        migrated = pg_store_factory(schema=schema)  # setup(): the schema in force
        assert old.get("ns", medium) == 0
        assert old.get_many([("ns", medium), (medium, other)]) == [0, 1]
        assert old.count(medium) == 2
        assert old.items(medium) == sorted([("k", 0), (other, 1)])
        assert old.keys("ns") == sorted(["a", medium])
        assert old.namespaces() == sorted(["ns", medium])
        assert before.get("ns", medium) == 0
        assert before.keys == sorted([("ns", "a"), ("ns", medium), (medium, "k"), (medium, other)])
        old.set("ns", medium, 5)
        old.set_many([(medium, "k", 6)], ensure=[(medium, "e", 7)])
        old.set_many([("ns", other, 8)], require=[("ns", medium, swarmstate.PRESENT)])
        assert old.delete(medium, other)
        after = old.snapshot()
        assert after.diff(before) == {
            "added": sorted([("ns", other), (medium, "e")]),
            "removed": [(medium, other)],
            "changed": sorted([("ns", medium), (medium, "k")]),
        }
        # What an up-to-date handle reads, with one live row per key: no
        # duplicate it would not see.
        assert migrated.get_many([("ns", medium), ("ns", other), (medium, other)]) == [5, 8, None]
        assert migrated.items(medium) == sorted([("e", 7), ("k", 6)])
        assert len(migrated) == len(old) == 5
        assert _live_rows(pg_conninfo, schema) == 5


def test_a_long_name_written_during_a_migration_waits_for_it_and_is_stored_as_it_left_them(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    schema = "migrating_from_version_5"
    create_schema_at_version(pg_conninfo, schema, 5)
    medium = _text(10, 500)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            old.set("ns", medium, 1)
        except BaseException as exc:  # reported by the test's thread below
            errors.append(exc)

    with (
        PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old,
        PostgresStore.from_conn_string(pg_conninfo, schema=schema) as migrating,
    ):
        old.set("ns", medium, 0)
        with psycopg.connect(pg_conninfo) as conn:  # not autocommit: a transaction is open
            conn.execute("SELECT 1")
            migrating.setup(conn)  # migrated, not yet committed
            writer = threading.Thread(target=write)
            writer.start()
            _wait_for_a_lock_wait(pg_conninfo)  # the write waits for the migration
            conn.commit()
        writer.join(timeout=60)
        assert not writer.is_alive()
        assert not errors, errors
        migrated = pg_store_factory(schema=schema)
        assert migrated.get("ns", medium) == 1
        assert old.get("ns", medium) == 1
        assert _live_rows(pg_conninfo, schema) == 1


def _wait_for_a_lock_wait(conninfo: str) -> None:
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    deadline = time.monotonic() + 30
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(query).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.01)
    raise AssertionError("no session waited for a lock within 30 s")

"""reclaim() on every store: space given back, nothing lost, concurrent writers kept going."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

import swarmstate
from swarmstate.backends.disk import DiskStore

BLOB = os.urandom(3000)  # about one SQLite page per entry
OLD_FILE = Path(__file__).parent / "langgraph" / "data" / "previous-layout.sqlite"


def file_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def connect(path: Path, *, readonly: bool = True) -> apsw.Connection:
    """A raw connection to ``path`` through apsw's SQLite, the one DiskStore uses.

    Not the standard library's sqlite3: two SQLite libraries in one process
    do not see each other's locks on a file.
    """
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    return apsw.Connection(str(path), flags=flags)


def pragma(path: Path, name: str) -> Any:
    conn = connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def fill_and_thin(
    store: swarmstate.BaseStore, namespaces: int = 40, per: int = 500
) -> dict[str, int]:
    """Write ``namespaces * per`` large entries, then delete nine in ten, spread over the file.

    Returns the count left in each namespace.
    """
    for n in range(namespaces):
        store.set_many([(f"big{n}", f"k{i:05d}", BLOB) for i in range(per)])
    for n in range(namespaces):
        store.delete_many([(f"big{n}", f"k{i:05d}") for i in range(per) if i % 10])
    return {f"big{n}": len(range(0, per, 10)) for n in range(namespaces)}


def assert_left_intact(store: swarmstate.BaseStore, counts: dict[str, int]) -> None:
    for namespace, count in counts.items():
        assert store.count(namespace) == count
        assert store.get(namespace, "k00010") == BLOB


# -- every backend ---------------------------------------------------------------


def test_reclaim_reports_and_changes_no_data(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", f"k{i:02d}", {"i": i}) for i in range(50)])
    store.delete_many([("a", f"k{i:02d}") for i in range(0, 50, 2)])
    snap = store.snapshot()
    report = store.reclaim()
    assert isinstance(report, swarmstate.ReclaimReport)
    assert report.backend == type(store).__name__
    assert report.bytes_freed == report.bytes_before - report.bytes_after
    doc = json.loads(json.dumps(report.as_dict()))
    assert doc["bytes_freed"] == report.bytes_freed
    assert set(doc) == {f.name for f in dataclasses.fields(report)} | {"bytes_freed"}
    assert store.keys("a") == [f"k{i:02d}" for i in range(1, 50, 2)]
    assert store.get("a", "k01") == {"i": 1}
    assert snap.get("a", "k03") == {"i": 3}
    assert store.reclaim(full=False).backend == report.backend


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_reclaim_refuses_a_full_that_is_not_a_bool(store: swarmstate.BaseStore, bad: Any) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError, match="full"):
        store.reclaim(full=bad)


def test_reclaim_of_a_closed_store_is_refused(durable_store_factory: Any) -> None:
    store = durable_store_factory()
    store.close()
    with pytest.raises(swarmstate.StoreClosedError):
        store.reclaim()


def test_the_in_memory_store_has_nothing_to_give_back() -> None:
    store = swarmstate.Store()
    store.set("a", "k", 1)
    report = store.reclaim(full=True)
    assert (report.bytes_before, report.bytes_after, report.pages_freed) == (0, 0, 0)
    assert report.complete
    assert "memory" in report.note
    assert store.get("a", "k") == 1


# -- DiskStore ---------------------------------------------------------------------


def test_a_new_file_is_created_for_incremental_reclaim(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    DiskStore(path).close()
    assert pragma(path, "auto_vacuum") == 2  # INCREMENTAL


def test_reclaim_shrinks_a_thinned_file_and_keeps_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    with DiskStore(path) as store:
        counts = fill_and_thin(store)
        before = file_bytes(path)
        report = store.reclaim()
        after = file_bytes(path)
        assert Path(f"{path}-wal").stat().st_size == 0  # truncated, while still open
        assert_left_intact(store, counts)
    assert report.bytes_before == before
    assert report.bytes_after == after
    assert after < before * 0.3  # nine tenths of the entries went
    assert report.pages_freed > 0
    assert report.pages_left == 0
    assert report.complete, report.note
    assert report.steps > 1  # in short steps, not one long transaction
    assert report.longest_step_seconds <= report.seconds
    again = DiskStore(path)
    assert again.reclaim().pages_freed == 0  # nothing left to give back
    again.close()


def test_reclaim_keeps_snapshots_readable(tmp_path: Path) -> None:
    with DiskStore(tmp_path / "s.db") as store:
        store.set_many([("a", f"k{i:04d}", BLOB) for i in range(400)])
        snap = store.snapshot()
        store.delete_prefix("a")
        store.reclaim()
        assert store.count("a") == 0
        assert snap.get("a", "k0399") == BLOB
        store.restore(snap)
        assert store.count("a") == 400


def test_reclaim_through_a_readonly_handle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    DiskStore(path).close()
    with DiskStore(path, readonly=True) as store, pytest.raises(swarmstate.ReadOnlyStoreError):
        store.reclaim()


def test_a_reader_holding_the_log_leaves_it_untruncated_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    with DiskStore(path) as store:
        fill_and_thin(store, namespaces=8, per=100)
        store.reclaim()  # the log is empty now
        store.delete_prefix("big0")
        # A read transaction that began while the log held those commits.
        reader = connect(path)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM entries").fetchone()[0] > 0
        started = time.monotonic()
        held = store.reclaim()
        waited = time.monotonic() - started
        reader.execute("COMMIT")
        reader.close()
        done = store.reclaim()
    assert not held.complete
    assert "reader" in held.note
    assert held.seconds <= waited
    assert done.complete, done.note
    assert done.bytes_after < held.bytes_after


def _old_none_file(tmp_path: Path) -> Path:
    """swarmstate 0.1.0's file (``auto_vacuum = NONE``), opened and written by today's code."""
    path = tmp_path / "old.db"
    shutil.copyfile(OLD_FILE, path)
    path.chmod(0o600)
    return path


def test_an_old_file_without_incremental_reclaim_is_left_whole(tmp_path: Path) -> None:
    path = _old_none_file(tmp_path)
    with DiskStore(path) as store:
        assert pragma(path, "auto_vacuum") == 0  # opening it did not change it
        counts = fill_and_thin(store, namespaces=10, per=100)
        old = {ns: store.items(ns, raw=True) for ns in store.namespaces() if ns not in counts}
        before = file_bytes(path)
        report = store.reclaim()
        assert_left_intact(store, counts)
        assert {ns: store.items(ns, raw=True) for ns in old} == old
    assert pragma(path, "auto_vacuum") == 0
    assert report.pages_freed == 0
    assert report.pages_left > 0
    assert not report.complete
    assert "reclaim(full=True)" in report.note
    assert file_bytes(path) <= before  # the log was truncated; the file kept its pages


def test_a_full_reclaim_converts_an_old_file_to_incremental(tmp_path: Path) -> None:
    path = _old_none_file(tmp_path)
    with DiskStore(path) as store:
        counts = fill_and_thin(store, namespaces=10, per=100)
        old = {ns: store.items(ns, raw=True) for ns in store.namespaces() if ns not in counts}
        store.reclaim()
        before = file_bytes(path)
        report = store.reclaim(full=True)
        assert_left_intact(store, counts)
        assert {ns: store.items(ns, raw=True) for ns in old} == old
        assert pragma(path, "auto_vacuum") == 2
        assert report.full
        assert report.complete, report.note
        assert report.bytes_after < before * 0.3
        # From now on the file gives pages back in steps.
        store.delete_prefix("big0")
        store.delete_prefix("big1")
        later = store.reclaim()
    assert later.pages_freed > 0
    assert not later.full
    assert later.complete, later.note
    assert pragma(path, "integrity_check") == "ok"


def _writer(path: str, started: Any, stop: Any, queue: Any) -> None:
    """Write one small entry after another until told to stop; report each write's times."""
    times: list[tuple[float, float]] = []
    try:
        with DiskStore(path) as store:
            i = 0
            while not stop.is_set():
                began = time.monotonic()
                store.set("writer", f"w{i:08d}", i)
                times.append((began, time.monotonic()))
                i += 1
                if i == 50:
                    started.set()
        queue.put(("ok", times))
    except BaseException as exc:  # reported to the test
        queue.put(("error", repr(exc)))


@pytest.mark.slow
def test_a_writer_in_another_process_keeps_writing_during_reclaim(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with DiskStore(path) as store:
        counts = fill_and_thin(store, namespaces=80)
        ctx = multiprocessing.get_context("spawn")
        started, stop, queue = ctx.Event(), ctx.Event(), ctx.Queue()
        writer = ctx.Process(target=_writer, args=(str(path), started, stop, queue))
        writer.start()
        try:
            assert started.wait(60), "the writer did not start"
            before = file_bytes(path)
            t0 = time.monotonic()
            report = store.reclaim()
            t1 = time.monotonic()
            time.sleep(0.05)
        finally:
            stop.set()
        status, times = queue.get(timeout=60)
        writer.join(60)
        assert (status, writer.exitcode) == ("ok", 0), times
        # Nothing lost: every write the writer saw succeed is there.
        assert store.count("writer") == len(times)
        assert store.get("writer", f"w{len(times) - 1:08d}") == len(times) - 1
        assert_left_intact(store, counts)
    assert report.steps >= 10, report
    assert file_bytes(path) < before * 0.5
    # It kept writing between the steps: at least one write per step...
    during = [(a, b) for a, b in times if t0 <= b and a <= t1]
    assert len(during) >= report.steps, (len(during), report)
    # ... and never waited for a long part of the run (a VACUUM would hold it
    # for all of it): its longest write, and its longest pause between writes.
    done = sorted(b for _, b in during)
    gaps = [b - a for a, b in zip([t0, *done], [*done, t1], strict=True)]
    assert max(b - a for a, b in during) < (t1 - t0) / 2, report
    assert max(gaps) < (t1 - t0) / 2, report


# -- PostgresStore -----------------------------------------------------------------


def _table_stats(conninfo: str, schema: str) -> tuple[int, dict[str, tuple[int, int]]]:
    """Total size of the store's tables, and each table's (vacuum_count, analyze_count)."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        total = conn.execute(
            "SELECT sum(pg_total_relation_size(relid)) FROM pg_stat_user_tables "
            "WHERE schemaname = %s",
            (schema,),
        ).fetchone()
        counts = conn.execute(
            "SELECT relname, vacuum_count, analyze_count FROM pg_stat_user_tables "
            "WHERE schemaname = %s",
            (schema,),
        ).fetchall()
    assert total is not None
    return int(total[0]), {name: (int(v), int(a)) for name, v, a in counts}


@pytest.mark.postgres
def test_postgres_reclaim_vacuums_every_table_and_reports_their_sizes(
    pg_store_factory: Any, pg_conninfo: str
) -> None:
    store = pg_store_factory()
    # Values that do not compress, so they take their room in TOAST; the ones
    # deleted were written last, so the space they leave is at the tables' ends.
    for ns in ("kept", "gone"):
        store.set_many([(ns, f"k{i:04d}", os.urandom(3000)) for i in range(300)])
    kept = store.items("kept", raw=True)
    store.delete_prefix("gone")
    before, counts = _table_stats(pg_conninfo, store.schema)
    assert set(counts) == {"entries", "snapshots", "meta", "migrations"}
    report = store.reclaim()
    after, counts_after = _table_stats(pg_conninfo, store.schema)
    assert (report.backend, report.bytes_before, report.bytes_after) == (
        "PostgresStore",
        before,
        after,
    )
    assert after < before
    assert report.pages_freed == (before - after) // 8192
    assert report.complete, report.note
    assert report.steps == 4
    for table, (vacuums, analyzes) in counts_after.items():
        assert vacuums == counts[table][0] + 1, table
        assert analyzes == counts[table][1] + 1, table
    assert store.items("kept", raw=True) == kept
    assert store.count("gone") == 0
    full = store.reclaim(full=True)
    assert not full.full
    assert "VACUUM FULL" in full.note


@pytest.mark.postgres
def test_postgres_reclaim_by_a_role_that_may_not_vacuum_says_so(
    pg_store_factory: Any, pg_conninfo: str
) -> None:
    import secrets

    import psycopg
    from psycopg import sql

    from swarmstate.backends.postgres import PostgresStore

    owner = pg_store_factory()
    owner.set("a", "k", 1)
    role = f"r_{secrets.token_hex(6)}"
    ident, schema = sql.Identifier(role), sql.Identifier(owner.schema)
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, ident))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, ident))
    params = psycopg.conninfo.conninfo_to_dict(pg_conninfo)
    params["user"] = role
    try:
        with PostgresStore(
            psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()}),
            schema=owner.schema,
        ) as guest:
            assert guest.get("a", "k") == 1
            report = guest.reclaim()
        assert not report.complete
        assert "entries" in report.note
        assert owner.get("a", "k") == 1
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(ident))

"""DiskStore beyond the shared contract: the file, reopening, processes, crashes.

The contract tests and the state machine run against DiskStore through the
``store_factory`` fixture; this file checks what only a file-backed store
has: durability across close/reopen and process kills, several processes
and threads on one file, fork, permissions, and refusing bad files.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

import swarmstate
from swarmstate.backends.disk import DiskStore, opening, schema, statements


def raw(path: Path) -> apsw.Connection:
    """A plain read-only SQLite connection, to look at the file behind the store."""
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)


def scalar(path: Path, query: str) -> Any:
    conn = raw(path)
    try:
        row: Any = conn.execute(query).fetchone()
        return row[0]
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


# -- reopen and snapshots on disk -------------------------------------------------


def test_reopen_between_steps_keeps_values_and_snapshots(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("t/1", "a", {"x": 1}), ("t/1", "b", [1, 2]), ("t/2", "a", b"\x00")])
    first = store.snapshot()
    store.close()

    store = DiskStore(db)
    store.set("t/1", "a", {"x": 2})
    store.delete("t/2", "a")
    second = store.snapshot()
    store.clear()
    store.close()

    store = DiskStore(db)
    assert len(store) == 0
    assert [s.id for s in store.snapshots()] == [first.id, second.id]
    old, new = store.snapshots()
    assert old.get("t/1", "a") == {"x": 1}
    assert new.get("t/1", "a") == {"x": 2}
    assert new.diff(old) == {"added": [], "removed": [("t/2", "a")], "changed": [("t/1", "a")]}
    assert (old.count, new.count) == (3, 2)
    store.restore(old)
    store.close()

    store = DiskStore(db)
    assert store.items("t/1") == [("a", {"x": 1}), ("b", [1, 2])]
    assert store.get("t/2", "a") == b"\x00"
    assert store.snapshot().parent == first.id
    store.close()


def test_snapshot_copies_no_rows_and_a_write_keeps_one_old_version(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("ns", f"k{i}", i) for i in range(100)])
    rows = scalar(db, "SELECT count(*) FROM entries")
    store.snapshot()
    assert scalar(db, "SELECT count(*) FROM entries") == rows
    store.set("ns", "k1", "new")
    store.set("ns", "k1", "newer")  # no snapshot since: overwritten in place
    assert scalar(db, "SELECT count(*) FROM entries") == rows + 1
    store.close()


def test_restoring_the_latest_snapshot_copies_nothing(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("ns", f"k{i:03d}", i) for i in range(100)])
    snap = store.snapshot()
    store.set_many([("ns", f"k{i:03d}", -i - 1) for i in range(10)])
    store.delete("ns", "k050")
    store.set("ns", "new", 1)
    store.restore(snap)
    # The old rows become current again; the rows written since are gone.
    assert scalar(db, "SELECT count(*) FROM entries") == 100
    assert store.items("ns", limit=3) == [("k000", 0), ("k001", 1), ("k002", 2)]
    assert store.get("ns", "k050") == 50
    assert not store.contains("ns", "new")
    store.close()


def test_restore_of_an_older_snapshot_keeps_later_snapshots_intact(db: Path) -> None:
    store = DiskStore(db)
    store.set("ns", "k", "v1")
    first = store.snapshot()
    store.set("ns", "k", "v2")
    second = store.snapshot()
    store.set("ns", "k", "v3")
    store.restore(first)
    store.restore(first)  # a second restore finds the same bytes and writes nothing
    assert store.get("ns", "k") == "v1"
    assert (first.get("ns", "k"), second.get("ns", "k")) == ("v1", "v2")
    third = store.snapshot()
    assert third.diff(second) == {"added": [], "removed": [], "changed": [("ns", "k")]}
    assert third.diff(first) == {"added": [], "removed": [], "changed": []}
    store.close()


def test_max_history_reclaims_old_versions_and_survives_reopen(db: Path) -> None:
    store = DiskStore(db, max_history=2)
    for round_ in range(40):
        store.set_many([("ns", f"k{i}", bytes([round_]) * 2000) for i in range(20)])
        store.snapshot()
        if round_ == 20:
            size_mid = db.stat().st_size + Path(f"{db}-wal").stat().st_size
    # Live rows plus the versions the two retained snapshots need, nothing more.
    assert scalar(db, "SELECT count(*) FROM entries") <= 20 * 2
    size_end = db.stat().st_size + Path(f"{db}-wal").stat().st_size
    assert size_end <= size_mid * 1.5  # freed pages are reused, the file stops growing
    kept = [s.id for s in store.snapshots()]
    assert kept == [39, 40]
    store.close()

    store = DiskStore(db, max_history=2)
    with pytest.raises(swarmstate.SnapshotError, match="evicted"):
        store.restore(
            swarmstate.Snapshot(id=5, parent=4, timestamp=0.0, size_bytes=0, count=0, _store=store)
        )
    oldest = store.snapshots()[0]
    assert oldest.get("ns", "k0") == bytes([38]) * 2000
    store.close()


def test_len_and_sizes_follow_writes_across_snapshots(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("a", "x", "1234"), ("a", "y", None)])
    assert len(store) == 2
    snap = store.snapshot()
    store.set("a", "x", "12")
    store.delete("a", "y")
    store.set("b", "z", 1)
    assert len(store) == 2
    later = store.snapshot()
    assert (snap.size_bytes, later.size_bytes) == (
        len(swarmstate.dumps("1234")) + len(swarmstate.dumps(None)),
        len(swarmstate.dumps("12")) + len(swarmstate.dumps(1)),
    )
    store.restore(snap)
    assert len(store) == 2
    assert store.snapshot().size_bytes == snap.size_bytes
    store.close()


def test_setup_is_idempotent_and_records_the_format(db: Path) -> None:
    store = DiskStore(db)
    store.set("a", "x", 1)
    store.setup()
    store.setup()
    assert store.get("a", "x") == 1
    assert scalar(db, "PRAGMA user_version") == schema.SCHEMA_VERSION
    assert scalar(db, "PRAGMA application_id") == schema.APPLICATION_ID
    assert scalar(db, "PRAGMA journal_mode") == "wal"
    conn = raw(db)
    rows: list[Any] = conn.execute("SELECT name, value FROM meta").fetchall()
    meta = dict(rows)
    conn.close()
    assert meta["codec"] == "msgpack"
    assert meta["format"] == "swarmstate"
    assert meta["uid"] == store._uid
    versions = [v for v, _ in schema.MIGRATIONS]
    assert versions == sorted(versions)
    assert versions[-1] == schema.SCHEMA_VERSION
    store.close()


@pytest.mark.parametrize(("level", "code"), [("NORMAL", 1), ("FULL", 2), ("full", 2)])
def test_synchronous_level_is_applied(db: Path, level: str, code: int) -> None:
    store = DiskStore(db, synchronous=level)
    row: Any = store._db.conn().execute("PRAGMA synchronous").fetchone()
    assert row[0] == code
    store.close()


# -- queries stay indexed -------------------------------------------------------------

INDEXED_QUERIES = [
    (statements.GET, ("ns", "k")),
    (statements.EXISTS, ("ns", "k")),
    (statements.PUT_FAST, ("ns", "k", 1, b"\xc0")),
    (statements.PUT_FAST_UNLESS, ("ns", "k", 1, b"\xc0", "guard", "g")),
    (statements.RANGE_SQL[("key, value", True, True, True)], ("ns", "a", "b", 1)),
    (statements.RANGE_SQL[("key", False, False, True)], ("ns", None, None, 1)),
    (statements.NAMESPACES_SQL[True], ("t/", "t0")),
    (statements.PREFIX_ROWS_SQL[True], ("t/", "t0")),
    (statements.PREFIX_DELETE_NEW_SQL[True], ("t/", "t0")),
    (statements.PREFIX_END_SQL[True], ("t/", "t0")),
    (statements.SNAPSHOT_GET, ("ns", "k", 5, 1)),
    (statements.RESTORE_PLAN, {"m": 1, "v": 1}),
    (statements.DIFF, {"lo": 1, "lo_m": 1, "hi": 2, "hi_m": 2, "a": 1, "a_m": 1, "b": 2, "b_m": 2}),
    (statements.TOTALS, ()),
    (statements.TAGGED_SQL[("order", True, True, False)], ("a", "b", 10)),
    (statements.TAGGED_SQL[("group", False, False, True)], (10,)),
    (statements.TAG_DELETE_NEW_SQL[("order", True, False)], ("a",)),
    (statements.TAG_END_SQL[("group", False, True)], ("z",)),
    (statements.PUT_FAST_TAGGED, ("ns", "k", 1, b"\xc0", "o", None)),
]


@pytest.mark.parametrize(("query", "params"), INDEXED_QUERIES, ids=lambda q: str(q)[:40])
def test_hot_queries_never_scan_the_entries_table(db: Path, query: str, params: Any) -> None:
    store = DiskStore(db)
    store.set_many([(f"t/{i % 10}", f"k{i}", i) for i in range(500)])
    plan = [row[3] for row in store._db.conn().execute("EXPLAIN QUERY PLAN " + query, params)]
    assert plan
    assert not [step for step in plan if step.startswith("SCAN") and "entries" in step], plan
    store.close()


def test_one_row_conditional_write_is_one_statement_without_a_temporary_btree(db: Path) -> None:
    """The write of every unclaimed checkpoint alone: decided inside one statement, in each case."""
    store = DiskStore(db)
    conn = store._db.conn()
    opcodes = [row[1] for row in conn.execute("EXPLAIN " + statements.PUT_FAST_UNLESS, (1,) * 6)]
    assert "OpenEphemeral" not in opcodes  # an INSERT ... SELECT from entries copies first
    store.set("guard", "taken", 1)

    def one(key: str, data: bytes, condition: str) -> int:
        params = ("ns", key, len(data), data, "guard", condition)
        return store._db.one_statement(statements.PUT_FAST_UNLESS, params)

    assert one("k", b"\x01", "free") == 1  # inserted
    assert one("k", b"\x02", "free") == 1  # overwritten in place
    before = dict(store.items("ns"))
    assert one("k", b"\x03", "taken") == 0
    assert one("new", b"\x03", "taken") == 0
    assert dict(store.items("ns")) == before == {"k": 2}
    snap = store.snapshot()
    # The current row is one the snapshot needs: the statement leaves it to the checked path.
    assert one("k", b"\x04", "free") == 0
    assert store.get("ns", "k") == 2
    free = [(("guard", "free"), swarmstate.ABSENT)]
    assert store._put_required([(("ns", "k"), b"\x04")], False, [], free) == 1
    assert (store.get("ns", "k"), snap.get("ns", "k")) == (4, 2)
    store.close()


def test_one_statement_writes_reuse_one_cursor_of_the_writer(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("ns", "a", 1)], require=[("guard", "g", swarmstate.ABSENT)])
    cursor = store._db._write_cursor
    assert cursor is not None
    assert cursor.connection is store._db._writer
    store.set_many([("ns", "b", 2)], require=[("guard", "g", swarmstate.ABSENT)])
    assert store._db._write_cursor is cursor
    assert dict(store.items("ns")) == {"a": 1, "b": 2}
    store.close()


# -- bad input ---------------------------------------------------------------------


def test_lone_surrogate_key_is_refused_and_changes_nothing(db: Path) -> None:
    store = DiskStore(db)
    store.set("ns", "k", "kept")
    with pytest.raises(swarmstate.InvalidKeyError, match="surrogate"):
        store.set("ns", "\udc80", 1)
    with pytest.raises(swarmstate.InvalidKeyError):
        store.set_many([("ns", "k", "changed"), ("\ud800", "k", 1)])
    assert store.get("ns", "k") == "kept"
    assert len(store) == 1
    store.close()


def test_path_in_missing_directory_raises_storage_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "store.db"
    with pytest.raises(swarmstate.StorageError, match="does not exist") as info:
        DiskStore(target)
    assert isinstance(info.value, OSError)
    assert not target.parent.exists()


def test_directory_as_path_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(swarmstate.StorageError, match="directory"):
        DiskStore(tmp_path)


def test_file_that_is_not_sqlite_is_refused_untouched(db: Path) -> None:
    db.write_bytes(b"checkpoint data, not a database\n" * 200)
    before = digest(db)
    with pytest.raises(swarmstate.IncompatibleStoreError, match="not a SQLite database"):
        DiskStore(db)
    assert digest(db) == before
    assert not Path(f"{db}-wal").exists()


def test_sqlite_file_of_another_program_is_refused_untouched(db: Path) -> None:
    other = apsw.Connection(str(db))
    other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    other.execute("INSERT INTO invoices VALUES (1, 9.5)")
    other.close()
    before = digest(db)
    with pytest.raises(swarmstate.IncompatibleStoreError, match="not made by swarmstate"):
        DiskStore(db)
    assert digest(db) == before
    assert scalar(db, "PRAGMA journal_mode") == "delete"


def test_newer_schema_version_is_refused_untouched(db: Path) -> None:
    store = DiskStore(db)
    store.set("a", "x", 1)
    store.close()
    conn = apsw.Connection(str(db))
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    before = digest(db)
    with pytest.raises(swarmstate.IncompatibleStoreError, match="newer"):
        DiskStore(db)
    assert digest(db) == before
    conn = apsw.Connection(str(db))
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
    conn.close()
    with DiskStore(db) as again:
        assert again.get("a", "x") == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"synchronous": "OFF"},
        {"synchronous": 1},
        {"busy_timeout": 0},
        {"busy_timeout": "5"},
        {"busy_timeout": True},
        {"max_history": 0},
    ],
)
def test_bad_options_raise_invalid_argument(db: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError):
        DiskStore(db, **kwargs)
    assert not db.exists()


def test_missing_apsw_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["apsw"] = None  # as if the disk extra were not installed
        try:
            import swarmstate.backends.disk
        except ImportError as exc:
            import swarmstate
            assert isinstance(exc, swarmstate.MissingDependencyError), type(exc)
            print(exc)
        else:
            raise SystemExit("imported without apsw")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "pyswarmstate[disk]"' in done.stdout


# -- lifecycle -------------------------------------------------------------------------


def test_closed_store_raises_store_closed(db: Path) -> None:
    store = DiskStore(db)
    store.set("a", "x", 1)
    snap = store.snapshot()
    store.close()
    store.close()  # idempotent
    for call in (
        lambda: store.get("a", "x"),
        lambda: store.set("a", "x", 2),
        lambda: store.set_many([("a", "x", 2)]),
        lambda: store.keys("a"),
        lambda: len(store),
        lambda: store.snapshot(),
        lambda: store.snapshots(),
        lambda: store.restore(snap),
        lambda: snap.get("a", "x"),
        lambda: store.clear(),
    ):
        with pytest.raises(swarmstate.StoreClosedError):
            call()
    with DiskStore(db) as again:
        assert again.get("a", "x") == 1


# -- permissions --------------------------------------------------------------------


def test_new_files_are_owner_only(db: Path) -> None:
    old_umask = os.umask(0)
    try:
        store = DiskStore(db)
        store.set("a", "x", 1)
        for name in (str(db), f"{db}-wal", f"{db}-shm"):
            assert os.stat(name).st_mode & 0o777 == 0o600, name
        store.close()
    finally:
        os.umask(old_umask)


def test_opening_a_looser_file_logs_a_warning_once_saying_what_it_allows(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    DiskStore(db).close()
    for mode, allows in ((0o644, "can read the store"), (0o664, "can read and change the store")):
        os.chmod(db, mode)
        with caplog.at_level(logging.WARNING, logger="swarmstate"):
            DiskStore(db).close()
            DiskStore(db).close()  # the same file again: said once is enough
        warnings = [r.getMessage() for r in caplog.records if r.name == "swarmstate"]
        assert len(warnings) == 1, warnings
        assert f"{mode:o}" in warnings[0]
        assert allows in warnings[0]
        assert "chmod 600" in warnings[0]
        caplog.clear()
    os.chmod(db, 0o600)
    with caplog.at_level(logging.WARNING, logger="swarmstate"):
        DiskStore(db).close()
    assert not [r for r in caplog.records if r.name == "swarmstate"]


def test_a_connection_where_a_path_belongs_is_refused_with_the_fix(db: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        with pytest.raises(
            swarmstate.InvalidArgumentError, match=r"takes a file path.*sqlite3 or apsw"
        ):
            DiskStore(conn)  # type: ignore[arg-type]
    finally:
        conn.close()


# -- several handles, threads, processes ---------------------------------------------


def test_two_handles_see_each_others_writes_and_snapshots(db: Path) -> None:
    one, two = DiskStore(db), DiskStore(db)
    one.set("a", "x", 1)
    assert two.get("a", "x") == 1
    snap = two.snapshot()
    one.set("a", "x", 2)
    assert len(two) == 1
    assert two.get("a", "x") == 2
    one.restore(snap)  # a snapshot taken through another handle of the same file
    assert two.get("a", "x") == 1
    assert one.snapshot().parent == snap.id
    one.close()
    two.close()


def test_threads_share_one_store(db: Path) -> None:
    store = DiskStore(db)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(150):
                store.set(f"t{n}", f"{i:04d}", i)
                assert store.get(f"t{n}", f"{i:04d}") == i
                if i % 50 == 0:
                    store.snapshot()
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store) == 600
    assert [store.count(f"t{n}") for n in range(4)] == [150] * 4
    store.close()


def test_threads_that_come_and_go_reuse_the_connections_of_ended_ones(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangGraph writes checkpoints from a new executor's threads on every invoke.
    store = DiskStore(db)
    store.set("ns", "warm", 0)
    used: list[apsw.Connection] = []
    opened: list[str] = []
    real_open = opening.open_connection
    monkeypatch.setattr(opening, "open_connection", lambda p: (opened.append(p), real_open(p))[1])

    def write(key: str) -> None:
        store.set("ns", key, 1)
        used.append(store._db.conn())

    for round_ in range(10):
        pair = [threading.Thread(target=write, args=(f"{round_}.{n}",)) for n in range(2)]
        for thread in pair:  # two at a time, as an executor's workers run
            thread.start()
        for thread in pair:
            thread.join()
    assert len(used) == 20
    assert 1 <= len(opened) <= 2  # two threads at a time: at most two connections, reused
    assert len(store._db._conns) <= 3  # with the main thread's
    assert store.count("ns") == 21
    store.close()


def test_a_connection_left_inside_a_transaction_is_not_reused(db: Path) -> None:
    store = DiskStore(db)
    left: list[apsw.Connection] = []

    def abandon() -> None:
        conn = store._db.conn()
        conn.execute("BEGIN")  # a thread that ended mid-transaction (it cannot happen
        left.append(conn)  # through the store's API, which always ends its own)

    thread = threading.Thread(target=abandon)
    thread.start()
    thread.join()
    got: list[apsw.Connection] = []
    thread = threading.Thread(
        target=lambda: (store.set("ns", "k", 1), got.append(store._db.conn()))
    )
    thread.start()
    thread.join()
    assert got[0] is not left[0]
    assert store.get("ns", "k") == 1
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_child_after_fork_opens_its_own_connection(db: Path) -> None:
    from swarmstate.backends.disk import process

    store = DiskStore(db)
    store.set("a", "parent", 1)
    parent_conn = store._db.conn()
    parent_cursor = store._db._write_cursor  # kept by the one-statement write
    assert parent_cursor is not None
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never return to pytest
        code = 1
        try:
            assert store.get("a", "parent") == 1
            store.set("a", "child", 2)
            assert store._db.conn() is not parent_conn
            # The parent's cursor is kept, never freed here (freeing takes its mutex).
            assert store._db._write_cursor is not parent_cursor
            assert any(kept is parent_cursor for kept in process.ABANDONED)
            store.snapshot()
            store.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store._db.conn() is parent_conn
    assert store.get("a", "child") == 2
    assert [s.id for s in store.snapshots()] == [1]
    store.set("a", "parent", 3)
    assert store.get("a", "parent") == 3
    store.close()


def _spawned_writer(path: str, worker: int, writes: int) -> None:
    """Write ``writes`` keys of its own; any exception fails the process."""
    store = DiskStore(path)
    for i in range(writes):
        if i % 100 == 99:
            store.set_many([(f"w{worker}", f"{i:05d}", i), ("shared", f"{worker}", i)])
        else:
            store.set(f"w{worker}", f"{i:05d}", i)
        if i % 500 == 0:
            store.snapshot()
    store.close()


@pytest.mark.slow
def test_four_spawned_processes_write_one_file(db: Path) -> None:
    DiskStore(db).close()  # create it before the writers race to
    writes = 2000
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_spawned_writer, args=(str(db), n, writes)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    with DiskStore(db) as store:
        for n in range(4):
            assert store.keys(f"w{n}") == [f"{i:05d}" for i in range(writes)]
            assert store.get_many([(f"w{n}", f"{i:05d}") for i in range(writes)]) == list(
                range(writes)
            )
        assert len(store) == 4 * writes + 4
        assert len(store.snapshots()) == 4 * (writes // 500)
    assert scalar(db, "PRAGMA integrity_check") == "ok"


def _racing_opener(directory: str, worker: int, files: int, start: Any, errors: Any) -> None:
    """Open each new file at the same moment as the other workers; report failures."""
    for n in range(files):
        start.wait()
        try:
            with DiskStore(os.path.join(directory, f"race-{n}.db")) as store:
                store.set("opened", f"w{worker}", n)
        except Exception as exc:  # sent to the parent, which fails the test with it
            errors.put(f"worker {worker}, file {n}: {exc!r}")


@pytest.mark.slow
def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    # The first opener switches the file to WAL and creates the schema while
    # the others read it: none may fail or see a half-made store.
    files, workers = 20, 4
    context = multiprocessing.get_context("spawn")
    start, errors = context.Barrier(workers), context.Queue()
    procs = [
        context.Process(target=_racing_opener, args=(str(tmp_path), w, files, start, errors))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert failures == []
    assert [p.exitcode for p in procs] == [0] * workers
    for n in range(files):
        with DiskStore(tmp_path / f"race-{n}.db") as store:
            assert store.items("opened") == [(f"w{w}", n) for w in range(workers)]


_KILLED_WRITER = """
import os, sys
from swarmstate.backends.disk import DiskStore

store = DiskStore(sys.argv[1], synchronous=sys.argv[2])
i = 0
while True:
    store.set("stream", f"{i:08d}", {"i": i, "pad": "x" * (i % 3000)})
    if i % 50 == 49:
        snap = store.snapshot()
        os.write(1, f"snap {snap.id} {i}\\n".encode())
    os.write(1, f"ack {i}\\n".encode())  # only after the write returned
    i += 1
"""


@pytest.mark.slow
@pytest.mark.parametrize("level", ["FULL", "NORMAL"])
def test_sigkill_mid_stream_loses_no_acknowledged_write(db: Path, level: str) -> None:
    DiskStore(db, synchronous=level).close()
    acked: list[int] = []
    snaps: dict[int, int] = {}
    command = [sys.executable, "-c", _KILLED_WRITER, str(db), level]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as writer:
        assert writer.stdout is not None
        try:
            for line in writer.stdout:
                kind, *numbers = line.split()
                if kind == b"ack":
                    acked.append(int(numbers[0]))
                else:
                    snaps[int(numbers[0])] = int(numbers[1])
                if len(acked) == 400:
                    writer.send_signal(signal.SIGKILL)
                    break
            rest = writer.stdout.read()  # acks written before the kill landed
        finally:
            writer.kill()
            writer.wait(timeout=30)
    acked += [int(line.split()[1]) for line in rest.splitlines() if line.startswith(b"ack")]
    assert writer.returncode == -signal.SIGKILL
    assert acked == list(range(len(acked)))

    assert scalar(db, "PRAGMA integrity_check") == "ok"
    with DiskStore(db, synchronous=level) as store:
        assert scalar(db, "PRAGMA integrity_check") == "ok"
        found = store.get_many([("stream", f"{i:08d}") for i in acked])
        assert [v["i"] for v in found] == acked
        retained = {s.id: s for s in store.snapshots()}
        for sid, last in snaps.items():
            assert retained[sid].get("stream", f"{last:08d}") == {
                "i": last,
                "pad": "x" * (last % 3000),
            }
        store.set("stream", "after", 1)  # the file is writable again


def test_a_single_ensured_write_keeps_what_a_snapshot_needs(db: Path) -> None:
    # Ensured entries beside a row a snapshot needs: the old value stays for it.
    store = DiskStore(db)
    store.set_many([("data", "k", "v1"), ("index", "i", None)])
    snap = store.snapshot()
    assert store.set_many([("data", "k", "v2")], ensure=[("index", "i", None)]) == 1
    assert store.set_many([("data", "k", "v3")], ensure=[("index", "i", None)]) == 1
    assert store.set_many([("data", "k", "v4")], ensure=[("index", "new", 0)]) == 2
    assert (store.get("data", "k"), snap.get("data", "k")) == ("v4", "v1")
    assert store.get("index", "new") == 0
    store.restore(snap)
    assert store.get("data", "k") == "v1"
    assert not store.contains("index", "new")
    store.close()


def test_one_batch_mixes_new_keys_fresh_rows_and_rows_a_snapshot_needs(db: Path) -> None:
    # set_many writes most rows in place and ends only the versions a
    # snapshot still needs; one batch holding all three cases, twice the
    # same key included, must stay atomic and keep every snapshot exact.
    store = DiskStore(db)
    store.set_many([("ns", "old", "v0"), ("ns", "gone", "g0")])
    snap = store.snapshot()
    store.set("ns", "fresh", "f0")  # written after the latest snapshot
    store.set_many(
        [
            ("ns", "old", "v1"),  # current version needed by snap
            ("ns", "fresh", "f1"),  # no snapshot needs f0: overwritten in place
            ("ns", "new", "n1"),
            ("ns", "old", "v2"),  # same key again in one batch: last one wins
        ]
    )
    assert store.items("ns") == [("fresh", "f1"), ("gone", "g0"), ("new", "n1"), ("old", "v2")]
    assert snap.get("ns", "old") == "v0"
    assert snap.get("ns", "fresh") is None
    assert scalar(db, "SELECT count(*) FROM entries WHERE ns = 'ns' AND key = 'old'") == 2
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.set_many([("ns", "old", "v3"), ("ns", "new", object())])
    assert store.get("ns", "old") == "v2"  # nothing of the failed batch landed
    assert len(store) == 4
    store.restore(snap)
    assert store.items("ns") == [("gone", "g0"), ("old", "v0")]
    store.close()


def test_every_connection_plans_statements_independently_of_bound_values(db: Path) -> None:
    # With STAT4 built in, a range query whose plan looked at a bound value
    # is re-prepared on every call; the stability guarantee prevents that.
    store = DiskStore(db)
    seen: list[int] = []

    def worker() -> None:
        seen.append(store._db.conn().config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, -1))

    worker()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [1, 1]
    store.close()


def _write_until_refused(
    store: DiskStore, started: threading.Event, ended: list[BaseException]
) -> None:
    """Loop on set() until the store refuses; record how it ended."""
    try:
        i = 0
        while True:
            store.set("ns", f"k{i % 50}", b"x" * 20_000)
            i += 1
            if i == 60:  # every key written at least once
                started.set()
    except BaseException as exc:  # checked by the main thread
        ended.append(exc)
    finally:
        started.set()


@pytest.mark.parametrize("trial", range(20))
def test_close_while_another_thread_writes_closes_every_connection(db: Path, trial: int) -> None:
    store = DiskStore(db)
    store.get("ns", "k0")  # this thread's connection too
    started, ended = threading.Event(), []
    writer = threading.Thread(target=_write_until_refused, args=(store, started, ended))
    writer.start()
    assert started.wait(timeout=60)
    store.close()  # raises nothing, even with the writer inside a call
    writer.join(timeout=60)
    assert not writer.is_alive()
    assert len(ended) == 1
    assert isinstance(ended[0], swarmstate.StoreClosedError), repr(ended[0])
    assert [c for c in apsw.connections() if c.filename == str(db)] == []
    store.close()
    with DiskStore(db) as again:  # what was acknowledged is there
        assert again.count("ns") == 50


def _traced(store: DiskStore) -> list[str]:
    """Every statement the store's write connection runs from now on, as its text."""
    seen: list[str] = []

    def trace(cursor: Any, statement: str, bindings: Any) -> bool:
        seen.append(" ".join(statement.split()))
        return True

    store._db._write_conn().exec_trace = trace
    return seen


def test_a_guarded_write_of_one_row_is_one_statement(db: Path) -> None:
    """A checkpoint under its thread's guard: no transaction around it, one INSERT."""
    store = DiskStore(db)
    store.set("tomb", "z", 1)
    seen = _traced(store)
    guard = [
        swarmstate.Absent("claims", "t"),
        swarmstate.Empty("tomb", None, "m"),
        swarmstate.Present("tomb", "z"),
    ]
    assert store.write(swarmstate.Transaction(conditions=guard, sets=[("t", "c1", 1)])).written == 1
    assert len(seen) == 1
    assert seen[0].startswith("INSERT OR IGNORE INTO entries")
    seen.clear()
    # A broken condition: the statement writes nothing, and the transaction says why.
    with pytest.raises(swarmstate.ConflictError, match="Empty"):
        store.write(
            swarmstate.Transaction(
                conditions=[swarmstate.Empty("tomb", "a")], sets=[("t", "c2", 2)]
            )
        )
    assert seen[1:2] == ["BEGIN IMMEDIATE"]
    assert seen[-1] == "ROLLBACK"
    assert store.keys("t") == ["c1"]
    store.close()


def _racing_writer(path: str, worker: int, rounds: int, start: Any, results: Any) -> None:
    """Each round, write under conditions that only one of the racers can meet."""
    with DiskStore(path) as store:
        for n in range(rounds):
            start.wait()
            claim = swarmstate.Transaction(
                conditions=[swarmstate.Absent("claim", f"{n}")], sets=[("claim", f"{n}", worker)]
            )
            # Each racer's key is its own, but falls in the range the other requires empty.
            mark = swarmstate.Transaction(
                conditions=[swarmstate.Empty("marks", f"{n}/", f"{n}0")],
                sets=[("marks", f"{n}/{worker}", worker)],
            )
            for kind, transaction in (("claim", claim), ("mark", mark)):
                try:
                    store.write(transaction)
                    results.put((kind, n, worker))
                except swarmstate.ConflictError:
                    pass


@pytest.mark.slow
def test_processes_racing_a_conditioned_write_have_one_winner(db: Path) -> None:
    DiskStore(db).close()
    rounds, workers = 40, 2
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(workers), context.Queue()
    procs = [
        context.Process(target=_racing_writer, args=(str(db), w, rounds, start, results))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    won = [results.get(timeout=120) for _ in range(2 * rounds)]
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    assert results.empty()
    with DiskStore(db) as store:
        for kind in ("claim", "mark"):
            winners = {n: w for k, n, w in won if k == kind}
            assert sorted(winners) == list(range(rounds))  # one winner a round
            keys = {"claim": "{n}", "mark": "{n}/{w}"}[kind]
            expected = sorted((keys.format(n=n, w=w), w) for n, w in winners.items())
            assert store.items("claim" if kind == "claim" else "marks") == expected


# -- schema version 3: tags -------------------------------------------------------


def _as_version_2(path: Path) -> None:
    """Turn a closed store's file into what a version 2 release wrote: no tag columns."""
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute("DROP INDEX entries_order")
        conn.execute("DROP INDEX entries_group")
        conn.execute("ALTER TABLE entries DROP COLUMN tag_order")
        conn.execute("ALTER TABLE entries DROP COLUMN tag_group")
        conn.execute("UPDATE meta SET value = '2' WHERE name = 'schema_version'")
        conn.execute("PRAGMA user_version = 2")
    conn.close()


def test_a_version_2_file_is_read_as_it_is_and_gains_tags_when_opened_to_write(db: Path) -> None:
    store = DiskStore(db)
    store.set_many([("ns", "a", 1), ("ns", "b", 2)])
    snap_id = store.snapshot().id
    store.set("ns", "a", 3)
    store.close()
    _as_version_2(db)
    before = digest(db)

    reader = DiskStore(db, readonly=True)
    assert reader.items("ns") == [("a", 3), ("b", 2)]
    assert reader.tagged("order") == []
    assert reader.tagged("group", reverse=True) == []
    assert [s.id for s in reader.snapshots()] == [snap_id]
    reader.close()
    assert digest(db) == before  # a read-only open changes nothing

    store = DiskStore(db)  # migrates to version 3
    assert scalar(db, "PRAGMA user_version") == schema.SCHEMA_VERSION == 3
    assert store.items("ns") == [("a", 3), ("b", 2)]
    assert store.tagged("order") == []
    store.write(
        swarmstate.Transaction(sets=[("ns", "c", 4, swarmstate.Tags(order="t", group="g"))])
    )
    assert store.tagged("order") == [("t", "ns", "c")]
    (snap,) = store.snapshots()
    store.restore(snap)  # a snapshot of the version 2 file restores
    assert store.items("ns") == [("a", 1), ("b", 2)]
    assert store.tagged("order") == []
    store.close()
    reader = DiskStore(db, readonly=True)
    assert reader.items("ns") == [("a", 1), ("b", 2)]
    reader.close()


def test_a_version_1_file_is_refused_read_only_and_left_untouched(db: Path) -> None:
    DiskStore(db).close()
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    before = digest(db)
    with pytest.raises(
        swarmstate.IncompatibleStoreError, match="version 1, older than this swarmstate reads"
    ):
        DiskStore(db, readonly=True)
    assert digest(db) == before

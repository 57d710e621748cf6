"""``DiskStore(path, readonly=True)``, the open every command uses: it reads, and changes nothing.

Checked on real files: a closed store, a store a killed writer left with its
log, a store another process is writing, read-only files and directories,
and files that are not stores at all.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import swarmstate
from swarmstate.backends.disk import DiskStore
from tests.support.cli import (
    directory_state,
    leave_log_behind,
    make_store,
    unprivileged,
    writer_holding_transaction,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


def test_readonly_store_reads_what_the_writer_committed(db: Path) -> None:
    content = make_store(db)
    with DiskStore(db) as writer:
        expected = (writer.namespaces(), len(writer), writer.keys("ns1"), writer.items("ns2"))
        first, second = writer.snapshots()
        expected_diff = second.diff(first)
    with DiskStore(db, readonly=True) as store:
        assert (store.namespaces(), len(store), store.keys("ns1"), store.items("ns2")) == expected
        assert store.get_many(list(content)) == list(content.values())
        old, new = store.snapshots()
        assert new.diff(old) == expected_diff
        assert old.get("ns0", "k000") == content[("ns0", "k000")]
        assert new.count == len(content)


def test_every_write_through_a_readonly_store_raises_and_changes_nothing(db: Path) -> None:
    make_store(db)
    before = directory_state(db.parent)
    with DiskStore(db, readonly=True) as store:
        snap = store.snapshots()[0]
        writes = {
            "set": lambda: store.set("ns0", "k000", 1),
            "set_many": lambda: store.set_many([("a", "b", 1)]),
            "set_many ensure": lambda: store.set_many([], ensure=[("a", "b", 1)]),
            # One row on a condition: the one-statement write.
            "set_many require": lambda: store.set_many(
                [("a", "b", 1)], require=[("a", "c", swarmstate.ABSENT)]
            ),
            "set_many require present": lambda: store.set_many(
                [("a", "b", 1)], require=[("ns0", "k000", swarmstate.PRESENT)]
            ),
            # One row on conditions: the one-statement write; then the transaction.
            "write one row": lambda: store.write(
                swarmstate.Transaction(conditions=[swarmstate.Empty("a")], sets=[("a", "b", 1)])
            ),
            "write": lambda: store.write(swarmstate.Transaction(prefix_deletes=["ns"])),
            "write conditions": lambda: store.write(
                swarmstate.Transaction(conditions=[swarmstate.Present("ns0", "k000")])
            ),
            "delete": lambda: store.delete("ns0", "k000"),
            "delete_many": lambda: store.delete_many([("ns0", "k000")]),
            "delete_prefix": lambda: store.delete_prefix("ns"),
            "copy_prefix": lambda: store.copy_prefix("ns0", "copy"),
            "clear": store.clear,
            "snapshot": store.snapshot,
            "restore": lambda: store.restore(snap),
            "setup": store.setup,
        }
        for name, write in writes.items():
            with pytest.raises(swarmstate.ReadOnlyStoreError, match="readonly=True"):
                write()
            assert isinstance(swarmstate.ReadOnlyStoreError("x"), PermissionError), name
        assert store.get("ns0", "k000") == {"i": 0, "text": ""}
    assert directory_state(db.parent) == before


def test_readonly_open_of_a_closed_store_leaves_its_directory_exactly_as_it_was(db: Path) -> None:
    make_store(db)
    before = directory_state(db.parent)
    assert list(before) == ["state.db"]
    store = DiskStore(db, readonly=True)
    assert len(store) == 30
    store.snapshots()[0].keys  # noqa: B018 - a read through a snapshot
    store.close()
    assert directory_state(db.parent) == before


def test_readonly_open_of_a_store_a_killed_writer_left_reads_its_log(db: Path) -> None:
    make_store(db)
    leave_log_behind(db)
    before = directory_state(db.parent)
    with DiskStore(db, readonly=True) as store:
        assert store.keys("killed") == [f"k{i:03d}" for i in range(50)]
    after = directory_state(db.parent)
    assert after.keys() == before.keys()  # no file created or removed
    assert after["state.db"] == before["state.db"]
    assert after["state.db-wal"] == before["state.db-wal"]  # the log is not folded in


def test_readonly_store_sees_a_writer_that_arrives_after_it_opened(db: Path) -> None:
    make_store(db)
    reader = DiskStore(db, readonly=True)
    assert reader.get("late", "k") is None  # opened while no process had the file
    with DiskStore(db) as writer:
        writer.set("late", "k", 1)
        assert reader.get("late", "k") == 1
        writer.set("late", "k", 2)
        assert reader.get("late", "k") == 2
    reader.close()
    reader = DiskStore(db, readonly=True)
    code = (
        "from swarmstate.backends.disk import DiskStore; "
        f"DiskStore({str(db)!r}).set('late', 'k', 3)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert reader.get("late", "k") == 3  # written and checkpointed while it was open
    reader.close()


def test_readonly_read_does_not_wait_for_another_process_write_transaction(db: Path) -> None:
    content = make_store(db)
    # Waiting for the writer at all would fail here: the lock outlives the timeout.
    with writer_holding_transaction(db), DiskStore(db, readonly=True, busy_timeout=0.2) as store:
        assert store.get_many(list(content)) == list(content.values())
        assert store.snapshots()[1].count == len(content)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        ("missing", swarmstate.StorageError),
        ("empty", swarmstate.IncompatibleStoreError),
        ("text", swarmstate.IncompatibleStoreError),
        ("foreign sqlite", swarmstate.IncompatibleStoreError),
        ("foreign sqlite wal", swarmstate.IncompatibleStoreError),
        ("directory", swarmstate.StorageError),
    ],
)
def test_readonly_open_refuses_what_is_not_a_store_and_leaves_it_untouched(
    db: Path, make: str, error: type[Exception]
) -> None:
    if make == "empty":
        db.touch()
    elif make == "text":
        db.write_text("not a database\n")
    elif make == "directory":
        db.mkdir()
    elif make.startswith("foreign"):
        conn = sqlite3.connect(db)
        if make.endswith("wal"):
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
        conn.commit()
        conn.close()
    before = directory_state(db.parent) if make != "directory" else None
    with pytest.raises(error) as caught:
        DiskStore(db, readonly=True)
    assert "point it at a new path" not in str(caught.value)
    if make != "directory":
        assert directory_state(db.parent) == before
    assert db.exists() == (make != "missing")


def test_readonly_open_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    code = textwrap.dedent(
        f"""
        from swarmstate.backends.disk import DiskStore
        try:
            DiskStore({str(fifo)!r}, readonly=True)
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.startswith("StorageError")
    assert "not a regular file" in out.stdout


def test_readonly_open_refuses_a_log_without_its_shared_memory_file(db: Path) -> None:
    make_store(db)
    leave_log_behind(db)
    Path(f"{db}-shm").unlink()
    before = directory_state(db.parent)
    with pytest.raises(swarmstate.StorageError, match="-shm"):
        DiskStore(db, readonly=True)
    assert directory_state(db.parent) == before


def test_readonly_must_be_a_bool(db: Path) -> None:
    make_store(db)
    with pytest.raises(swarmstate.InvalidArgumentError, match="readonly"):
        DiskStore(db, readonly=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["file 0400", "directory 0500", "directory 0500 with log"])
def test_read_only_files_and_directories_are_read_and_left_as_they_are(
    tmp_path: Path, case: str
) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    db = directory / "state.db"
    content = make_store(db)
    if case.endswith("with log"):
        leave_log_behind(db)
    for name in os.listdir(directory):
        (directory / name).chmod(0o400)
    if case.startswith("directory"):
        directory.chmod(0o500)
    try:
        before = directory_state(directory)
        read = (
            "from swarmstate.backends.disk import DiskStore; "
            f"store = DiskStore({str(db)!r}, readonly=True); "
            "print(len(store), store.get('ns0', 'k000'))"
        )
        out = subprocess.run(
            [*unprivileged(), sys.executable, "-c", read], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        expected = len(content) + (50 if case.endswith("with log") else 0)
        assert out.stdout.split(maxsplit=1) == [str(expected), f"{content[('ns0', 'k000')]}\n"]
        # It ran where the file (and the directory) really cannot be written.
        probe = f"open({str(db)!r}, 'r+b')"
        if case.startswith("directory"):
            probe += f"; open({str(directory / 'new')!r}, 'x')"
        denied = subprocess.run(
            [*unprivileged(), sys.executable, "-c", probe], capture_output=True, text=True
        )
        assert denied.returncode != 0
        assert "PermissionError" in denied.stderr
        assert directory_state(directory) == before
    finally:
        directory.chmod(0o700)
        for name in os.listdir(directory):
            (directory / name).chmod(0o600)

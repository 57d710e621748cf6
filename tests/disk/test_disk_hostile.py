"""DiskStore against hostile files and processes: fork mid-write, copies, foreign WAL, FIFOs.

Each test here reproduces a defect an adversarial review found (issue 14)
and failed before the fix.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import apsw
import pytest

import swarmstate
from swarmstate.backends.disk import DiskStore, writes
from swarmstate.backends.disk.connections import Connections
from tests.support.copies import check_a_copy_refuses_the_originals_later_snapshots

# Set by the first at-fork hook to run (hooks registered later run first, and
# DiskStore's was registered when the import above ran): a fork has begun.
_FORKING = threading.Event()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_FORKING.set)

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
# Python 3.12+ warns that forking a process with threads is unsafe: that is
# exactly the situation under test.
forks_with_threads = pytest.mark.filterwarnings("ignore:.*multi-threaded.*:DeprecationWarning")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hold_a_write(store: DiskStore, inside: threading.Event, release: threading.Event) -> None:
    """Write one row in a transaction kept open until ``release`` is set."""
    data = swarmstate.dumps("held")

    def body(conn: object) -> None:
        writes.put(conn, [("a", "held", len(data), data)])  # type: ignore[arg-type]
        inside.set()
        release.wait(timeout=60)

    store._db.write("hold", body)


def _child_exit(check: object) -> None:
    """Run ``check()`` in a forked child and leave with its verdict as the exit code."""
    code = 1
    try:
        check()  # type: ignore[operator]
        code = 0
    except BaseException as exc:  # reported through the exit code and stderr
        os.write(2, f"child: {exc!r}\n".encode())
    finally:
        os._exit(code)


# -- fork during a write transaction -------------------------------------------------


@needs_fork
@forks_with_threads
def test_fork_during_a_write_waits_for_it_and_the_child_can_write(db: Path) -> None:
    store = DiskStore(db, busy_timeout=5)
    inside, release = threading.Event(), threading.Event()
    writer = threading.Thread(target=_hold_a_write, args=(store, inside, release))
    writer.start()
    assert inside.wait(timeout=60)
    # The writer is inside its transaction and stays there until a fork begins.
    _FORKING.clear()
    watcher = threading.Thread(target=lambda: (_FORKING.wait(timeout=60), release.set()))
    watcher.start()
    pid = os.fork()
    if pid == 0:

        def check() -> None:
            assert store.get("a", "held") == "held"  # committed before the fork
            store.set("a", "child", 1)
            with DiskStore(db, busy_timeout=1) as again:
                again.set("a", "again", 2)

        _child_exit(check)
    release.set()
    writer.join()
    watcher.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get_many([("a", "held"), ("a", "child"), ("a", "again")]) == ["held", 1, 2]
    store.close()


@needs_fork
@forks_with_threads
def test_a_child_forked_while_a_write_outlasts_busy_timeout_refuses_the_file_at_once(
    db: Path,
) -> None:
    store = DiskStore(db, busy_timeout=0.2)
    inside, release = threading.Event(), threading.Event()
    writer = threading.Thread(target=_hold_a_write, args=(store, inside, release))
    writer.start()
    assert inside.wait(timeout=60)
    pid = os.fork()  # waits busy_timeout for the writer, then forks anyway
    if pid == 0:

        def check() -> None:
            with pytest.raises(swarmstate.StorageError, match="forked while another thread"):
                store.set("a", "child", 1)
            with pytest.raises(swarmstate.StorageError, match="forked while another thread"):
                DiskStore(db, busy_timeout=30)

        _child_exit(check)
    release.set()
    writer.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get("a", "held") == "held"
    store.set("a", "parent", 1)  # the parent is unaffected
    store.close()


@needs_fork
@forks_with_threads
def test_threads_of_a_child_making_their_first_calls_at_once_reset_the_store_once(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two resets would give the two threads two write locks over one write
    # connection: apsw's ThreadingViolationError, or one thread's statement
    # inside the other's transaction.
    store = DiskStore(db)
    store.set("a", "parent", 1)  # the parent's write connection exists
    pid = os.fork()
    if pid == 0:

        def check() -> None:
            resets: list[str] = []
            real = Connections._reset_process_state

            def slow_reset(self: Connections) -> None:
                resets.append(threading.current_thread().name)
                threading.Event().wait(0.2)  # the other thread arrives meanwhile
                real(self)

            monkeypatch.setattr(Connections, "_reset_process_state", slow_reset)
            start, errors = threading.Barrier(2), []

            def first_calls(name: str) -> None:
                start.wait()
                try:
                    store.set_many([("child", f"{name}{i}", i) for i in range(50)])
                    for i in range(50):
                        store.set("child", f"{name}-one{i}", i)
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=first_calls, args=(n,)) for n in "ab"]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            assert len(resets) == 1
            assert store.count("child") == 200

        _child_exit(check)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.count("child") == 200
    store.close()


def test_an_interrupt_right_after_begin_leaves_no_transaction_open(db: Path) -> None:
    # A KeyboardInterrupt landing as BEGIN returns: the write connection, shared
    # by the process, must not stay in that transaction (later writes would
    # join it and never commit).
    store = DiskStore(db)
    store.set("a", "b", 1)
    real = store._db.retry_busy

    def interrupted(attempt: object, *args: object) -> object:
        real(attempt, *args)  # type: ignore[arg-type]  # runs BEGIN IMMEDIATE
        store._db.retry_busy = real  # type: ignore[method-assign]
        raise KeyboardInterrupt

    store._db.retry_busy = interrupted  # type: ignore[method-assign,assignment]
    with pytest.raises(KeyboardInterrupt):
        store.delete("a", "b")
    other = threading.Thread(target=lambda: store.set("x", "y", 42))
    other.start()
    other.join()
    store.set_many([("m", "n", 1), ("m", "o", 2)])
    with DiskStore(db, readonly=True) as reader:
        assert reader.get_many([("a", "b"), ("x", "y"), ("m", "n")]) == [1, 42, 1]
    store.close()
    with DiskStore(db) as again:
        assert again.get("x", "y") == 42


# -- a copied file ---------------------------------------------------------------------


def test_a_copy_of_the_file_refuses_the_snapshots_the_original_takes_later(
    tmp_path: Path,
) -> None:
    original, copy = tmp_path / "a.db", tmp_path / "b.db"
    with DiskStore(original) as a:
        a.set("ns", "k", "shared")
        shared = a.snapshot()
    shutil.copyfile(original, copy)
    with DiskStore(original) as a, DiskStore(copy) as b:
        check_a_copy_refuses_the_originals_later_snapshots(a, b, shared)


def test_snapshots_taken_before_the_token_column_still_restore(db: Path) -> None:
    with DiskStore(db) as store:
        store.set("ns", "k", 1)
        store.snapshot()
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE snapshots SET token = NULL")  # as a version 1 file left them
    conn.close()
    with DiskStore(db) as again:
        again.set("ns", "k", 2)
        (old,) = again.snapshots()
        again.restore(old)
        assert again.get("ns", "k") == 1


# -- a foreign file with a leftover WAL ------------------------------------------------

_CRASHED_FOREIGN_WRITER = """
import os, sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
os._exit(0)  # a crash: the last commit lives only in the -wal
"""


def test_a_foreign_file_with_a_leftover_wal_is_refused_byte_for_byte_untouched(
    db: Path,
) -> None:
    subprocess.run([sys.executable, "-c", _CRASHED_FOREIGN_WRITER, str(db)], check=True, timeout=60)
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > 0
    before = (_digest(db), _digest(wal))
    with pytest.raises(swarmstate.IncompatibleStoreError, match="not made by swarmstate"):
        DiskStore(db)
    assert (_digest(db), _digest(wal)) == before


def test_a_file_whose_only_schema_is_in_the_leftover_wal_is_refused_untouched(
    db: Path,
) -> None:
    code = _CRASHED_FOREIGN_WRITER.replace('conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")\n', "")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, timeout=60)
    wal = Path(f"{db}-wal")
    before = (_digest(db), _digest(wal))
    with pytest.raises(swarmstate.IncompatibleStoreError, match="not made by swarmstate"):
        DiskStore(db)
    assert (_digest(db), _digest(wal)) == before


# -- paths that are not regular files --------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX only")
def test_a_fifo_is_refused_at_once(db: Path) -> None:
    os.mkfifo(db)
    code = textwrap.dedent(
        """
        import sys
        import swarmstate
        from swarmstate.backends.disk import DiskStore
        try:
            DiskStore(sys.argv[1])
        except swarmstate.StorageError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "is a FIFO, not a regular file" in done.stdout


def test_a_socket_a_device_and_a_fifo_beside_the_file_are_refused(db: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(db))
        with pytest.raises(swarmstate.StorageError, match="is a socket, not a regular file"):
            DiskStore(db)
    os.unlink(db)
    if os.path.exists(os.devnull) and os.path.dirname(os.devnull):
        with pytest.raises(swarmstate.StorageError, match="is a device, not a regular file"):
            DiskStore(os.devnull)
    if hasattr(os, "mkfifo"):
        os.mkfifo(f"{db}-wal")
        with pytest.raises(swarmstate.StorageError, match="-wal is a FIFO"):
            DiskStore(db)
        assert not db.exists()


def test_a_symbolic_link_is_refused(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "real.db"
    DiskStore(target).close()
    db.symlink_to(target)
    with pytest.raises(swarmstate.StorageError, match="symbolic link"):
        DiskStore(db)

"""Helpers for the command-line tests: run the command, fingerprint files, hold a writer.

Imported by ``tests/cli/test_cli*.py`` as ``tests.support.cli``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, prefix: list[str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m swarmstate ARGS`` in a fresh process; never raises on a non-zero exit."""
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "swarmstate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
    )


def directory_state(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every file in ``directory``: content digest, size and mtime (ns)."""
    state = {}
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        info = entry.stat(follow_symlinks=False)
        with open(entry.path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        state[entry.name] = (digest, info.st_size, info.st_mtime_ns)
    return state


def make_store(path: Path, entries: int = 30) -> dict[tuple[str, str], Any]:
    """A closed DiskStore at ``path`` with ``entries`` values and two snapshots; its content."""
    from swarmstate.backends.disk import DiskStore

    content = {(f"ns{i % 3}", f"k{i:03d}"): {"i": i, "text": "x" * i} for i in range(entries)}
    with DiskStore(path) as store:
        items = list(content.items())
        store.set_many([(ns, key, value) for (ns, key), value in items[: entries // 2]])
        store.snapshot()
        store.set_many([(ns, key, value) for (ns, key), value in items[entries // 2 :]])
        store.snapshot()
    return content


def leave_log_behind(path: Path, entries: int = 50) -> None:
    """Write ``entries`` values in a process that is then killed: ``-wal``/``-shm`` stay."""
    code = textwrap.dedent(
        f"""
        import os, signal
        from swarmstate.backends.disk import DiskStore
        store = DiskStore({str(path)!r})
        for i in range({entries}):
            store.set("killed", f"k{{i:03d}}", i)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=False, timeout=120)
    assert Path(f"{path}-wal").exists()
    assert Path(f"{path}-shm").exists()


@contextmanager
def writer_holding_transaction(path: Path) -> Iterator[None]:
    """Another process holds an open write transaction on ``path`` for the ``with`` block.

    It rewrites every value to ``"uncommitted"`` inside ``BEGIN IMMEDIATE``
    and waits for its stdin to close, then rolls back.
    """
    code = textwrap.dedent(
        f"""
        import sys, apsw, swarmstate
        conn = apsw.Connection({str(path)!r})
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE entries SET value = ?", (swarmstate.dumps("uncommitted"),))
        print("holding", flush=True)
        sys.stdin.read()
        conn.execute("ROLLBACK")
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "holding"
            yield
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)


def unprivileged() -> list[str]:
    """A command prefix under which file permissions apply (root bypasses them).

    As root, ``setpriv`` drops the capabilities that override permissions,
    so a 0400 file or 0500 directory is really read-only for the command.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file read-only for a test")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]

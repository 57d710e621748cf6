"""DiskStore across threads and processes: closing busy connections, and fork.

Fork. SQLite keeps its locks per process, in tables that ``fork()`` copies:
a child forked while a thread of its parent held a write transaction would
believe, forever, that the write lock is taken, on every connection to that
file. So a fork is held off until no registered store of this process is
inside a write (each for at most its ``busy_timeout``); a child forked anyway
refuses that file at once (:func:`forked_mid_write`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Protocol

from swarmstate.backends.disk.driver import Connection, apsw

__all__ = ["ABANDONED", "RESETTING", "Entry", "close_all", "forked_mid_write", "register"]

Entry = tuple[weakref.ref[threading.Thread], Connection]
"""A connection and the thread it was opened for."""

ABANDONED: list[Connection | apsw.Cursor] = []
"""Connections (and a store's kept write cursor) inherited across fork: never
closed nor freed in the child, where closing could disturb the parent's locks
and WAL, and freeing takes a mutex a parent thread may have held at the fork."""


class _Writer(Protocol):
    """What the fork hooks need of a store handle's connections (its writes' lock)."""

    path: str
    pid: int
    write_lock: threading.Lock
    busy_timeout: float


def close_all(conns: list[Entry], deadline: float) -> list[Entry]:
    """Close each connection, waiting (until ``deadline``) for those busy in another thread.

    Returns the ones still open: busy past the deadline, then interrupted.
    """
    pause = 0.0005
    while True:
        busy = []
        for entry in conns:
            try:
                entry[1].close()
            except apsw.ThreadingViolationError:
                busy.append(entry)  # a call is running on it in another thread
            except apsw.Error:
                pass  # closing failed (an I/O error): SQLite has released it all the same
        if not busy:
            return []
        if time.monotonic() >= deadline:
            for _, conn in busy:
                conn.interrupt()  # safe from any thread: the call ends with an error
            return busy
        conns = busy
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


_WRITERS: weakref.WeakSet[_Writer] = weakref.WeakSet()
_REGISTRY_LOCK = threading.Lock()
RESETTING = _REGISTRY_LOCK
"""Held while a store of a forked child leaves its parent's connections behind.

The fork hooks hold it across ``fork()``, so no other thread holds it in a
child, where a lock held by a thread of the parent would stay held forever."""
_HELD: list[threading.Lock] = []
_UNSETTLED: list[str] = []
_WEDGED: set[str] = set()
"""Files this process (a child) cannot use: forked during a write to them."""


def register(writer: _Writer) -> None:
    """Hold off forks of this process while ``writer`` (a store's connections) is inside a write."""
    with _REGISTRY_LOCK:
        _WRITERS.add(writer)


def forked_mid_write(path: str) -> bool:
    """Whether this process was forked while a thread of its parent wrote to ``path``."""
    return path in _WEDGED


def _before_fork() -> None:
    """Hold off the fork until no store of this process is inside a write transaction."""
    _REGISTRY_LOCK.acquire()  # released after the fork, in both processes
    for writer in list(_WRITERS):
        if writer.pid != os.getpid():
            continue  # inherited from a parent and not used here: no write can run
        if writer.write_lock.acquire(timeout=writer.busy_timeout):
            _HELD.append(writer.write_lock)
        else:
            _UNSETTLED.append(writer.path)


def _after_fork(in_child: bool) -> None:
    if in_child:
        _WEDGED.update(_UNSETTLED)
    for lock in _HELD:
        lock.release()
    _HELD.clear()
    _UNSETTLED.clear()
    _REGISTRY_LOCK.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=lambda: _after_fork(in_child=False),
        after_in_child=lambda: _after_fork(in_child=True),
    )

"""The cyclic garbage collector held off while one read builds many objects.

A DeltaChannel history read returns, for every checkpoint of a page, fresh
copies of its seed value and writes: at 800 messages, some 15,000 message
objects per ``get_state_history(limit=20)``, every one of which lives on in
the returned states. CPython's collector counts such allocations and, every
tenth young-generation pass, runs a full collection over the whole heap; in
one profiled read those passes took about as long as the read's own
decoding. Nothing the read allocates is garbage, so they find nothing. Held
off for the read, the young objects are collected once when it ends, and the
full passes that would have come due mostly do not.

The collector's switch is process wide, so a hold is kept short and shared:

* Overlapping reads (threads) share one hold: the first one in turns the
  collector off if it was on, the last one out turns it back on. Allocation
  in other threads goes uncollected meanwhile.
* Reads that overlap without a break would keep it off for good; so a read
  ending while others still hold runs a collection itself once the hold has
  lasted :data:`LONGEST` seconds, and the hold starts over. Garbage waits at
  most that long, plus one read.
* An interrupt (a ``KeyboardInterrupt`` raised between any two steps)
  cannot leave a hold behind, and the collector on or off by mistake at
  most until the next hold ends: a hold notes that it turned the collector
  off before it does, and its token is let go in one step or, failing
  that, with the hold's frame.
* A forked child starts with no hold, its collector as the parent's was
  before the hold.
* A ``gc.disable()`` made by other code while a read is under way is undone
  when the hold ends; code that needs the collector off for good should call
  it outside saver reads.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["LONGEST", "collector_held"]

LONGEST: Final = 1.0  # seconds the collector stays off while reads overlap without a break

_lock = threading.RLock()  # re-entrant: a signal handler may read while its thread is in here


class _Token:
    """One hold; held weakly, so a hold whose read was interrupted ends with its frame."""

    __slots__ = ("__weakref__",)


_holds: weakref.WeakSet[_Token] = weakref.WeakSet()
_off = False  # the collector is off because a hold turned it off
_since = 0.0  # when the hold began (time.monotonic)


@contextmanager
def collector_held() -> Iterator[None]:
    """Hold off the cyclic collector while the body runs (see the module docstring)."""
    token = _Token()
    try:
        _enter(token)
        yield
    finally:
        if _leave(token):
            gc.collect()


def _enter(token: _Token) -> None:
    global _off, _since
    with _lock:
        if not _holds:
            _since = time.monotonic()
        _holds.add(token)  # before it, nothing has changed
        if _off or gc.isenabled():
            _off = True  # set first: a collector still on is turned back "on" harmlessly
            gc.disable()


def _leave(token: _Token) -> bool:
    """Let ``token`` go; whether the caller should collect (the hold lasted too long)."""
    global _off, _since
    # One step: whatever interrupts after it, the token is gone (and if it
    # interrupts before, the token goes with the generator's frame); the state
    # below is decided from what is held (a later hold finds _off set and ends
    # it as this one would have).
    _holds.discard(token)
    with _lock:
        if not _off:
            return False
        if not _holds:
            gc.enable()
            _off = False
            return False
        now = time.monotonic()
        if now - _since < LONGEST:
            return False
        _since = now
        return True


def _after_fork_in_child() -> None:
    global _lock, _off
    _lock = threading.RLock()
    _holds.clear()
    if _off:
        gc.enable()
        _off = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

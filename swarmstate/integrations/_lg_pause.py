"""The cyclic garbage collector held off while one read builds many objects.

A DeltaChannel history read returns, for every checkpoint of a page, fresh
copies of its seed value and writes: at 800 messages, some 15,000 message
objects per ``get_state_history(limit=20)``, every one of which lives on in
the returned states. CPython's collector counts such allocations and, every
tenth young-generation pass, runs a full collection over the whole heap; in a
measured read that was two full collections of ~100 ms each, inside a call
whose own decoding took ~110 ms. Nothing the read allocates is garbage, so
those passes find nothing. Held off for the read, the young objects are
collected once when it ends, and the full passes that would have come due
mostly do not.

The collector's switch is process wide. Nested and concurrent reads share
one hold (a count under a lock): the first one in turns the collector off if
it was on, the last one out turns it back on. Allocation in other threads
goes uncollected for as long as a read lasts. A ``gc.disable()`` made by
other code while a read is under way is undone when the read ends; code that
needs the collector off for good should call it outside saver reads.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_held"]

_lock = threading.Lock()
_holders = 0
_resume = False  # whether the last holder turns the collector back on


@contextmanager
def collector_held() -> Iterator[None]:
    """Hold off the cyclic collector while the body runs (see the module docstring)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            if _resume:
                gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()

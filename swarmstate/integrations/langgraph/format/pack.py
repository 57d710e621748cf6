"""Compression of the byte strings the saver stores: checkpoint entries, chunks, pending writes.

Serialized messages compress well (their field names and class paths repeat
message after message, and text is text), and neither SQLite nor PostgreSQL
compresses a row of a few kilobytes: PostgreSQL starts at about 2 kB per
row, with an algorithm that finds repeats but does not code entropy. So the
saver compresses such strings itself, with zlib at level 1 (the fastest:
about 10 us a kilobyte to pack, a third of that to unpack, measured here),
and keeps the result only when it is at least an eighth smaller. Stored
forms say which they are, so every earlier row still reads as it was.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

from swarmstate._checks import MAX_VALUE_BYTES
from swarmstate._codec import dumps

__all__ = ["AT_LEAST", "CHUNK_AT_LEAST", "inflate_envelope", "pack", "pack_envelope", "unpack"]

_TAG: Final = 1
"""The first element of a stored ``[1, packed, size]`` envelope."""

AT_LEAST: Final = 256
"""Shorter strings are stored as they are (too little to gain)."""
CHUNK_AT_LEAST: Final = 1024
"""A chunk shorter than this (usually the new bytes of one put, written by
that put) is stored as it is. zlib lets other threads run while it works, and
on the runtime's worker threads a put then waits for the main thread to give
the interpreter back, which costs far more than the compression itself
(measured in the growth section). Merged chunks, written once per several
puts, hold most of a conversation's bytes and are compressed."""


def pack(raw: bytes, at_least: int = AT_LEAST) -> bytes | None:
    """``raw`` compressed, or None when it is shorter than ``at_least`` or does not
    compress by an eighth."""
    if not at_least <= len(raw) <= MAX_VALUE_BYTES:
        # Past the most a store holds in one value no reader would inflate it.
        return None
    packed = zlib.compress(raw, 1)
    return packed if len(packed) <= len(raw) - len(raw) // 8 else None


def unpack(packed: bytes, size: int) -> bytes | None:
    """The ``size`` bytes ``packed`` holds, or None when it does not hold exactly that.

    Never inflates past ``size``, so a damaged row cannot take more memory
    than the value it stood for, and refuses a ``size`` past
    :data:`~swarmstate._checks.MAX_VALUE_BYTES` (no writer makes one) before
    inflating anything.
    """
    if not 1 <= size <= MAX_VALUE_BYTES:
        return None
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, size)
    except (zlib.error, OverflowError, MemoryError):
        return None
    if len(raw) != size or not inflate.eof or inflate.unconsumed_tail or inflate.unused_data:
        return None
    return raw


def pack_envelope(raw: bytes, at_least: int = AT_LEAST) -> bytes | None:
    """``raw`` stored compressed, as the msgpack ``[1, packed, size]``; None as :func:`pack`."""
    packed = pack(raw, at_least)
    return None if packed is None else dumps([_TAG, packed, len(raw)])


def inflate_envelope(stored: Any) -> bytes | None:
    """The bytes a decoded ``[1, packed, size]`` envelope holds; None when ``stored`` is
    not one, or does not inflate to exactly its size."""
    if (
        type(stored) is list
        and len(stored) == 3
        and stored[0] == _TAG
        and type(stored[1]) is bytes
        and type(stored[2]) is int
    ):
        return unpack(stored[1], stored[2])
    return None

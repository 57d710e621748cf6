"""The items of a msgpack array, as bytes: its header and where each item ends.

Used where the serializer's bytes of a list are cut into items: the memo of
serialized messages (:mod:`.memo`) and the list segments of the earlier
layout (:mod:`.legacy`).
"""

from __future__ import annotations

from array import array

import msgpack

from swarmstate._errors import DecodeError

__all__ = ["array_header", "header", "item_ends", "split"]


def array_header(data: bytes | memoryview) -> tuple[int, int] | None:
    """``(item count, header length)`` of msgpack bytes holding an array, else None."""
    if not data:
        return None
    first = data[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(data) >= 3:
        return int.from_bytes(data[1:3], "big"), 3
    if first == 0xDD and len(data) >= 5:
        return int.from_bytes(data[1:5], "big"), 5
    return None


def header(count: int) -> bytes:
    """The msgpack array header of ``count`` items."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 0x10000:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def item_ends(data: bytes, start: int, count: int, *, fill: bool = True) -> array[int]:
    """Where each of ``count`` items starting at ``data[start]`` ends, relative to ``start``.

    With ``fill``, they must be all that follows (else :class:`DecodeError`).
    """
    unpacker = msgpack.Unpacker(max_buffer_size=max(len(data) - start, 1))
    unpacker.feed(memoryview(data)[start:])
    ends = array("q")
    append = ends.append
    skip, tell = unpacker.skip, unpacker.tell
    for _ in range(count):
        skip()
        append(tell())
    if fill and (ends[-1] if ends else 0) != len(data) - start:
        raise DecodeError("a list value's items do not fill its bytes")
    return ends


def split(data: bytes) -> list[bytes] | None:
    """The items of the msgpack array ``data``, each as its own bytes; None if not an array."""
    head = array_header(data)
    if head is None:
        return None
    count, skip = head
    out = []
    start = skip
    for end in item_ends(data, skip, count):
        out.append(data[start : skip + end])
        start = skip + end
    return out

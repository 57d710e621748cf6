"""Reading channel values stored by the earlier layout: list segments and values apart.

Before chunks (:mod:`.sharing`), a list value was kept as *segments* of its
items in a namespace per thread namespace, and a version as *refs*,
``[segment key, first item, end item]``, in the checkpoint entry (the
``LIST`` form); a larger value in an entry of its own under
``(channel, version)`` (the ``APART`` form). Those rows are still read, and
collected when no checkpoint references them any more; nothing writes them.
A segment is ``[lengths, items]``, or compressed ``[lengths, packed, 1]``.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from itertools import accumulate
from typing import Any, NamedTuple

from swarmstate._checks import MAX_VALUE_BYTES
from swarmstate._errors import DecodeError
from swarmstate.integrations.langgraph.format.items import header
from swarmstate.integrations.langgraph.format.pack import unpack

__all__ = ["Ref", "assemble", "parse_ref", "parse_segment"]

_PACKED = 1
"""The tag of a segment stored compressed: ``[lengths, packed, 1]``."""


class Ref(NamedTuple):
    """Items ``[start, stop)`` of one stored segment."""

    key: str
    start: int
    stop: int


def parse_ref(stored: Any) -> Ref:
    """A ref as stored, checked."""
    key, start, stop = stored
    if type(key) is not str or type(start) is not int or type(stop) is not int:
        raise DecodeError(f"a list value names a segment as {stored!r}")
    return Ref(key, start, stop)


def parse_segment(stored: Any) -> tuple[array[int], bytes]:
    """``(offsets, items)`` of a segment as the store's codec decodes it."""
    try:
        if type(stored) is not list:
            raise TypeError(f"a {type(stored).__name__}, not a list")
        packed = len(stored) == 3 and stored[2] == _PACKED and type(stored[1]) is bytes
        lengths, items = (stored[0], stored[1]) if packed else stored
        offsets = array("q", accumulate(lengths, initial=0))
        if packed:
            items = unpack(items, offsets[-1])
    except (ValueError, TypeError, OverflowError) as exc:
        raise DecodeError(f"a stored list segment is malformed ({exc})") from exc
    if type(items) is not bytes or offsets[-1] != len(items) or min(lengths, default=1) < 1:
        raise DecodeError("a stored list segment's lengths do not match its items")
    return offsets, items


def assemble(refs: tuple[Ref, ...], segments: Mapping[str, tuple[array[int], bytes]]) -> bytes:
    """The serializer's bytes of the list ``refs`` describe, from their parsed segments."""
    count = sum(ref.stop - ref.start for ref in refs)
    parts: list[bytes | memoryview] = [header(count)]
    total = 0
    for ref in refs:
        found = segments.get(ref.key)
        if found is None:
            raise DecodeError(f"list segment {ref.key!r} is missing")
        offsets, items = found
        if not 0 <= ref.start <= ref.stop < len(offsets):
            raise DecodeError(f"list segment {ref.key!r} has no items {ref.start}..{ref.stop}")
        total += offsets[ref.stop] - offsets[ref.start]
        parts.append(memoryview(items)[offsets[ref.start] : offsets[ref.stop]])
    if total > MAX_VALUE_BYTES:
        # Refs can name one segment's items many times over: refuse before joining.
        raise DecodeError(
            f"a stored list joins to {total} bytes, more than the {MAX_VALUE_BYTES} "
            "a store holds in one value"
        )
    return b"".join(parts)

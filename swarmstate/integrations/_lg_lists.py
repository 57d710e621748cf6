"""How a list-valued channel is stored so that its versions share their items.

A channel value that the serializer writes as one msgpack array (LangGraph's
``messages`` list, any ``operator.add`` list) is kept as a *listing*: the
array's items are stored in immutable *segments*, and each version of the
channel is a short list of *refs*, ``(segment key, first item, end item)``,
whose items, concatenated, are the array. Two versions share every segment
their refs have in common, so a version costs what changed, not the list.

Exact by construction: the serializer encodes the whole list once, as it
would for any other saver, and the listing is cut from those bytes. Items
are compared as bytes, never trusted unchanged because they are the same
Python object, so an old message edited in place is stored as passed. A read
puts a fresh array header in front of the refs' bytes and hands the result
to the serializer: the same bytes it wrote, so the same value.

Building a new version from the previous one (its *base*):

* append (the common case): the new items start with the base's items byte
  for byte (one ``startswith``); only the new tail is parsed and written;
* anything else (an edit in place, a removal, a replacement by id): the
  longest common prefix and suffix of items are found by bisection over
  item boundaries, and the items between them become a new segment; the
  cost follows the change;
* items removed and others added in one version (a window of messages
  trimmed at the front as each reply is added): the middle between prefix
  and suffix is searched for in the base (one ``bytes.find`` of its first
  item), and the run of base items it starts with is shared too, so only
  the added items are written;
* tiered merging keeps reads short: when ``FANIN`` trailing refs of one size
  tier have piled up, their items are written once more as one segment of
  the next tier (an appended item is rewritten about ``log_FANIN(n)`` times
  over its life, amortized), and a listing never keeps more than
  ``MAX_REFS`` refs (past it, the smallest neighbours are merged until
  half the limit is left).

Segments are named with fresh random keys (never reused), so deleting one
that nobody references can never remove the content of a newer writer. This
module does bytes only: no store access, no LangGraph import.
"""

from __future__ import annotations

import base64
import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate, pairwise
from typing import Any, NamedTuple

import msgpack

from swarmstate._codec import dumps
from swarmstate._errors import DecodeError
from swarmstate.integrations._lg_pack import SEGMENT_AT_LEAST, pack, unpack

__all__ = [
    "FANIN",
    "MAX_REFS",
    "TAIL_FANIN",
    "Listing",
    "Ref",
    "array_header",
    "assemble",
    "build",
    "header",
    "item_ends",
    "new_segment_key",
    "parse_segment",
    "split",
]

FANIN = 16
"""Trailing refs of one tier that are merged into one segment of the next tier."""
TAIL_FANIN = 8
"""The same for the smallest tier: the segments of single puts, merged sooner."""
MAX_REFS = 48
"""A listing never holds more refs; past it, the smallest neighbours are merged."""
_SEARCHES = 16
"""Matches inside an item a search for a later run skips before giving up (tiny items)."""
_PACKED = 1
"""The tag of a segment stored compressed (:mod:`._lg_pack`): ``[lengths, packed, 1]``."""


class Ref(NamedTuple):
    """Items ``[start, stop)`` of one stored segment."""

    key: str
    start: int
    stop: int


class Listing(NamedTuple):
    """One version of a list channel: the serializer's bytes and where its items are stored.

    ``data`` is what the serializer made of the whole list (an array header
    of ``start`` bytes, then the items), so a read decodes it as it is.
    ``offsets`` has ``n + 1`` entries relative to the first item: item ``i``
    is ``data[start + offsets[i] : start + offsets[i + 1]]``. Immutable once
    built, so caches and later versions share it freely.
    """

    data: bytes
    start: int
    offsets: array[int]
    refs: tuple[Ref, ...]

    @property
    def length(self) -> int:
        return len(self.offsets) - 1

    @property
    def size(self) -> int:
        """Bytes of the items, without the array header."""
        return len(self.data) - self.start


def new_segment_key() -> str:
    """A fresh segment key: 72 random bits, 12 characters."""
    return base64.urlsafe_b64encode(os.urandom(9)).decode("ascii")


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


def _common(data: bytes, skip: int, offsets: array[int], base: Listing) -> tuple[int, int]:
    """``(p, s)``: the new list's first ``p`` and last ``s`` items are the base's, as bytes."""
    # bytes.startswith/endswith with a memoryview compare with memcmp and copy
    # nothing (a memoryview == memoryview compares item by item, far slower).
    old = memoryview(base.data)[base.start :]
    n, m = len(offsets) - 1, base.length
    old_offsets = base.offsets

    def prefix_equal(k: int) -> bool:
        return offsets[k] == old_offsets[k] and data.startswith(old[: old_offsets[k]], skip)

    p = _largest(min(n, m), prefix_equal)
    new_end, old_end = offsets[n], old_offsets[m]

    def suffix_equal(k: int) -> bool:
        a, b = offsets[n - k], old_offsets[m - k]
        return new_end - a == old_end - b and data.endswith(old[b:])

    return p, _largest(min(n, m) - p, suffix_equal)


def _later_run(
    data: bytes, skip: int, offsets: array[int], p: int, stop: int, base: Listing, old_stop: int
) -> tuple[int, int] | None:
    """``(q, k)``: new items ``[p, p + k)`` are base items ``[q, q + k)``, for the first ``q > p``.

    ``q`` is where the base holds new item ``p`` (one search of the base's
    bytes; a match counts only on an item boundary), and ``k`` the longest
    run from there, below ``stop`` and ``old_stop``. None when the base's
    items ``(p, old_stop)`` do not hold new item ``p``, or when
    :data:`_SEARCHES` matches inside items came first (nothing is shared then).
    """
    old_offsets = base.offsets
    needle = data[skip + offsets[p] : skip + offsets[p + 1]]
    high = base.start + old_offsets[old_stop]
    found = base.data.find(needle, base.start + old_offsets[p + 1], high)
    for _ in range(_SEARCHES):
        if found < 0:
            return None
        q = bisect_left(old_offsets, found - base.start)
        if old_offsets[q] == found - base.start:
            break
        found = base.data.find(needle, found + 1, high)  # inside an item: look further
    else:
        return None
    old = memoryview(base.data)[base.start :]
    at = skip + offsets[p]

    def run_equal(k: int) -> bool:
        end = old_offsets[q + k]
        return offsets[p + k] - offsets[p] == end - old_offsets[q] and data.startswith(
            old[old_offsets[q] : end], at
        )

    k = _largest(min(stop - p, old_stop - q), run_equal)
    return (q, k) if k else None


def _largest(limit: int, holds: Callable[[int], bool]) -> int:
    """The largest ``k <= limit`` for which ``holds(k)``, given it holds for every smaller k."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


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


def _cut(refs: Sequence[Ref], start: int, stop: int) -> list[Ref]:
    """The refs covering items ``[start, stop)`` of the list ``refs`` describe."""
    out: list[Ref] = []
    position = 0
    for ref in refs:
        size = ref.stop - ref.start
        lo, hi = max(start, position), min(stop, position + size)
        if lo < hi:
            out.append(Ref(ref.key, ref.start + lo - position, ref.start + hi - position))
        position += size
        if position >= stop:
            break
    return out


def _segment(
    data: bytes, skip: int, offsets: array[int], start: int, stop: int, compress: bool
) -> bytes:
    """Stored bytes of a segment holding items ``[start, stop)``.

    ``[lengths, items]``, or with ``compress``, ``[lengths, packed, 1]`` when
    the items compress (:func:`._lg_pack.pack`).
    """
    bounds = offsets[start : stop + 1]
    lengths = [b - a for a, b in pairwise(bounds)]
    items = data[skip + offsets[start] : skip + offsets[stop]]
    packed = pack(items, SEGMENT_AT_LEAST) if compress else None
    return dumps([lengths, items] if packed is None else [lengths, packed, _PACKED])


def parse_segment(stored: Any) -> tuple[array[int], bytes]:
    """``(offsets, items)`` of a segment as the store's codec decodes it.

    Reads both stored forms, ``[lengths, items]`` and ``[lengths, packed, 1]``.
    """
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


def _tier(size: int) -> int:
    """0 below ``TAIL_FANIN`` items, then one more for every ``FANIN``-fold."""
    if size < TAIL_FANIN:
        return 0
    tier = 1
    size //= TAIL_FANIN
    while size >= FANIN:
        size //= FANIN
        tier += 1
    return tier


def _merge_plan(sizes: list[int], compacting: bool) -> tuple[int, int] | None:
    """The refs ``[j, k)`` to merge next, or None when the listing is compact."""
    count = len(sizes)
    if count >= TAIL_FANIN:
        last = _tier(sizes[-1])
        j = count
        while j > 0 and _tier(sizes[j - 1]) == last:
            j -= 1
        if count - j >= (FANIN if last else TAIL_FANIN):
            return j, count
    if count > MAX_REFS or (compacting and count > MAX_REFS // 2):
        # Edits in the middle leave small refs between large ones: merge the
        # two neighbours holding the fewest items (the least rewritten), down
        # to half the limit, so that this happens once per many edits.
        j = min(range(count - 1), key=lambda i: sizes[i] + sizes[i + 1])
        return j, j + 2
    return None


def build(
    data: bytes,
    base: Listing | None,
    new_key: Callable[[], str] = new_segment_key,
    *,
    pack: bool = False,
) -> tuple[Listing, list[tuple[str, bytes]]] | None:
    """The listing of the serialized list ``data``, sharing what it can with ``base``.

    Returns the listing and the segments to store ``(key, bytes)``, or None
    when ``data`` is not one msgpack array. With ``pack``, segments whose
    items compress are stored compressed.
    """
    head = array_header(data)
    if head is None:
        return None
    count, skip = head
    if (
        base is not None
        and count >= base.length
        and data.startswith(memoryview(base.data)[base.start :], skip)
    ):
        offsets = base.offsets + array(
            "q", (base.size + end for end in item_ends(data, skip + base.size, count - base.length))
        )
        p, s = base.length, 0
    else:
        offsets = array("q", [0])
        offsets += item_ends(data, skip, count)
        p, s = _common(data, skip, offsets, base) if base is not None else (0, 0)
    m = base.length if base is not None else 0
    refs: list[Ref] = _cut(base.refs, 0, p) if base is not None else []
    fresh = p  # the first item of the middle that is not taken from the base
    if base is not None and count - s > p and m - s > p + 1:
        # Items removed after the prefix, then more added (a window trimmed
        # at the front as the conversation goes on): share the base's run
        # that the middle starts with.
        run = _later_run(data, skip, offsets, p, count - s, base, m - s)
        if run is not None:
            q, length = run
            refs.extend(_cut(base.refs, q, q + length))
            fresh = p + length
    segments: list[tuple[str, bytes]] = []
    if count - s > fresh:
        key = new_key()
        segments.append((key, _segment(data, skip, offsets, fresh, count - s, pack)))
        refs.append(Ref(key, 0, count - s - fresh))
    if s and base is not None:
        refs.extend(_cut(base.refs, m - s, m))
    sizes = [r.stop - r.start for r in refs]
    compacting = len(refs) > MAX_REFS
    while (plan := _merge_plan(sizes, compacting)) is not None:
        j, k = plan
        first = sum(sizes[:j])
        last = first + sum(sizes[j:k])
        key = new_key()
        segments.append((key, _segment(data, skip, offsets, first, last, pack)))
        refs[j:k] = [Ref(key, 0, last - first)]
        sizes[j:k] = [last - first]
    # A segment made here and merged right away is not stored at all.
    used = {ref.key for ref in refs}
    return Listing(data, skip, offsets, tuple(refs)), [s for s in segments if s[0] in used]


def assemble(refs: tuple[Ref, ...], segments: Mapping[str, tuple[array[int], bytes]]) -> Listing:
    """The listing of ``refs`` from their parsed segments (``key -> (offsets, items)``)."""
    count = sum(ref.stop - ref.start for ref in refs)
    head = header(count)
    parts: list[bytes | memoryview] = [head]
    offsets = array("q", [0])
    for ref in refs:
        found = segments.get(ref.key)
        if found is None:
            raise DecodeError(f"list segment {ref.key!r} is missing")
        seg_offsets, items = found
        if not 0 <= ref.start <= ref.stop < len(seg_offsets):
            raise DecodeError(f"list segment {ref.key!r} has no items {ref.start}..{ref.stop}")
        shift = offsets[-1] - seg_offsets[ref.start]
        offsets.extend(o + shift for o in seg_offsets[ref.start + 1 : ref.stop + 1])
        if ref.start == 0 and ref.stop == len(seg_offsets) - 1:
            parts.append(items)
        else:
            parts.append(memoryview(items)[seg_offsets[ref.start] : seg_offsets[ref.stop]])
    return Listing(b"".join(parts), len(head), offsets, refs)

"""How a stored value shares bytes with an earlier version of itself: one mechanism, any value.

A channel value is stored as the serializer's bytes, whatever they hold (a
list of messages, a dict of documents, a string). Its *parts* say where
those bytes are: each part is a short literal, or a range ``[start, stop)``
of an immutable *chunk* stored under a fresh random key. The bytes of a
version are its parts' bytes concatenated, so a read joins them and hands
the result to the serializer: the same bytes it wrote, the same value.

A new version is compared with a *base* (the version it replaces, whose
bytes and parts are known), over bytes only, with operations that run in C:

* the header of a msgpack container or string (the item count, the length)
  is set aside on both sides, so a list that grew still matches item for item;
* the longest common prefix and suffix of the two bodies, by bisection with
  ``bytes.startswith``/``endswith`` (``memcmp``; a first comparison of the
  whole base body settles the append, the common case);
* a window trimmed at the front: the new body's first bytes found in the
  base (``bytes.find``), and the base from there to its end beginning the
  new body (one comparison), tried at a few places;
* between the common prefix and suffix, runs of the base found by
  ``bytes.find`` of a few anchors (the base's last bytes: a window that
  dropped items at the front and added some at the end; the new bytes'
  first bytes; the base's middle: a text rewritten at both ends), each
  extended both ways by bisection, and the pieces left on either side
  searched the same way, a few levels deep.

What matches becomes ranges of the base's chunks (no byte is written
again); what does not goes into one new chunk. Nothing here depends on the
value's type: a byte range matches only where the bytes are equal, so
sharing never changes what a read returns.

Reads stay short: when parts of one size *tier* pile up at the end, their
bytes are written once more as one chunk of the next tier (a byte is
rewritten about ``log16`` of the value's size times over its life), and a
version never keeps more than :data:`MAX_PARTS` parts (past it, the smallest
neighbours are merged down to half that).

Chunk keys are never reused, so a chunk's bytes never change: caches of
them are never stale, and deleting one nobody references can never remove
a newer writer's content. This module does bytes only: no store access, no
LangGraph import.
"""

from __future__ import annotations

import itertools
import os
import secrets
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from operator import add
from typing import Final, NamedTuple

from swarmstate._checks import MAX_VALUE_BYTES

__all__ = [
    "MAX_PARTS",
    "MIN_RUN",
    "Part",
    "Version",
    "assemble",
    "chunk_keys",
    "new_chunk_key",
    "share",
    "version",
    "whole",
]

Part = bytes | tuple[str, int, int]
"""A literal, or bytes ``[start, stop)`` of the chunk stored under a key."""

MIN_RUN: Final = 64
"""Matching bytes shorter than this are written again rather than referenced."""
MAX_PARTS: Final = 48
"""A version never holds more parts; past it, the smallest neighbours are merged."""
FANIN: Final = 16
"""Trailing parts of one tier that are merged into one chunk of the next tier."""
TAIL_FANIN: Final = 8
"""The same for the smallest tier (the new bytes of single puts), merged sooner."""
TIER_BYTES: Final = 2048
"""Parts below this size are the smallest tier; each next tier is ``FANIN`` times larger."""
_ANCHOR: Final = 48
"""Bytes of an anchor searched for with ``bytes.find``."""
_TRIES: Final = 4
"""Places in the base where the new bytes' first bytes are tried as a trimmed window's start."""
_DEPTH: Final = 3
"""How many times the pieces left beside a run are searched again."""
_SEARCH_MIN: Final = 256
"""A piece shorter than this is not searched (written as it is)."""
_MIDDLE_MIN: Final = 4096
"""A base piece at least this long is also searched for from its middle."""

# Lengths of the msgpack headers of bin, str, array and map values by first byte;
# 0x80-0xbf (fixmap, fixarray, fixstr) are one byte.
_HEADERS: Final = {
    **dict.fromkeys(range(0x80, 0xC0), 1),
    0xC4: 2,
    0xC5: 3,
    0xC6: 5,
    0xD9: 2,
    0xDA: 3,
    0xDB: 5,
    0xDC: 3,
    0xDD: 5,
    0xDE: 3,
    0xDF: 5,
}

Span = tuple[int, int, int]
"""``(start, stop, base position)`` of new bytes; a base position of -1: not in the base."""


class Version(NamedTuple):
    """One stored version of a value: its bytes and where they are stored.

    ``ends[i]`` is where part ``i`` ends in ``data``. Immutable once made, so
    caches and later versions share it freely.
    """

    data: bytes
    parts: tuple[Part, ...]
    ends: list[int]
    fresh: int = -1
    """Bytes the comparison that made it found in no earlier version; -1: not compared."""


def _size(part: Part) -> int:
    return part[2] - part[1] if type(part) is tuple else len(part)


def version(data: bytes, parts: Sequence[Part]) -> Version:
    """The :class:`Version` of ``data`` stored as ``parts``."""
    return Version(data, tuple(parts), list(accumulate(map(_size, parts))))


class _Keys:
    """Fresh chunk keys: a random prefix per process and a counter (never reused)."""

    def __init__(self) -> None:
        self.reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        # 64 random bits per process (a forked child draws its own), then a counter.
        self._prefix = secrets.token_urlsafe(8)
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._count):x}"


new_chunk_key: Callable[[], str] = _Keys()
"""A fresh chunk key, never returned before by any process."""


def header_length(data: bytes) -> int:
    """Length of the msgpack header of the container or string ``data`` holds, else 0."""
    return _HEADERS.get(data[0], 0) if data else 0


def whole(
    data: bytes, new_key: Callable[[], str] = new_chunk_key
) -> tuple[Version, list[tuple[str, bytes]]]:
    """``data`` stored as one new chunk, and that chunk."""
    key = new_key()
    return Version(data, ((key, 0, len(data)),), [len(data)]), [(key, data)]


def share(
    data: bytes, base: Version, new_key: Callable[[], str] = new_chunk_key
) -> tuple[Version, list[tuple[str, bytes]]]:
    """``data`` stored sharing what it can with ``base``; the new chunks to store."""
    head = header_length(data)
    base_data = base.data
    base_head = header_length(base_data) if head else 0
    if not base_head:
        head = 0
    stop, base_stop = len(data), len(base_data)
    base_body = base_stop - base_head
    view = memoryview(base_data)
    spans: list[Span]
    if stop - head >= base_body and data.startswith(view[base_head:], head):
        # Appended to (the common case): the base's body, then new bytes.
        spans = [(head, head + base_body, base_head), (head + base_body, stop, -1)]
    else:
        spans = _trimmed(data, head, stop, base_data, base_head, base_stop) or _spans(
            data, head, stop, base_data, base_head, base_stop
        )
    parts: list[Part] = [data[:head]] if head else []
    chunks: list[tuple[str, bytes]] = []
    fresh = [(a, b) for a, b, at in spans if at < 0 and b > a]
    key = ""
    fresh_bytes = sum(b - a for a, b in fresh)
    if fresh_bytes >= MIN_RUN:
        key = new_key()
        chunks.append(
            (
                key,
                data[fresh[0][0] : fresh[0][1]]
                if len(fresh) == 1
                else b"".join(data[a:b] for a, b in fresh),
            )
        )
    into = 0  # where the next fresh span starts in the new chunk
    for start, end, at in spans:
        if end <= start:
            continue
        if at >= 0:
            parts.extend(_cut(base, at, at + end - start))
        elif key:
            parts.append((key, into, into + end - start))
            into += end - start
        else:
            parts.append(data[start:end])
    sizes = [p[2] - p[1] if type(p) is tuple else len(p) for p in parts]
    if len(parts) >= TAIL_FANIN:
        merged = _compact(data, parts, sizes, new_key)
        if merged:
            used = {part[0] for part in parts if type(part) is tuple}
            chunks = [chunk for chunk in chunks + merged if chunk[0] in used]
    return Version(data, tuple(parts), list(accumulate(sizes)), fresh_bytes), chunks


def _trimmed(
    data: bytes, start: int, stop: int, base: bytes, base_start: int, base_stop: int
) -> list[Span] | None:
    """Spans when the new body begins with the base body's tail, else None.

    A window that dropped items at the front and added some at the end: the
    new bytes' first :data:`_ANCHOR` bytes are found in the base (``find``),
    and the base from there to its end begins the new bytes (one
    ``memcmp``), so two calls in C settle it where the general search
    (:func:`_spans`) takes a few dozen. A few places are tried, in case the
    first bytes recur earlier in the base (items that open alike).
    """
    if stop - start < MIN_RUN or base_stop - base_start < MIN_RUN:
        return None
    view = memoryview(base)
    if data.startswith(view[base_start : base_start + MIN_RUN], start):
        # It opens as the base does: not trimmed at the front (the search below
        # would look through the whole base for nothing).
        return None
    anchor = data[start : start + _ANCHOR]
    find = base.find
    at = base_start  # at base_start itself it would be an append, already ruled out
    for _ in range(_TRIES):
        at = find(anchor, at + 1, base_stop)
        if at < 0:
            return None
        kept = base_stop - at
        if kept < MIN_RUN:
            return None
        if kept <= stop - start and data.startswith(view[at:base_stop], start):
            return [(start, start + kept, at), (start + kept, stop, -1)]
    return None


def _spans(
    data: bytes, start: int, stop: int, base: bytes, base_start: int, base_stop: int
) -> list[Span]:
    """Spans covering ``data[start:stop]`` in order: a common prefix and suffix, and runs
    of the base found between them."""
    n = min(stop - start, base_stop - base_start)
    view = memoryview(base)
    # A first comparison of MIN_RUN bytes settles most cases without a bisection.
    p = (
        _prefix(data, start, view, base_start, n)
        if n >= MIN_RUN and data.startswith(view[base_start : base_start + MIN_RUN], start)
        else 0
    )
    s = (
        _suffix(data, stop, view, base_stop, n - p)
        if n - p >= MIN_RUN
        and data.startswith(view[base_stop - MIN_RUN : base_stop], stop - MIN_RUN)
        else 0
    )
    out: list[Span] = []
    if p:
        out.append((start, start + p, base_start))
    out.extend(_middle(data, start + p, stop - s, base, base_start + p, base_stop - s, _DEPTH))
    if s:
        out.append((stop - s, stop, base_stop - s))
    return out


def _middle(
    data: bytes, start: int, stop: int, base: bytes, base_start: int, base_stop: int, depth: int
) -> list[Span]:
    """Spans of ``data[start:stop]``: the longest run of ``base[base_start:base_stop]``
    found from a few anchors, and the pieces beside it searched again."""
    if depth == 0 or stop - start < _SEARCH_MIN or base_stop - base_start < _SEARCH_MIN:
        return [(start, stop, -1)]
    best = _best_run(data, start, stop, base, base_start, base_stop)
    if best is None:
        return [(start, stop, -1)]
    a, b, at = best
    return [
        *_middle(data, start, a, base, base_start, at, depth - 1),
        best,
        *_middle(data, b, stop, base, at + b - a, base_stop, depth - 1),
    ]


def _best_run(
    data: bytes, start: int, stop: int, base: bytes, base_start: int, base_stop: int
) -> Span | None:
    """The longest run ``data[a:b] == base[at:at + b - a]`` found from the anchors, if any."""
    best: Span | None = None
    view = memoryview(base)
    w = _ANCHOR
    anchors = [
        # the base's last bytes, in the new bytes: items dropped in front, added behind
        (base_stop - w, True),
        # the new bytes' first bytes, in the base
        (start, False),
    ]
    if base_stop - base_start >= _MIDDLE_MIN:
        # the base's middle, in the new bytes: a long text rewritten at both ends
        anchors.append((base_start + (base_stop - base_start) // 2, True))
    for at, in_new in anchors:
        if best is not None:
            # An anchor inside the run found already would find that run again.
            a, b, at_best = best
            if (at_best <= at < at_best + b - a) if in_new else (a <= at < b):
                continue
        if in_new:
            a = data.find(base[at : at + w], start, stop)
            at_base = at
        else:
            a = at
            at_base = base.find(data[at : at + w], base_start, base_stop)
        if a < 0 or at_base < 0:
            continue
        back = _suffix(data, a, view, at_base, min(a - start, at_base - base_start))
        ahead = _prefix(data, a, view, at_base, min(stop - a, base_stop - at_base))
        if back + ahead >= MIN_RUN and (best is None or back + ahead > best[1] - best[0]):
            best = (a - back, a + ahead, at_base - back)
            if best[0] == start and best[1] == stop:
                break
    return best


def _prefix(a: bytes, ia: int, b: memoryview, ib: int, n: int) -> int:
    """The largest ``k <= n`` with ``a[ia:ia + k] == b[ib:ib + k]``."""
    if n <= 0:
        return 0
    # bytes.startswith with a memoryview compares with memcmp and copies nothing.
    if a.startswith(b[ib : ib + n], ia):
        return n
    lo, hi = 0, n - 1  # equal up to lo; not up to n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[ib + lo : ib + mid], ia + lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _suffix(a: bytes, end_a: int, b: memoryview, end_b: int, n: int) -> int:
    """The largest ``k <= n`` with ``a[end_a - k:end_a] == b[end_b - k:end_b]``."""
    if n <= 0:
        return 0
    if a.startswith(b[end_b - n : end_b], end_a - n):
        return n
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[end_b - mid : end_b - lo], end_a - mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut(base: Version, start: int, stop: int) -> list[Part]:
    """The parts covering bytes ``[start, stop)`` of ``base``."""
    ends = base.ends
    first = bisect_right(ends, start)
    last = bisect_right(ends, stop - 1)
    out = list(base.parts[first : last + 1])
    at = ends[first - 1] if first else 0
    if start > at:  # the first part starts before ``start``: cut its head off
        out[0] = _trim(out[0], start - at, 0)
    if stop < ends[last]:  # the last part ends after ``stop``: cut its tail off
        out[-1] = _trim(out[-1], 0, ends[last] - stop)
    return out


def _trim(part: Part, head: int, tail: int) -> Part:
    """``part`` without its first ``head`` and last ``tail`` bytes."""
    if type(part) is tuple:
        key, start, stop = part
        return (key, start + head, stop - tail)
    assert type(part) is bytes
    return part[head : len(part) - tail]


def _tier(size: int) -> int:
    """0 below :data:`TIER_BYTES`, then one more for every ``FANIN``-fold."""
    tier = 0
    while size >= TIER_BYTES:
        size //= FANIN
        tier += 1
    return tier


def _merge_plan(sizes: list[int], tiers: list[int], compacting: bool) -> tuple[int, int] | None:
    """The parts ``[j, k)`` to merge next, or None when the version is compact.

    ``tiers[i]`` is ``_tier(sizes[i])``, kept beside the sizes by the caller.
    """
    count = len(sizes)
    if count >= TAIL_FANIN:
        last = tiers[-1]
        j = count
        while j > 0 and tiers[j - 1] == last:
            j -= 1
        if count - j >= (FANIN if last else TAIL_FANIN):
            return j, count
    if count > MAX_PARTS or (compacting and count > MAX_PARTS // 2):
        # Edits in the middle leave small parts between large ones: merge the
        # two neighbours holding the fewest bytes (the least rewritten), down
        # to half the limit, so that this happens once per many edits. The
        # first such pair, found in C.
        pairs = list(map(add, sizes, itertools.islice(sizes, 1, None)))
        j = pairs.index(min(pairs))
        return j, j + 2
    return None


def _compact(
    data: bytes, parts: list[Part], sizes: list[int], new_key: Callable[[], str]
) -> list[tuple[str, bytes]]:
    """Merge piled-up tiers of ``parts`` (and ``sizes``) in place; the chunks made.

    The merges are planned on the sizes alone; then each run of parts merged
    is written once, as one chunk (a run merged again is not written in
    between, so compacting a version writes each byte once).
    """
    compacting = len(parts) > MAX_PARTS
    counts = [1] * len(sizes)  # how many of ``parts`` each entry of ``sizes`` covers
    tiers = list(map(_tier, sizes))
    while (plan := _merge_plan(sizes, tiers, compacting)) is not None:
        j, k = plan
        size = sum(sizes[j:k])
        sizes[j:k] = [size]
        tiers[j:k] = [_tier(size)]
        counts[j:k] = [sum(counts[j:k])]
    if len(counts) == len(parts):
        return []
    chunks: list[tuple[str, bytes]] = []
    merged: list[Part] = []
    at = first = 0  # where the entry starts in ``data``, and its first part
    for size, count in zip(sizes, counts, strict=True):
        if count == 1:
            merged.append(parts[first])
        else:
            key = new_key()
            chunks.append((key, data[at : at + size]))
            merged.append((key, 0, size))
        at += size
        first += count
    parts[:] = merged
    return chunks


def chunk_keys(parts: Iterable[Part]) -> list[str]:
    """The keys of the chunks ``parts`` reference, each once, in order."""
    return list(dict.fromkeys(part[0] for part in parts if type(part) is tuple))


def assemble(parts: Sequence[Part], chunks: Mapping[str, bytes]) -> bytes:
    """The bytes ``parts`` make, from the chunks they reference (``key -> bytes``).

    Raises:
        KeyError: A chunk is missing (its key is the error's argument).
        ValueError: A range lies outside its chunk, or the parts join to more
            than :data:`~swarmstate._checks.MAX_VALUE_BYTES` (checked before
            joining: ranges can name one chunk's bytes many times over).
    """
    pieces: list[bytes | memoryview] = []
    total = 0
    for part in parts:
        if type(part) is tuple:
            key, start, stop = part
            found = chunks[key]
            if not 0 <= start <= stop <= len(found):
                raise ValueError(f"chunk {key!r} has no bytes {start}..{stop}")
            total += stop - start
            if start == 0 and stop == len(found):
                if len(parts) == 1:
                    return found
                pieces.append(found)
            else:
                pieces.append(memoryview(found)[start:stop])
        else:
            assert type(part) is bytes
            total += len(part)
            pieces.append(part)
    if total > MAX_VALUE_BYTES:
        raise ValueError(
            f"parts join to {total} bytes, more than the {MAX_VALUE_BYTES} "
            "a store holds in one value"
        )
    return b"".join(pieces)

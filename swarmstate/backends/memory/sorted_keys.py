"""A mutable sorted set with cheap inserts, for ordered key ranges in memory.

Keys live in sorted chunks (lists of up to ``2 * CHUNK``) with a parallel list
of each chunk's last key, so :mod:`bisect` (in C) finds a chunk and a range of
k keys costs O(log n + k). New keys first land in an unsorted ``pending`` set
(one hash insert) and are merged into the chunks by the next ordered read:
a store that is written far more than it is ranged pays almost nothing for
its ordering, and one that alternates a write with a read (a checkpointer)
merges one key per read, the same work as inserting in place.

Members are str (a namespace's keys, the namespaces) or tuples of str (a
tag's ``(value, namespace, key)`` entries): anything ordered as Python
orders them.

This set describes the current state only and is guarded by the store's
lock; snapshots do not hold it (they keep the trie, see ``store``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from heapq import merge
from typing import Generic, TypeVar

__all__ = ["CHUNK", "SortedKeys"]

CHUNK = 128
# Up to this many pending keys are inserted one by one; more are merged in one pass.
_INSORT_MAX = 32

K = TypeVar("K", str, tuple[str, str, str])


class SortedKeys(Generic[K]):
    """A sorted set; the caller guarantees ``add`` gets new keys only."""

    __slots__ = ("_chunks", "_len", "_maxes", "_pending")

    def __init__(self) -> None:
        self._chunks: list[list[K]] = []
        self._maxes: list[K] = []
        self._pending: set[K] = set()
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, key: K) -> None:
        """Add a key that is not in the set."""
        self._pending.add(key)
        self._len += 1

    def remove(self, key: K) -> None:
        """Remove a key that is in the set."""
        self._len -= 1
        pending = self._pending
        if key in pending:
            pending.remove(key)
            return
        chunks, maxes = self._chunks, self._maxes
        i = bisect_left(maxes, key)
        chunk = chunks[i]
        if len(chunk) == 1:
            del chunks[i]
            del maxes[i]
            return
        del chunk[bisect_left(chunk, key)]
        maxes[i] = chunk[-1]

    def _settle(self) -> None:
        """Merge the pending keys into the sorted chunks."""
        pending = sorted(self._pending)
        self._pending.clear()
        chunks, maxes = self._chunks, self._maxes
        if len(pending) > _INSORT_MAX and len(pending) * 8 > self._len:
            everything = list(merge(self._sorted_chunks(), pending))
            self._chunks = [everything[i : i + CHUNK] for i in range(0, len(everything), CHUNK)]
            self._maxes = [chunk[-1] for chunk in self._chunks]
            return
        for key in pending:
            if not chunks:
                chunks.append([key])
                maxes.append(key)
                continue
            i = bisect_left(maxes, key)
            if i == len(maxes):
                i -= 1
            chunk = chunks[i]
            insort(chunk, key)
            maxes[i] = chunk[-1]
            if len(chunk) > 2 * CHUNK:
                upper = chunk[CHUNK:]
                del chunk[CHUNK:]
                chunks.insert(i + 1, upper)
                maxes[i] = chunk[-1]
                maxes.insert(i + 1, upper[-1])

    def _sorted_chunks(self) -> Iterator[K]:
        for chunk in self._chunks:
            yield from chunk

    def range(
        self,
        start: K | None = None,
        stop: K | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[K]:
        """Keys with ``start <= key < stop``, ascending (or descending), at most ``limit``."""
        if self._pending:
            self._settle()
        chunks, maxes = self._chunks, self._maxes
        if not chunks or limit == 0:
            return []
        if limit == 1 and start is None and stop is None:  # "latest" / "first"
            return [maxes[-1] if reverse else chunks[0][0]]
        last = len(chunks) - 1
        if start is None:
            i, j = 0, 0
        else:
            i = bisect_left(maxes, start)
            if i > last:
                return []
            j = bisect_left(chunks[i], start)
        if stop is None:
            ei, ej = last, len(chunks[last])
        else:
            ei = bisect_left(maxes, stop)
            if ei > last:
                ei, ej = last, len(chunks[last])
            else:
                ej = bisect_left(chunks[ei], stop)
        if (i, j) >= (ei, ej):
            return []
        found: list[K] = []
        want = self._len if limit is None else limit
        if reverse:
            for c in range(ei, i - 1, -1):
                chunk = chunks[c]
                lo, hi = (j if c == i else 0), (ej if c == ei else len(chunk))
                lo = max(lo, hi - (want - len(found)))
                found.extend(reversed(chunk[lo:hi]))
                if len(found) >= want:
                    break
        else:
            for c in range(i, ei + 1):
                chunk = chunks[c]
                lo, hi = (j if c == i else 0), (ej if c == ei else len(chunk))
                found.extend(chunk[lo : min(hi, lo + want - len(found))])
                if len(found) >= want:
                    break
        return found

    def __iter__(self) -> Iterator[K]:
        """Every key in order."""
        if self._pending:
            self._settle()
        return self._sorted_chunks()

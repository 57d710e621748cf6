"""A hash trie with copy-on-write after snapshots, and a structural diff.

A trie is ``None`` (empty), a leaf ``dict`` of up to ``LEAF_MAX`` entries, or
an inner node: a 32-slot ``list`` whose slots hold sub-tries, indexed by five
bits of the key's hash per level.

Nodes are shared between versions, and a node reachable from a snapshot is
never modified. The writer tracks which nodes it created since the last
snapshot (the ``fresh`` set of node ids): those are private to the current
version and are updated in place; any other node is copied first (its path
from the root is copied too, stopping at the first fresh ancestor), and the
copies become fresh. Taking a snapshot starts a new, empty fresh set, which
freezes every node in O(1). Two versions share every subtree neither wrote
to, and :func:`diff` skips shared subtrees by identity, so its cost follows
the change.

Ids are a sound ownership test here: an id in the fresh set belongs to a
node created in this generation; a node from an earlier generation was alive
when that node was allocated, so it cannot share the address.

Why not pyrsistent's ``PMap``: it is a hash table over a ``PVector`` and does
not expose its nodes, so two versions cannot be compared structurally
(docs/architecture.md has the measurements).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress
from operator import is_not
from typing import Any, Final

__all__ = ["MISSING", "Trie", "assoc", "diff", "dissoc", "get", "items"]

Trie = dict[Any, Any] | list[Any] | None


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""Sentinel for "no value", distinct from a stored ``None``."""

WIDTH = 32
_SLOTS = range(WIDTH)
LEAF_MAX = 32
# Beyond 64 bits every level indexes the same slot: keep colliding keys in one leaf.
_MAX_SHIFT = 64


def get(node: Any, key: Any, h: int) -> Any:
    """The value under ``key`` (whose hash is ``h``), or ``MISSING``."""
    shift = 0
    while type(node) is list:
        node = node[(h >> shift) & 31]
        shift += 5
    if node is None:
        return MISSING
    return node.get(key, MISSING)


def assoc(node: Any, key: Any, h: int, value: Any, fresh: set[int]) -> tuple[Trie, Any]:
    """Set ``key`` to ``value``; returns the (possibly new) root and the old value."""
    root = node
    path: list[tuple[list[Any], int]] = []
    shift = 0
    while type(node) is list:
        i = (h >> shift) & 31
        path.append((node, i))
        node = node[i]
        shift += 5
    leaf: dict[Any, Any]
    if node is None:
        old = MISSING
        leaf = {key: value}
        fresh.add(id(leaf))
    else:
        old = node.get(key, MISSING)
        if id(node) in fresh:
            node[key] = value
            leaf = node
        else:
            leaf = node.copy()
            leaf[key] = value
            fresh.add(id(leaf))
    new: Trie = leaf
    if len(leaf) > LEAF_MAX and shift < _MAX_SHIFT:
        new = _split(leaf, shift, fresh)
    return _publish(root, path, node, new, fresh), old


def dissoc(node: Any, key: Any, h: int, fresh: set[int]) -> tuple[Trie, Any]:
    """Remove ``key``; returns the (possibly new) root and the removed value or MISSING."""
    root = node
    path: list[tuple[list[Any], int]] = []
    shift = 0
    while type(node) is list:
        i = (h >> shift) & 31
        path.append((node, i))
        node = node[i]
        shift += 5
    if node is None or key not in node:
        return root, MISSING
    new: Trie
    if id(node) in fresh:
        old = node.pop(key)
        new = node
    else:
        new = node.copy()
        old = new.pop(key)
        fresh.add(id(new))
    if not new:
        new = None
    return _publish(root, path, node, new, fresh), old


def _publish(
    root: Trie, path: list[tuple[list[Any], int]], node: Trie, new: Trie, fresh: set[int]
) -> Trie:
    """Hang ``new`` where ``node`` was, copying non-fresh ancestors; return the root."""
    while path:
        if new is node:
            return root  # changed in place: every ancestor is unchanged
        parent, i = path.pop()
        if id(parent) in fresh:
            parent[i] = new
            return root
        copy = list(parent)
        copy[i] = new
        fresh.add(id(copy))
        node, new = parent, copy
    return new


def _split(leaf: dict[Any, Any], shift: int, fresh: set[int]) -> list[Any]:
    """Turn an overfull leaf at depth ``shift`` into an inner node."""
    buckets: list[Any] = [None] * WIDTH
    for key, value in leaf.items():
        i = (hash(key) >> shift) & 31
        bucket = buckets[i]
        if bucket is None:
            buckets[i] = bucket = {}
            fresh.add(id(bucket))
        bucket[key] = value
    deeper = shift + 5
    for i, bucket in enumerate(buckets):
        if bucket is not None and len(bucket) > LEAF_MAX and deeper < _MAX_SHIFT:
            buckets[i] = _split(bucket, deeper, fresh)
    fresh.add(id(buckets))
    return buckets


def items(node: Trie) -> Iterator[tuple[Any, Any]]:
    """Every ``(key, value)`` in the trie, in no particular order."""
    if node is None:
        return
    if type(node) is dict:
        yield from node.items()
        return
    stack = [node]
    while stack:
        current = stack.pop()
        for child in current:
            if child is None:
                continue
            if type(child) is dict:
                yield from child.items()
            else:
                stack.append(child)


def diff(a: Trie, b: Trie) -> list[tuple[Any, Any, Any]]:
    """Every ``(key, value_in_a, value_in_b)`` whose value differs between two tries.

    A side that lacks the key gives ``MISSING``. Subtrees shared by the two
    versions are skipped by identity; the comparisons of a node's 32 slots
    and of two leaves run in C (``map(is_not)``, set algebra on item views),
    so the cost follows the number of changed paths. Values must be hashable
    (the store keeps bytes). Neither trie may change while this runs.
    """
    found: list[tuple[Any, Any, Any]] = []
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if type(a) is list and type(b) is list:
            stack.extend((a[i], b[i]) for i in compress(_SLOTS, map(is_not, a, b)))
            continue
        left: dict[Any, Any] = a if type(a) is dict else dict(items(a))
        right: dict[Any, Any] = b if type(b) is dict else dict(items(b))
        for key in {key for key, _ in left.items() ^ right.items()}:
            found.append((key, left.get(key, MISSING), right.get(key, MISSING)))
    return found

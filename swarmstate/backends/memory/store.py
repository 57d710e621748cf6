"""The in-memory Store: a copy-on-write hash trie for versions, plain dicts for now.

Two views of the same data:

- **The current state**, which every read and write touches: a dict
  ``(namespace, key) -> msgpack bytes`` (a read is one hash lookup), each
  namespace's keys in a sorted set for ranges, the namespaces in a sorted set
  for prefix queries, and running totals of entries and bytes.
- **Versions**, which snapshots and diffs need: 16 hash tries (sharded by
  namespace) of ``(namespace, key) -> bytes`` whose nodes are shared between
  versions and copied only on the first write after a snapshot (see
  ``_trie``).

Writes reach the tries lazily. ``set`` stores the bytes in the dict and marks
the key dirty; the next operation that needs the versions or the ordered
indexes (a snapshot, a restore, a range, a prefix operation, ``len``) folds
the dirty keys into the tries and indexes first. So a write is two dict
assignments, a key written many times between two snapshots costs the trie
once, and a snapshot costs the keys written since the previous one (never
the size of the state) plus 16 references.

Tags. A tagged entry's trie value is ``(bytes, order, group)`` rather than
its bytes, so snapshots and restore carry its tags with no structure of
their own; the current tags are a dict and one sorted set per tag of
``(value, namespace, key)``, kept by the fold like the key sets. A write's
dirty mark says which tags it left: None (the lock-free ``set`` and every
untagged write) or the ``(order, group)`` of a tagged write, so the last
write of a key decides its tags at the fold. A tagged write racing a
lock-free ``set()`` of the same key is not ordered with it (as for every
locked write), and may leave one's value with the other's tags.

Each snapshot also records which keys its fold changed. A diff between a
snapshot and one of its ancestors checks just those keys; any other pair of
snapshots is compared through the tries, skipping shared subtrees by
identity. Either way the cost follows the change. Restore walks the trie
diff to bring the current-state views in line, so it costs the change too.

Concurrency. ``set``, ``get`` and ``contains`` take no lock: each is one or
two atomic dict operations, and the fold reads values from the dict (the
source of truth) after unmarking a key, so a racing writer is either folded
or stays marked, never lost. Everything else takes one lock. A shared lock on
every write costs time even uncontended and risks a GIL convoy under threads;
docs/architecture.md has the measurements (the ``design.threads.*`` rows).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from itertools import compress
from operator import is_not
from typing import Any, ClassVar

from swarmstate._base import BaseStore, check_conditions, prefix_upper_bound
from swarmstate._checks import (
    NO_TAGS,
    Absent,
    Bound,
    Checked,
    Condition,
    Empty,
    Holds,
    Limit,
    Pair,
    Present,
    Requirement,
    Row,
    TagPair,
    Transaction,
    WriteResult,
    conflict,
    quick_transaction,
)
from swarmstate._codec import loads
from swarmstate._snapshot import Diff, Snapshot, evicted, sorted_diff
from swarmstate.backends.memory import trie
from swarmstate.backends.memory.sorted_keys import SortedKeys
from swarmstate.backends.memory.trie import MISSING

__all__ = ["Store"]

_SHARDS = 16
_Key = tuple[str, str]
_KeySet = set[_Key]  # an alias: inside Store, "set" names the method
_TagEntry = tuple[str, str, str]  # (tag value, namespace, key)
# What a snapshot holds: the 16 trie roots, the entry count, the byte total,
# and the keys whose value may differ from its parent's (None: unknown).
_Frozen = tuple[tuple[trie.Trie, ...], int, int, frozenset[_Key] | None]
# A diff walks parent links and checks the keys they recorded while that is
# cheaper than comparing the tries; past this many keys it compares the tries.
_CHAIN_KEYS_MAX = 4096


class Store(BaseStore):
    """In-memory state keyed by ``(namespace, key)`` with snapshots that copy nothing.

    Args:
        max_history: How many snapshots to retain (oldest evicted first);
            None keeps every snapshot.

    Thread-safe: any number of threads may read and write. ``set``, ``get``
    and ``contains`` take no lock at all, so threads never queue behind each
    other on the hot path.
    """

    blocks: ClassVar[bool] = False  # every call is CPU work under a lock, never I/O

    def __init__(self, max_history: int | None = None) -> None:
        super().__init__(max_history=max_history)
        self._uid = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._roots: list[trie.Trie] = [None] * _SHARDS
        self._fresh: set[int] = set()
        # Keys written since the last fold (a dict used as an ordered set, so
        # it never holds more keys than were written). Writers only insert,
        # one atomic step; the fold pops a key and then reads its value from
        # _flat, the source of truth, so a racing writer is either seen or
        # left marked for the next fold, never lost.
        # The value is the tags the write left: None for none (see the docstring).
        self._dirty: dict[_Key, TagPair | None] = {}
        self._set_flat({})
        self._keys: dict[str, SortedKeys[str]] = {}
        self._names: SortedKeys[str] = SortedKeys()
        self._count_all = 0
        self._nbytes = 0
        self._tags: dict[_Key, TagPair] = {}
        self._by_tag: dict[str, SortedKeys[_TagEntry]] = {
            "order": SortedKeys(),
            "group": SortedKeys(),
        }
        # Keys whose trie value changed since the last snapshot or restore
        # (None after clear(): everything may have).
        self._since: set[_Key] | None = set()
        self._history: deque[Snapshot] = deque()
        self._retained: dict[int, Snapshot] = {}
        self._next_id = 1
        self._head: int | None = None

    def _set_flat(self, flat: dict[_Key, bytes]) -> None:
        self._flat = flat
        # Point reads look up this dict itself: no Python frame between
        # BaseStore.get and the lookup (a stored value is never None).
        self._values = flat

    # -- reads -----------------------------------------------------------

    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        with self._lock:
            get = self._flat.get
            return [get(pair) for pair in pairs]

    def _range_keys(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[str]:
        with self._lock:
            if self._dirty:
                self._fold()
            found = self._keys.get(namespace)
            return [] if found is None else found.range(start, stop, reverse, limit)

    def _range_items(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit, raw: bool
    ) -> list[tuple[str, Any]]:
        with self._lock:
            if self._dirty:
                self._fold()
            found = self._keys.get(namespace)
            if found is None:
                return []
            keys = found.range(start, stop, reverse, limit)
            flat = self._flat
            if len(keys) == 1:  # "latest": skip the comprehensions' frames
                key = keys[0]
                data = flat[(namespace, key)]
            else:
                stored = [flat[(namespace, key)] for key in keys]
        # Decoded outside the lock.
        if len(keys) == 1:
            return [(key, data if raw else loads(data))]
        if raw:
            return list(zip(keys, stored, strict=True))
        return [(key, loads(data)) for key, data in zip(keys, stored, strict=True)]

    def _namespaces(self, prefix: str) -> list[str]:
        with self._lock:
            self._fold()
            return self._names_under(prefix)

    def _count(self, namespace: str) -> int:
        with self._lock:
            self._fold()
            found = self._keys.get(namespace)
            return 0 if found is None else len(found)

    def __len__(self) -> int:
        with self._lock:
            self._fold()
            return self._count_all

    # -- writes ----------------------------------------------------------

    def _put(self, pair: Pair, data: bytes) -> None:
        # No lock: two atomic steps. _flat is read before _dirty so that a
        # concurrent clear() (which replaces _dirty first) cannot split them.
        self._flat[pair] = data
        self._dirty[pair] = None

    def _put_many(self, rows: list[Row], if_absent: bool, ensure: list[Row]) -> int:
        with self._lock:
            return self._put_locked(rows, if_absent, ensure)

    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        with self._lock:
            flat = self._flat
            check_conditions(require, [flat.get(pair) for pair, _ in require])
            return self._put_locked(rows, if_absent, ensure)

    def _put_locked(
        self,
        rows: list[Row],
        if_absent: bool,
        ensure: list[Row],
        tags: list[TagPair] | None = None,
    ) -> int:
        """:meth:`_put_many`'s writes; the caller holds the lock."""
        written = 0
        flat, dirty = self._flat, self._dirty
        if tags is not None:
            for (k, data), pair in zip(rows, tags, strict=True):
                if if_absent:
                    if k in flat or flat.setdefault(k, data) is not data:
                        continue
                else:
                    flat[k] = data
                dirty[k] = None if pair == NO_TAGS else pair
                written += 1
            return written
        for k, data in ensure:
            # setdefault is one atomic step, even against lock-free set().
            # The membership test first: raw values may be one shared
            # object, so "setdefault returned ours" alone cannot tell.
            if k not in flat and flat.setdefault(k, data) is data:
                dirty[k] = None
                written += 1
        for k, data in rows:
            if if_absent:
                if k in flat or flat.setdefault(k, data) is not data:
                    continue
            else:
                flat[k] = data
            dirty[k] = None
            written += 1
        return written

    def write(self, transaction: Transaction) -> WriteResult:
        """:meth:`BaseStore.write`; a checkpoint's shape (raw sets on key conditions) inline.

        The checks of the general path cost more than the write itself for a
        transaction of a few raw rows on ``Absent``/``Present`` conditions:
        those with ASCII names and tag values, bytes values, lists or tuples
        throughout, are checked and written here in one pass. Anything else,
        and anything that would fail a check, takes the general path, which
        raises as it always did. The checks are
        :func:`~swarmstate._checks.quick_transaction`'s (which the other
        backends take too); the write skips the general :meth:`_write`.
        """
        checked = quick_transaction(transaction) if type(transaction) is Transaction else None
        if checked is None:
            return super().write(transaction)
        with self._lock:
            flat = self._flat
            for condition in checked.conditions:
                assert isinstance(condition, Absent | Present)
                if ((condition.namespace, condition.key) in flat) is (type(condition) is Absent):
                    raise conflict(condition)
            written = self._put_locked(checked.rows, checked.if_absent, [], checked.tags)
        return WriteResult(written, 0)

    def _write(self, transaction: Checked) -> WriteResult:
        conditions, rows, deletes, prefixes, if_absent, tags, tag_deletes = transaction
        deleted = 0
        with self._lock:
            for condition in conditions:
                if not self._holds(condition):
                    raise conflict(condition)
            flat, dirty = self._flat, self._dirty
            if prefixes:
                self._fold()
                for prefix in prefixes:
                    for ns in self._names_under(prefix):
                        for key in self._keys[ns]:
                            # The indexes are folded again only later: a key an
                            # earlier prefix removed is still listed, and skipped.
                            k = (ns, key)
                            if flat.pop(k, MISSING) is not MISSING:
                                dirty[k] = None
                                deleted += 1
            for k in deletes:
                if flat.pop(k, MISSING) is not MISSING:
                    dirty[k] = None
                    deleted += 1
            if tag_deletes:
                self._fold()
                for tag, start, stop in tag_deletes:
                    found = self._by_tag[tag].range(
                        None if start is None else (start, "", ""),
                        None if stop is None else (stop, "", ""),
                    )
                    for _, ns, key in found:
                        # Folded only later, as for prefixes: skip what is gone.
                        k = (ns, key)
                        if flat.pop(k, MISSING) is not MISSING:
                            dirty[k] = None
                            deleted += 1
            written = self._put_locked(rows, if_absent, [], tags) if rows else 0
        return WriteResult(written, deleted)

    def _tagged(
        self, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[tuple[str, str, str]]:
        with self._lock:
            if self._dirty:
                self._fold()
            # ("v", "", "") sorts before every entry whose value is "v".
            return self._by_tag[tag].range(
                None if start is None else (start, "", ""),
                None if stop is None else (stop, "", ""),
                reverse,
                limit,
            )

    def _holds(self, condition: Condition) -> bool:
        """Whether ``condition`` holds now; the caller holds the lock."""
        kind = type(condition)
        if kind is Empty:
            assert isinstance(condition, Empty)
            if self._dirty:  # the ordered key sets are folded lazily
                self._fold()
            found = self._keys.get(condition.namespace)
            return found is None or not found.range(condition.start, condition.stop, False, 1)
        assert isinstance(condition, Absent | Present | Holds)
        data = self._flat.get((condition.namespace, condition.key))
        if kind is Absent:
            return data is None
        if kind is Present:
            return data is not None
        assert isinstance(condition, Holds)
        return data == condition.data

    def _delete_many(self, pairs: list[Pair]) -> int:
        # Its own loop, not _write: through it a delete costs about 1 us more (near twice).
        removed = 0
        with self._lock:
            flat, dirty = self._flat, self._dirty
            for k in pairs:
                if flat.pop(k, MISSING) is not MISSING:
                    dirty[k] = None
                    removed += 1
        return removed

    def _copy_prefix(self, source: str, target: str) -> int:
        with self._lock:
            self._fold()
            flat, dirty, tags = self._flat, self._dirty, self._tags
            copies = [
                ((target + ns[len(source) :], key), flat[(ns, key)], tags.get((ns, key)))
                for ns in self._names_under(source)
                for key in self._keys[ns]
            ]
            for k, data, pair in copies:
                flat[k] = data
                dirty[k] = pair
        return len(copies)

    def clear(self) -> None:
        with self._lock:
            self._dirty = {}  # first: see _put()
            self._set_flat({})
            self._roots = [None] * _SHARDS
            self._fresh = set()
            self._keys = {}
            self._names = SortedKeys()
            self._tags = {}
            self._by_tag = {"order": SortedKeys(), "group": SortedKeys()}
            self._count_all = self._nbytes = 0
            self._since = None

    # -- the fold: bring the versioned tries in line with _flat ----------

    def _fold(self) -> list[trie.Trie]:
        """Apply the logged keys' current values to the tries and the indexes.

        Runs with the lock held. Returns the current roots.
        """
        dirty = self._dirty
        if not dirty:
            return self._roots
        roots, fresh, flat, since = self._roots, self._fresh, self._flat, self._since
        while dirty:
            # popitem, not iteration: it hands back the dict's slots, so a dict
            # that once held many keys stays cheap to drain. It also runs
            # before _flat is read: see __init__.
            k, tags = dirty.popitem()
            i = hash(k[0]) & 15
            data = flat.get(k, MISSING)
            if data is MISSING:
                roots[i], old = trie.dissoc(roots[i], k, hash(k), fresh)
                if old is MISSING:
                    continue
                self._removed(k, old)
            else:
                value = data if tags is None else (data, *tags)
                roots[i], old = trie.assoc(roots[i], k, hash(k), value, fresh)
                if old is MISSING:
                    self._added(k, value)
                elif old is value:
                    continue
                else:
                    self._changed(k, old, value)
            if since is not None:
                since.add(k)
        return roots

    # A trie value is an entry's bytes, or (bytes, order, group) when it has tags.

    def _added(self, k: _Key, value: Any) -> None:
        ns = k[0]
        found = self._keys.get(ns)
        if found is None:
            found = self._keys[ns] = SortedKeys()
            self._names.add(ns)
        found.add(k[1])
        self._count_all += 1
        if type(value) is bytes:
            self._nbytes += len(value)
        else:
            self._nbytes += len(value[0])
            self._tag(k, value[1], value[2])

    def _removed(self, k: _Key, old: Any) -> None:
        ns = k[0]
        found = self._keys[ns]
        found.remove(k[1])
        if not len(found):
            del self._keys[ns]
            self._names.remove(ns)
        self._count_all -= 1
        if type(old) is bytes:
            self._nbytes -= len(old)
        else:
            self._nbytes -= len(old[0])
            self._untag(k)

    def _changed(self, k: _Key, old: Any, new: Any) -> None:
        old_tagged, new_tagged = type(old) is not bytes, type(new) is not bytes
        self._nbytes += len(new[0] if new_tagged else new) - len(old[0] if old_tagged else old)
        if old_tagged:
            if new_tagged and old[1:] == new[1:]:
                return
            self._untag(k)
        if new_tagged:
            self._tag(k, new[1], new[2])

    def _tag(self, k: _Key, order: str | None, group: str | None) -> None:
        self._tags[k] = (order, group)
        if order is not None:
            self._by_tag["order"].add((order, *k))
        if group is not None:
            self._by_tag["group"].add((group, *k))

    def _untag(self, k: _Key) -> None:
        order, group = self._tags.pop(k)
        if order is not None:
            self._by_tag["order"].remove((order, *k))
        if group is not None:
            self._by_tag["group"].remove((group, *k))

    def _names_under(self, prefix: str | None) -> list[str]:
        if not prefix:
            return list(self._names)
        return self._names.range(prefix, prefix_upper_bound(prefix))

    # -- snapshots -------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            roots = tuple(self._fold())
            since = None if self._since is None else frozenset(self._since)
            frozen: _Frozen = (roots, self._count_all, self._nbytes, since)
            self._since = set()
            # A new fresh set freezes every node the snapshot now shares.
            self._fresh = set()
            snap = Snapshot(
                id=self._next_id,
                parent=self._head,
                timestamp=time.time(),
                size_bytes=self._nbytes,
                count=self._count_all,
                _store=self,
                _payload=frozen,
            )
            self._next_id += 1
            self._head = snap.id
            self._history.append(snap)
            self._retained[snap.id] = snap
            if self.max_history is not None:
                while len(self._history) > self.max_history:
                    del self._retained[self._history.popleft().id]
        return snap

    def _restore(self, snapshot: Snapshot) -> None:
        self._check_live(snapshot)
        target: tuple[trie.Trie, ...] = snapshot._payload[0]
        with self._lock:
            roots = self._fold()
            flat = self._flat
            for i, (now_root, then_root) in enumerate(zip(roots, target, strict=True)):
                if now_root is then_root:
                    continue
                for k, now, then in trie.diff(now_root, then_root):
                    if then is MISSING:
                        flat.pop(k, None)
                        self._removed(k, now)
                    elif now is MISSING:
                        flat[k] = then if type(then) is bytes else then[0]
                        self._added(k, then)
                    else:
                        flat[k] = then if type(then) is bytes else then[0]
                        self._changed(k, now, then)
                roots[i] = then_root
            self._fresh = set()
            self._since = set()
            self._head = snapshot.id

    def snapshots(self) -> list[Snapshot]:
        with self._lock:
            return list(self._history)

    def _check_live(self, snapshot: Snapshot) -> None:
        self._check_own(snapshot)
        if snapshot.id not in self._retained:
            raise evicted(snapshot, self.max_history)

    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        self._check_live(snapshot)
        k = (namespace, key)
        data = trie.get(snapshot._payload[0][hash(namespace) & 15], k, hash(k))
        if data is MISSING:
            return default
        return loads(data if type(data) is bytes else data[0])

    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        self._check_live(snapshot)
        return sorted(k for root in snapshot._payload[0] for k, _ in trie.items(root))

    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        self._check_live(base)
        self._check_live(later)
        added: list[tuple[str, str]] = []
        removed: list[tuple[str, str]] = []
        changed: list[tuple[str, str]] = []
        old_roots, new_roots = base._payload[0], later._payload[0]
        keys = self._keys_between(base, later)
        if keys is not None:
            found = []
            for k in keys:
                i, h = hash(k[0]) & 15, hash(k)
                before = trie.get(old_roots[i], k, h)
                after = trie.get(new_roots[i], k, h)
                if before is not after and before != after:
                    found.append((k, before, after))
        else:
            found = [
                change
                for i in compress(range(_SHARDS), map(is_not, old_roots, new_roots))
                for change in trie.diff(old_roots[i], new_roots[i])
            ]
        for k, before, after in found:
            if before is MISSING:
                added.append(k)
            elif after is MISSING:
                removed.append(k)
            elif _bytes(before) != _bytes(after):  # as on a file: tags alone change nothing
                changed.append(k)
        return sorted_diff(added, removed, changed)

    def _keys_between(self, base: Snapshot, later: Snapshot) -> _KeySet | None:
        """Every key that may differ between two snapshots, if one descends from the other.

        Follows parent links from the younger snapshot to the older one and
        unions the keys each recorded; None when they are not on one line of
        descent, a link is evicted or unknown, or the union grows past
        ``_CHAIN_KEYS_MAX`` (the trie comparison is then as cheap).
        """
        if base.id == later.id:
            return set()
        young, old = (later, base) if later.id > base.id else (base, later)
        keys: _KeySet = _KeySet()
        snap: Snapshot | None = young
        while snap is not None and snap.id > old.id:
            recorded = snap._payload[3]
            if recorded is None:
                return None
            keys |= recorded
            if len(keys) > _CHAIN_KEYS_MAX:
                return None
            snap = None if snap.parent is None else self._retained.get(snap.parent)
        return keys if snap is not None and snap.id == old.id else None

    def __repr__(self) -> str:
        return f"Store(entries={len(self)}, snapshots={len(self._history)})"


def _bytes(value: Any) -> bytes:
    """The stored bytes of a trie value (see :meth:`Store._added`)."""
    return value if type(value) is bytes else value[0]

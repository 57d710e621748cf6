"""The store contract every backend implements, and the one Snapshot class.

A backend subclasses :class:`BaseStore`. Required methods are abstract; the
optional ones have correct (if not the fastest) defaults written in terms of
the required ones, and a backend overrides them when it can do better.

Required (abstract):
    get_many, set_many, delete_many, keys, items, namespaces, count,
    __len__, clear, snapshot, restore, snapshots,
    _snapshot_get, _snapshot_keys, _snapshot_diff.

Optional (defaults here):
    get, set, contains, delete, delete_prefix, copy_prefix, close,
    __enter__/__exit__.

Ordering: keys within a namespace, and namespaces, are ordered by Unicode code
point (Python's ``str`` order; SQLite's BINARY collation; PostgreSQL
``COLLATE "C"``), so "latest" is the last key of a namespace whose keys sort
by time, and a range costs the page, not the namespace.

Prefix operations (``namespaces(prefix=...)``, ``delete_prefix``,
``copy_prefix``) are how an integration scopes work to one thread: it builds
namespaces with an injective encoding (never by joining ids with a separator
that an id may contain), so one prefix selects exactly one thread.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Final, TypedDict

from swarmstate._errors import (
    InvalidArgumentError,
    InvalidKeyError,
    SnapshotError,
    check_key,
    check_namespace,
)

__all__ = ["MISSING", "BaseStore", "Diff", "Snapshot", "prefix_upper_bound"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""Sentinel for "no value", distinct from a stored ``None``."""

_MAX_CHAR = chr(0x10FFFF)


def prefix_upper_bound(prefix: str) -> str | None:
    """Smallest string greater than every string that starts with ``prefix``.

    Returns None when there is no such bound (empty prefix, or a prefix made
    only of U+10FFFF), meaning "no upper limit".
    """
    stripped = prefix.rstrip(_MAX_CHAR)
    if not stripped:
        return None
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)


class Diff(TypedDict):
    """What turns one snapshot into another: lists of ``(namespace, key)``."""

    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    changed: list[tuple[str, str]]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Snapshot:
    """An immutable view of a store at one moment.

    Taking one copies no data on any backend: it costs at most the writes
    since the previous snapshot, never the size of the state. Reading it goes
    through the store
    that took it. Two snapshots compare equal when they are the same snapshot
    of the same store.

    Attributes:
        id: Monotonic per store, starting at 1.
        parent: The snapshot the state descended from (the last one taken or
            restored before this one), or None.
        timestamp: Seconds since the epoch when it was taken.
        size_bytes: Sum of the encoded sizes of its values.
        count: Number of entries.
    """

    id: int
    parent: int | None
    timestamp: float
    size_bytes: int
    count: int
    _store: BaseStore
    _payload: Any = None

    @property
    def keys(self) -> list[tuple[str, str]]:
        """Every ``(namespace, key)`` in the snapshot, sorted."""
        return self._store._snapshot_keys(self)

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        """The value stored under ``(namespace, key)`` when the snapshot was taken."""
        check_key(namespace, key)
        return self._store._snapshot_get(self, namespace, key, default)

    def diff(self, base: Snapshot) -> Diff:
        """The changes that turn ``base`` into this snapshot.

        ``changed`` lists keys present in both whose stored bytes differ.
        Each list is sorted. The cost follows the number of changes between
        the two, not the size of the state.
        """
        self._store._check_own(base)
        return self._store._snapshot_diff(base, self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return self.id == other.id and self._store._uid == other._store._uid

    def __hash__(self) -> int:
        return hash((self.id, self._store._uid))

    def __repr__(self) -> str:
        return (
            f"Snapshot(id={self.id}, parent={self.parent}, count={self.count}, "
            f"size_bytes={self.size_bytes})"
        )


class BaseStore(abc.ABC):
    """State keyed by ``(namespace, key)``; values kept as msgpack bytes.

    See the module docstring for required and optional methods.
    """

    _uid: str
    """Identifies the store's data (a file keeps its uid across reopen)."""

    # -- reads -----------------------------------------------------------

    @abc.abstractmethod
    def get_many(self, pairs: Iterable[tuple[str, str]]) -> list[Any]:
        """Values for each ``(namespace, key)``, in order; missing ones are None."""

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        """The value under ``(namespace, key)``, or ``default``."""
        value = self._get_or_missing(namespace, key)
        return default if value is MISSING else value

    def contains(self, namespace: str, key: str) -> bool:
        """Whether ``(namespace, key)`` holds a value (even None)."""
        return self._get_or_missing(namespace, key) is not MISSING

    def _get_or_missing(self, namespace: str, key: str) -> Any:
        """The value, or :data:`MISSING`; backends override for speed."""
        check_key(namespace, key)
        found = self.items(namespace, start=key, limit=1)
        if found and found[0][0] == key:
            return found[0][1]
        return MISSING

    @abc.abstractmethod
    def keys(
        self,
        namespace: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[str]:
        """Keys of ``namespace`` with ``start <= key < stop``, sorted.

        Args:
            namespace: The namespace to list.
            start: Inclusive lower bound, or None for the first key.
            stop: Exclusive upper bound, or None for no bound.
            reverse: Newest (largest) first.
            limit: At most this many keys; None for all.
        """

    @abc.abstractmethod
    def items(
        self,
        namespace: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
        raw: bool = False,
    ) -> list[tuple[str, Any]]:
        """``(key, value)`` pairs of ``namespace``; arguments as in :meth:`keys`.

        With ``raw=True`` each value is its stored msgpack bytes, not decoded
        (what ``set_many(..., raw=True)`` takes back).
        """

    @abc.abstractmethod
    def namespaces(self, prefix: str | None = None) -> list[str]:
        """Namespaces holding at least one key, sorted; only those under ``prefix``."""

    @abc.abstractmethod
    def count(self, namespace: str) -> int:
        """Number of keys in ``namespace``."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of entries across every namespace."""

    # -- writes ----------------------------------------------------------

    def set(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` under ``(namespace, key)``."""
        self.set_many([(namespace, key, value)])

    @abc.abstractmethod
    def set_many(
        self,
        items: Iterable[tuple[str, str, Any]],
        *,
        if_absent: bool = False,
        ensure: Iterable[tuple[str, str, Any]] = (),
        raw: bool = False,
    ) -> int:
        """Store every ``(namespace, key, value)`` atomically: all or nothing.

        Every key and value (of ``items`` and ``ensure``) is validated and
        encoded before anything changes, so one bad item raises and stores
        nothing. Later items win over earlier ones with the same key.

        Args:
            items: The entries to write.
            if_absent: Leave keys that already hold a value untouched
                (insert-or-ignore) instead of replacing them.
            ensure: More entries for the same atomic batch, each written
                only where its key holds no value yet (as ``if_absent``, for
                these alone); applied before ``items``. For an index entry
                that must exist alongside a value: when it already does,
                nothing is rewritten.
            raw: Every value (of ``items`` and ``ensure``) is already
                msgpack bytes, such as :func:`~swarmstate.dumps` or another
                msgpack writer produced, and is stored as it is: no copy,
                and no check beyond its type. Bytes that are not one
                msgpack value make later reads of that key fail with
                :class:`~swarmstate.DecodeError`.

        Returns:
            How many entries were written, ``ensure`` ones included.
        """

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``(namespace, key)``; True if it existed."""
        return self.delete_many([(namespace, key)]) == 1

    @abc.abstractmethod
    def delete_many(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Remove every ``(namespace, key)`` atomically; returns how many existed."""

    def delete_prefix(self, prefix: str) -> int:
        """Remove every entry whose namespace starts with ``prefix``; returns the count.

        Backends override this to do it atomically without touching other
        namespaces; this default is correct for a single writer only.
        """
        pairs = [(ns, k) for ns in self.namespaces(prefix) for k in self.keys(ns)]
        return self.delete_many(pairs)

    def copy_prefix(self, source: str, target: str) -> int:
        """Copy every namespace under ``source`` to the same name under ``target``.

        ``source + rest`` is copied to ``target + rest``; existing entries in
        the target namespaces are replaced. Returns how many entries were copied.
        """
        check_namespace(source)
        check_namespace(target)
        batch = [
            (target + ns[len(source) :], key, value)
            for ns in self.namespaces(source)
            for key, value in self.items(ns)
        ]
        return self.set_many(batch)

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry. Snapshots already taken keep their contents."""

    # -- snapshots -------------------------------------------------------

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """Record the current state without copying it; costs the writes since the last one."""

    @abc.abstractmethod
    def restore(self, snapshot: Snapshot) -> None:
        """Make the current state equal ``snapshot``; costs the changes since it."""

    @abc.abstractmethod
    def snapshots(self) -> list[Snapshot]:
        """The retained snapshots, oldest first."""

    @abc.abstractmethod
    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        """Backend hook for :meth:`Snapshot.get`."""

    @abc.abstractmethod
    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        """Backend hook for :attr:`Snapshot.keys`."""

    @abc.abstractmethod
    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        """Backend hook for :meth:`Snapshot.diff`."""

    def _check_own(self, snapshot: object) -> None:
        """Raise :class:`SnapshotError` unless ``snapshot`` belongs to this store."""
        if not isinstance(snapshot, Snapshot):
            raise SnapshotError(f"expected a swarmstate Snapshot, got {type(snapshot).__name__}")
        if snapshot._store._uid != self._uid:
            raise SnapshotError(
                f"snapshot {snapshot.id} belongs to another store; restore or diff "
                "snapshots only on the store that took them"
            )

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources; the in-memory store has none."""

    def __enter__(self) -> BaseStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def sorted_diff(
    added: Iterable[tuple[str, str]],
    removed: Iterable[tuple[str, str]],
    changed: Iterable[tuple[str, str]],
) -> Diff:
    """Build a :class:`Diff` with each list sorted."""
    return {"added": sorted(added), "removed": sorted(removed), "changed": sorted(changed)}


def check_range_args(limit: int | None, start: str | None, stop: str | None) -> None:
    """Validate the shared range arguments of ``keys``/``items``."""
    if type(limit) is int and limit >= 0 and start is None and stop is None:
        return
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidArgumentError(f"limit must be a non-negative int or None, got {limit!r}")
    for name, bound in (("start", start), ("stop", stop)):
        if bound is not None and type(bound) is not str:
            raise InvalidKeyError(f"{name} must be a str or None, got {type(bound).__name__}")


def check_items(items: Iterable[tuple[str, str, Any]]) -> Sequence[tuple[str, str, Any]]:
    """Materialize a batch and check every key; raises before anything is written."""
    batch = list(items)
    for entry in batch:
        if type(entry) not in (tuple, list) or len(entry) != 3:
            raise InvalidArgumentError(
                f"set_many takes (namespace, key, value) tuples, got {entry!r}"
            )
        check_key(entry[0], entry[1])
    return batch

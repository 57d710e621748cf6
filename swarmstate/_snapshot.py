"""Snapshots and diffs: the handles a store gives out, read through the store that took them.

A :class:`Snapshot` holds no data of its own: every backend stores what a
snapshot sees (memory shares structure, SQLite and PostgreSQL keep row
versions), and the handle asks its store, through the few hooks
:class:`Source` names (:class:`~swarmstate.BaseStore` has them all). A
:class:`Diff` is the list of keys that turn one snapshot into another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol, TypedDict

from swarmstate._checks import check_key
from swarmstate._errors import SnapshotError

__all__ = ["Diff", "Snapshot", "Source", "evicted", "foreign", "sorted_diff"]


class Diff(TypedDict):
    """What turns one snapshot into another: lists of ``(namespace, key)``."""

    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    changed: list[tuple[str, str]]


class Source(Protocol):
    """What a :class:`Snapshot` reads through: the store that took it."""

    @property
    def _uid(self) -> str:
        """Identifies the store's data."""

    def _check_own(self, snapshot: object) -> None:
        """Raise :class:`~swarmstate.SnapshotError` unless ``snapshot`` is this store's."""

    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        """The value ``snapshot`` saw under ``(namespace, key)``, or ``default``."""

    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        """Every ``(namespace, key)`` ``snapshot`` saw, sorted."""

    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        """What turns ``base`` into ``later``."""


def sorted_diff(
    added: Iterable[tuple[str, str]],
    removed: Iterable[tuple[str, str]],
    changed: Iterable[tuple[str, str]],
) -> Diff:
    """Build a :class:`Diff` with each list sorted."""
    return {"added": sorted(added), "removed": sorted(removed), "changed": sorted(changed)}


@dataclasses.dataclass(frozen=True, eq=False, repr=False, init=False)
class Snapshot:
    """An immutable view of a store at one moment.

    Taking one copies no data on any backend: it costs at most the writes
    since the previous snapshot, never the size of the state. Reading it goes
    through the store that took it. Two snapshots compare equal when they are
    the same snapshot of the same store.

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
    _store: Source
    _payload: Any = None
    # Random per snapshot and kept with it by durable backends: a copy of the
    # file or schema shares the uid but not the tokens of later snapshots.
    _token: int | None = None

    def __init__(
        self,
        id: int,
        parent: int | None,
        timestamp: float,
        size_bytes: int,
        count: int,
        _store: Source,
        _payload: Any = None,
        _token: int | None = None,
    ) -> None:
        # One dict update instead of the frozen dataclass's object.__setattr__
        # per field: it halves what building a snapshot object costs.
        self.__dict__.update(
            id=id,
            parent=parent,
            timestamp=timestamp,
            size_bytes=size_bytes,
            count=count,
            _store=_store,
            _payload=_payload,
            _token=_token,
        )

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
        return (
            self.id == other.id
            and self._token == other._token
            and self._store._uid == other._store._uid
        )

    def __hash__(self) -> int:
        return hash((self.id, self._store._uid))

    def __repr__(self) -> str:
        return (
            f"Snapshot(id={self.id}, parent={self.parent}, count={self.count}, "
            f"size_bytes={self.size_bytes})"
        )


def evicted(snapshot: Snapshot, max_history: int | None) -> SnapshotError:
    """The error for a snapshot its store no longer retains (``max_history`` is the store's)."""
    return SnapshotError(
        f"snapshot {snapshot.id} was evicted (max_history={max_history}); "
        "raise max_history to keep more snapshots"
    )


def foreign(snapshot: Snapshot) -> SnapshotError:
    """The error for a snapshot whose id the store has, taken by another store (a copy)."""
    return SnapshotError(
        f"snapshot {snapshot.id} belongs to another store: this store's snapshot "
        f"{snapshot.id} is a different one (the data was copied from the store that "
        "took it after the copy was made); restore or diff snapshots only on the "
        "store that took them"
    )

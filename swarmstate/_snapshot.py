"""Snapshots and diffs: the handles a store gives out, read through the store that took them.

A :class:`Snapshot` holds no data of its own: every backend stores what a
snapshot sees (memory shares structure, SQLite and PostgreSQL keep row
versions), and the handle asks its store. A :class:`Diff` is the list of
keys that turn one snapshot into another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from swarmstate._checks import check_key

if TYPE_CHECKING:
    from swarmstate._base import BaseStore

__all__ = ["Diff", "Snapshot", "sorted_diff"]


class Diff(TypedDict):
    """What turns one snapshot into another: lists of ``(namespace, key)``."""

    added: list[tuple[str, str]]
    removed: list[tuple[str, str]]
    changed: list[tuple[str, str]]


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
    _store: BaseStore
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
        _store: BaseStore,
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

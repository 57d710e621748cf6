"""The store contract: every public method and its argument checks, once for every backend.

The public methods of a store live here, once. Each checks its arguments, in
the order given below, then calls a protected primitive that the backend
implements, and decodes what comes back. So every backend answers the same
bad input with the same exception and the same message: a user never learns
which backend they are on from behaviour, only from durability and speed.

A backend subclasses :class:`BaseStore` and implements the primitives. They
receive arguments already checked (str names without lone surrogates, a
bool ``reverse``, a ``limit`` in range) and traffic in stored bytes (only
``_range_items`` decodes, when asked); they never check or encode anything.

Required primitives (abstract):
    _read_many, _range_keys, _range_items, _namespaces, _count, __len__,
    _put_many, _put_required, _write, _tagged, clear, snapshot, _restore, snapshots,
    _snapshot_get, _snapshot_keys, _snapshot_diff.

Optional primitives (correct defaults here, built on the required ones):
    _read, _put, _delete_many and _delete_prefix (cases of ``_write``),
    _copy_prefix, _reclaim, close.

Argument checks, first failure wins:
    * names (namespace, key, prefix, range bounds): a ``str`` that has a
      UTF-8 form (no lone surrogate), else :class:`InvalidKeyError`;
    * ``keys``/``items``: namespace, start, stop, then ``reverse`` (a bool)
      and ``limit`` (None or an int in ``0 .. 2**63 - 1``), else
      :class:`InvalidArgumentError`;
    * ``set_many``: the flags, then the ``ensure`` entries, then the items,
      each entry's shape, namespace, key, then value (a codec error, or
      :class:`InvalidArgumentError` for a raw value that is not bytes);
    * pairs (``get_many``, ``delete_many``): each pair's shape, then its names;
    * ``write``: the transaction's type, ``if_absent``, ``raw``, each
      condition (its kind, names, then a ``Holds``'s bytes), the sets (as
      ``set_many``'s items, a set's :class:`~swarmstate.Tags` first), the
      deletes (as pairs), the prefixes, then the tag deletes (each tag, then
      its bounds);
    * ``tagged``: the tag (``"order"`` or ``"group"``), start, stop (tag
      values: at most :data:`~swarmstate._checks.MAX_TAG_BYTES` bytes), then
      ``reverse`` and ``limit`` as ``keys`` checks them.

The transaction primitive. ``write(Transaction(...))`` is the one write that
takes everything: conditions (a key :class:`~swarmstate.Absent`,
:class:`~swarmstate.Present`, or holding given bytes, :class:`~swarmstate.Holds`;
a key range of a namespace :class:`~swarmstate.Empty`), then prefix deletes,
deletes, tag deletes and sets, all or nothing: when a condition fails nothing is written
and :class:`ConflictError` names it. ``delete_many`` and ``delete_prefix`` are
its cases (their primitives default to ``_write``; a backend keeps its own
where that is faster), and so is ``set_many`` (with its
``if_absent``/``ensure``/``require``), which keeps primitives of its own: its
one-statement hot paths.

Ordered secondary keys. An entry may carry two tags, ``order`` and
``group`` (a set's :class:`~swarmstate.Tags`), kept with the entry itself:
overwritten with it, deleted with it however it is deleted, carried by
snapshots, ``restore`` and ``copy_prefix``. ``tagged`` lists live entries
by one tag's value; ``Transaction(tag_deletes=...)`` deletes by it.

Ordering: keys within a namespace, and namespaces, are ordered by Unicode code
point (Python's ``str`` order; SQLite's BINARY collation; byte order of UTF-8
in PostgreSQL), so "latest" is the last key of a namespace whose keys sort
by time, and a range costs the page, not the namespace.

Prefix operations (``namespaces(prefix=...)``, ``delete_prefix``,
``copy_prefix``) are how an integration scopes work to one thread: it builds
namespaces with an injective encoding (never by joining ids with a separator
that an id may contain), so one prefix selects exactly one thread.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self

from swarmstate._checks import (
    MAX_LIMIT,
    Bound,
    Checked,
    Limit,
    Pair,
    Requirement,
    Row,
    Transaction,
    WriteResult,
    check_flag,
    check_key,
    check_max_history,
    check_name,
    check_range,
    checked_pairs,
    checked_requirements,
    checked_tagged,
    checked_transaction,
    encoded_rows,
    quick_transaction,
    unmet,
)
from swarmstate._codec import PACK_OPTIONS, ext_default, loads, packb, refusal
from swarmstate._errors import ConflictError, InvalidArgumentError, SnapshotError
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot

__all__ = [
    "BaseStore",
    "CurrentValues",
    "check_conditions",
    "prefix_upper_bound",
]


class CurrentValues(Protocol):
    """A read-only view of a store's current values: what a point read needs."""

    def get(self, pair: Pair, /) -> bytes | None:
        """The stored bytes under ``pair``, or None."""


class _PointReads:
    """:class:`CurrentValues` over a backend's :meth:`BaseStore._read`."""

    __slots__ = ("get",)

    def __init__(self, read: Any) -> None:
        self.get = read


_MAX_CHAR = chr(0x10FFFF)
_FIRST_SURROGATE = 0xD800
_AFTER_SURROGATES = 0xE000


def prefix_upper_bound(prefix: str) -> str | None:
    """Smallest string greater than every string that starts with ``prefix``.

    Returns None when there is no such bound (empty prefix, or a prefix made
    only of U+10FFFF), meaning "no upper limit". The bound skips the
    surrogates (U+D800 to U+DFFF): no name holds one, and SQLite cannot bind
    a string that does, so after U+D7FF comes U+E000.
    """
    stripped = prefix.rstrip(_MAX_CHAR)
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if following == _FIRST_SURROGATE:
        following = _AFTER_SURROGATES
    return stripped[:-1] + chr(following)


def check_conditions(require: list[Requirement], found: list[bytes | None]) -> None:
    """Raise :class:`ConflictError` naming the first condition ``found`` breaks."""
    broken = unmet(require, found)
    if broken is not None:
        (ns, key), what = broken
        raise ConflictError(
            f"set_many required a condition on ({ns!r}, {key!r}) and found {what}; "
            "the store changed since it was read: read again and retry"
        )


class BaseStore(abc.ABC):
    """State keyed by ``(namespace, key)``; values kept as msgpack bytes.

    Args:
        max_history: How many snapshots to retain (oldest evicted first);
            None keeps every snapshot.

    See the module docstring for the primitives a backend implements and the
    order in which arguments are checked.
    """

    _uid: str
    """Identifies the store's data (a file keeps its uid across reopen)."""

    _compress_large_values: ClassVar[bool] = False
    """A hint to integrations that store large serialized values (the LangGraph
    saver): True where compressing them pays for its CPU, as on a server that
    sends every byte over the network and stores small rows uncompressed."""

    blocks: ClassVar[bool] = True
    """Whether a call may wait on I/O (a file, a server). False for the
    in-memory ``Store``, whose calls an event loop can make directly."""

    _values: CurrentValues
    """Where ``get`` and ``contains`` look a pair up: the store's :meth:`_read`,
    or a mapping of the current values that the backend keeps (the in-memory
    store's dict, so a read costs no Python frame beyond ``get`` itself)."""

    def __init__(self, *, max_history: int | None = None) -> None:
        check_max_history(max_history)
        self.max_history = max_history
        self._values = _PointReads(self._read)

    # -- reads -----------------------------------------------------------

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        """The value under ``(namespace, key)``, or ``default``."""
        if (
            type(namespace) is not str
            or type(key) is not str
            or not (namespace.isascii() and key.isascii())
        ):
            check_key(namespace, key)
        data = self._values.get((namespace, key))
        return default if data is None else loads(data)

    def contains(self, namespace: str, key: str) -> bool:
        """Whether ``(namespace, key)`` holds a value (even None)."""
        check_key(namespace, key)
        return self._values.get((namespace, key)) is not None

    def get_many(self, pairs: Iterable[tuple[str, str]], *, raw: bool = False) -> list[Any]:
        """Values for each ``(namespace, key)``, in order; missing ones are None.

        With ``raw``, each value is its stored msgpack bytes, as
        ``items(raw=True)`` returns them.
        """
        checked = checked_pairs(pairs)
        if type(raw) is not bool:
            check_flag(raw, "raw")
        if not checked:
            return []
        found = self._read_many(checked)
        return found if raw else [None if data is None else loads(data) for data in found]

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
            limit: At most this many keys (up to ``2**63 - 1``); None for all.
        """
        if not (  # the common shapes decided inline: check_range() costs a call
            type(namespace) is str
            and namespace.isascii()
            and start is None
            and stop is None
            and (reverse is True or reverse is False)
            and (limit is None or (type(limit) is int and 0 <= limit <= MAX_LIMIT))
        ):
            check_range(namespace, start, stop, reverse, limit)
        return self._range_keys(namespace, start, stop, reverse, limit)

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
        if not (  # as in keys(): the hot "latest" read makes no check call
            type(namespace) is str
            and namespace.isascii()
            and start is None
            and stop is None
            and (reverse is True or reverse is False)
            and (raw is True or raw is False)
            and (limit is None or (type(limit) is int and 0 <= limit <= MAX_LIMIT))
        ):
            check_range(namespace, start, stop, reverse, limit)
            check_flag(raw, "raw")
        return self._range_items(namespace, start, stop, reverse, limit, raw)

    def tagged(
        self,
        tag: str,
        *,
        start: str | None = None,
        stop: str | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[tuple[str, str, str]]:
        """``(tag value, namespace, key)`` of live entries whose ``tag`` is in ``[start, stop)``.

        Sorted by tag value, then namespace, then key (all by code point),
        descending with ``reverse``; at most ``limit`` of them. Entries
        without that tag are not listed. A store whose schema predates tags
        (a DiskStore file opened read-only before its upgrade, a PostgreSQL
        schema before ``setup()`` brought it to version 10) has none: [].

        Args:
            tag: ``"order"`` or ``"group"``.
            start: Inclusive lower bound of the tag's value, or None.
            stop: Exclusive upper bound, or None for no bound.
            reverse: Largest value first.
            limit: At most this many entries (up to ``2**63 - 1``); None for all.
        """
        checked_tagged(tag, start, stop, reverse, limit)
        return self._tagged(tag, start, stop, reverse, limit)

    def namespaces(self, prefix: str | None = None) -> list[str]:
        """Namespaces holding at least one key, sorted; only those under ``prefix``."""
        if prefix is not None:
            check_name(prefix, "prefix")
        return self._namespaces(prefix or "")

    def count(self, namespace: str) -> int:
        """Number of keys in ``namespace``."""
        check_name(namespace)
        return self._count(namespace)

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of entries across every namespace."""

    # -- writes ----------------------------------------------------------

    def set(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` under ``(namespace, key)``."""
        if (
            type(namespace) is not str
            or type(key) is not str
            or not (namespace.isascii() and key.isascii())
        ):
            check_key(namespace, key)
        try:  # dumps(value), inline: the hottest write saves a call
            data = packb(value, default=ext_default, option=PACK_OPTIONS)
        except TypeError as exc:
            raise refusal(value, exc) from None
        self._put((namespace, key), data)

    def set_many(
        self,
        items: Iterable[tuple[str, str, Any]],
        *,
        if_absent: bool = False,
        ensure: Iterable[tuple[str, str, Any]] = (),
        raw: bool = False,
        require: Iterable[tuple[str, str, Any]] = (),
    ) -> int:
        """Store every ``(namespace, key, value)`` atomically: all or nothing.

        Every key and value (of ``ensure`` and ``items``) is validated and
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
            require: Conditions ``(namespace, key, expected)`` checked in the
                same atomic step, before anything is written: ``expected``
                is :data:`~swarmstate.ABSENT` (no value), :data:`~swarmstate.PRESENT`
                (any value) or the stored bytes (equal, as ``items(raw=True)``
                returns them). If one does not hold, nothing is written and
                :class:`~swarmstate.ConflictError` is raised (compare-and-set:
                read, decide, write only if nothing changed). They hold against
                every other batch, delete and prefix operation; on the
                in-memory store a plain ``set()`` of the same key, which takes
                no lock, is not ordered with them.

        Returns:
            How many entries were written, ``ensure`` ones included.

        Raises:
            ConflictError: A ``require`` condition did not hold.
        """
        if type(if_absent) is not bool or type(raw) is not bool:
            check_flag(if_absent, "if_absent")
            check_flag(raw, "raw")
        conditions = checked_requirements(require) if require else None
        defaults = encoded_rows(ensure, raw, "ensure") if ensure else []
        rows = encoded_rows(items, raw)
        if conditions:
            return self._put_required(rows, if_absent, defaults, conditions)
        if not rows and not defaults:
            return 0
        return self._put_many(rows, if_absent, defaults)

    def awaitable(self) -> bool:
        """Whether, on the running event loop, this store has async twins of its
        reads and writes (``aitems``, ``aget_many``, ``awrite``) that wait on I/O
        without holding a thread. False here; ``PostgresStore`` has them."""
        return False

    def write(self, transaction: Transaction) -> WriteResult:
        """Run ``transaction`` atomically: its conditions, then its writes, all or nothing.

        Every condition is checked against the store as it was before the
        transaction; then ``prefix_deletes``, ``deletes``, ``tag_deletes`` and
        ``sets`` apply, in that order. Everything is validated and encoded before anything
        changes. One transaction on a file, one round trip on PostgreSQL, one
        step under the store's lock in memory (where a plain ``set()``, which
        takes no lock, is not ordered with it).

        Returns:
            How many entries were written and how many were deleted.

        Raises:
            ConflictError: A condition did not hold; the message names it.
                Nothing was written.
        """
        checked = quick_transaction(transaction) if type(transaction) is Transaction else None
        if checked is not None:
            return self._write(checked)
        checked = checked_transaction(transaction)
        if not (
            checked.conditions
            or checked.rows
            or checked.deletes
            or checked.prefixes
            or checked.tag_deletes
        ):
            return WriteResult(0, 0)
        return self._write(checked)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``(namespace, key)``; True if it existed."""
        check_key(namespace, key)
        return self._delete_many([(namespace, key)]) == 1

    def delete_many(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Remove every ``(namespace, key)`` atomically; returns how many existed."""
        checked = checked_pairs(pairs)
        return self._delete_many(checked) if checked else 0

    def delete_prefix(self, prefix: str) -> int:
        """Remove every entry whose namespace starts with ``prefix``; returns the count."""
        check_name(prefix, "prefix")
        return self._delete_prefix(prefix)

    def copy_prefix(self, source: str, target: str) -> int:
        """Copy every namespace under ``source`` to the same name under ``target``.

        ``source + rest`` is copied to ``target + rest``; existing entries in
        the target namespaces are replaced; each copy carries its source's tags.
        Returns how many entries were copied.
        """
        check_name(source, "source")
        check_name(target, "target")
        return self._copy_prefix(source, target)

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove every entry. Snapshots already taken keep their contents."""

    def reclaim(self, *, full: bool = False) -> ReclaimReport:
        """Give the room deleted data left back to the file system or the database server.

        In short steps that let other writers in (each backend documents its
        bound); in memory there is nothing to give back. ``full=True``
        (DiskStore) rewrites the whole file with ``VACUUM``, blocking every
        writer meanwhile: needed once for a file made before incremental reclaim.
        """
        check_flag(full, "full")
        return self._reclaim(full)

    def footprint(self, namespace: str, key: str, size: int) -> int:
        """Bytes an entry whose stored value has ``size`` bytes takes in this store.

        What deleting such an entry frees, as retention reports it: in
        memory its namespace, key and value bytes; a backend that knows its
        own layout counts its overhead too (DiskStore: table and index cells
        and overflow pages).
        """
        check_key(namespace, key)
        if type(size) is not int or size < 0:
            raise InvalidArgumentError(f"size must be an int >= 0, got {size!r}")
        return self._footprint(namespace, key, size)

    # -- snapshots -------------------------------------------------------

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """Record the current state without copying it; costs the writes since the last one."""

    def restore(self, snapshot: Snapshot) -> None:
        """Make the current state equal ``snapshot``; costs the changes since it."""
        self._check_own(snapshot)
        self._restore(snapshot)

    @abc.abstractmethod
    def snapshots(self) -> list[Snapshot]:
        """The retained snapshots, oldest first."""

    def _check_own(self, snapshot: object) -> None:
        """Raise :class:`SnapshotError` unless ``snapshot`` belongs to this store.

        Durable backends also check the snapshot's token against their own
        record when they read it (see :func:`swarmstate._snapshot.foreign`).
        """
        if not isinstance(snapshot, Snapshot):
            raise SnapshotError(f"expected a swarmstate Snapshot, got {type(snapshot).__name__}")
        if snapshot._store._uid != self._uid:
            raise SnapshotError(
                f"snapshot {snapshot.id} belongs to another store; restore or diff "
                "snapshots only on the store that took them"
            )

    # -- the primitives a backend implements -------------------------------

    def _read(self, pair: Pair) -> bytes | None:
        """The stored bytes under ``pair``, or None."""
        return self._read_many([pair])[0]

    @abc.abstractmethod
    def _read_many(self, pairs: list[Pair]) -> list[bytes | None]:
        """The stored bytes under each pair (at least one), in order, read at one moment."""

    @abc.abstractmethod
    def _range_keys(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[str]:
        """Keys of ``namespace`` in ``[start, stop)``, ordered, at most ``limit``."""

    @abc.abstractmethod
    def _range_items(
        self, namespace: str, start: Bound, stop: Bound, reverse: bool, limit: Limit, raw: bool
    ) -> list[tuple[str, Any]]:
        """``(key, value)`` of the same range as :meth:`_range_keys`.

        Each value is decoded with :func:`~swarmstate.loads`, or left as its
        stored bytes when ``raw``. The one primitive that decodes: the in-memory
        "latest" read then builds its result once.
        """

    @abc.abstractmethod
    def _namespaces(self, prefix: str) -> list[str]:
        """Namespaces starting with ``prefix`` (all of them for ``""``), sorted."""

    @abc.abstractmethod
    def _count(self, namespace: str) -> int:
        """Number of keys in ``namespace``."""

    def _put(self, pair: Pair, data: bytes) -> None:
        """Store ``data`` under ``pair``."""
        self._put_many([(pair, data)], False, [])

    @abc.abstractmethod
    def _put_many(self, rows: list[Row], if_absent: bool, ensure: list[Row]) -> int:
        """Write ``ensure`` (where absent), then ``rows``, in one atomic step.

        ``rows`` and ``ensure`` are not both empty and may repeat a key.
        Returns what :meth:`set_many` returns.
        """

    @abc.abstractmethod
    def _put_required(
        self, rows: list[Row], if_absent: bool, ensure: list[Row], require: list[Requirement]
    ) -> int:
        """:meth:`_put_many` after checking ``require``, all in one atomic step.

        ``require`` is not empty; ``rows`` and ``ensure`` may both be (then
        only the check runs). :func:`check_conditions` raises when one breaks.
        """

    @abc.abstractmethod
    def _write(self, transaction: Checked) -> WriteResult:
        """Backend hook for :meth:`write`: one atomic step, the conditions first.

        The transaction is not empty. Conditions are checked in order against
        the state before the transaction; the first that fails raises
        :func:`~swarmstate._checks.conflict` and nothing is written. Then the
        prefixes, the pairs, the tag ranges and the rows (which may repeat
        keys), in that order; each row carries ``transaction.tags``' entry
        (none when that is None), replacing the tags its key had.
        """

    @abc.abstractmethod
    def _tagged(
        self, tag: str, start: Bound, stop: Bound, reverse: bool, limit: Limit
    ) -> list[tuple[str, str, str]]:
        """Backend hook for :meth:`tagged`: arguments checked, ``tag`` one of TAG_NAMES."""

    def _delete_many(self, pairs: list[Pair]) -> int:
        """Remove the pairs (at least one, maybe repeated) atomically; how many existed."""
        return self._write(Checked([], [], pairs, [], False)).deleted

    def _delete_prefix(self, prefix: str) -> int:
        """Remove every entry under ``prefix`` atomically; how many there were."""
        return self._write(Checked([], [], [], [prefix], False)).deleted

    def _copy_prefix(self, source: str, target: str) -> int:
        """Copy the namespaces under ``source`` to ``target``; correct for one writer only.

        Tags are not read here: a backend whose entries can carry tags overrides it.
        """
        rows = [
            ((target + ns[len(source) :], key), data)
            for ns in self._namespaces(source)
            for key, data in self._range_items(ns, None, None, False, None, True)
        ]
        return self._put_many(rows, False, []) if rows else 0

    def _footprint(self, namespace: str, key: str, size: int) -> int:
        """Backend hook for :meth:`footprint`; by default namespace, key and value bytes."""
        return len(namespace.encode()) + len(key.encode()) + size

    def _reclaim(self, full: bool) -> ReclaimReport:
        """Backend hook for :meth:`reclaim`; by default there is nothing to give back."""
        return ReclaimReport(type(self).__name__, 0, 0, note="nothing to give back in memory")

    @abc.abstractmethod
    def _restore(self, snapshot: Snapshot) -> None:
        """Make the current state equal ``snapshot`` (checked to be of this store's uid)."""

    @abc.abstractmethod
    def _snapshot_get(self, snapshot: Snapshot, namespace: str, key: str, default: Any) -> Any:
        """Backend hook for :meth:`Snapshot.get`."""

    @abc.abstractmethod
    def _snapshot_keys(self, snapshot: Snapshot) -> list[tuple[str, str]]:
        """Backend hook for :attr:`Snapshot.keys`."""

    @abc.abstractmethod
    def _snapshot_diff(self, base: Snapshot, later: Snapshot) -> Diff:
        """Backend hook for :meth:`Snapshot.diff`."""

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources; idempotent. Later calls raise StoreClosedError where it matters."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store; a close that can wait (for calls in flight) runs in a worker thread."""
        if type(self).close is not BaseStore.close:
            import asyncio  # here: importing swarmstate does not import asyncio

            await asyncio.to_thread(self.close)

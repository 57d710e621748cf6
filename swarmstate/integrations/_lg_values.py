"""Where the LangGraph checkpointer keeps channel values: once per (channel, version).

LangGraph versions every channel and passes ``new_versions``, the channels
whose version changed, to each ``put``. A channel's value is stored when
its version changes, exactly as passed, and a checkpoint names the versions
it holds: a read returns the value stored at each channel's version
(LangGraph's reference semantics; ``InMemorySaver`` and ``PostgresSaver``
agree). An in-place edit of a channel that no node wrote is therefore not
recorded, as there.

A stored value is one of two forms:

* ``[BLOB, type, bytes]``: the serializer's pair;
* ``[LIST, refs]``: a list cut into shared segments (:mod:`._lg_lists`),
  ``refs`` being ``[segment key, first item, end item]`` triples; a version
  of a growing list costs its new items.

Every checkpoint entry names, in its ``inline`` map (:mod:`._lg_entry`),
each channel that has a value at its version: small forms (a counter, a
route, every list's refs) are carried there as they are, and a larger blob,
stored in an entry of its own under ``(channel, version)``, as ``[APART]``.
The map is copied, as stored, into each child entry for the channels whose
version does not change. So a read of a conversation's checkpoint is its
entry, plus the segments of its lists and the large blobs it names; a
channel the map does not name has no value, and costs no lookup.

Caches, all keyed by immutable names: the listings and blobs of recently
written or read versions (the next ``put`` of the thread compares bytes with
its parent's instead of reading them back, a read of the latest checkpoint
needs no segment, and a DeltaChannel snapshot that many reads start from is
fetched once), the heads of recent checkpoints, and serialized items
by content (:mod:`._lg_memo`); for DeltaChannel history walks, stored rows by
name (:class:`Rows`). None of these names is reused for other content in a
thread's life, so another process cannot make them stale, except by putting
a checkpoint id again or copying over an existing thread (:class:`Rows`).

Space comes back through :meth:`Values.collect`: after checkpoints are
deleted, the values and segments no remaining checkpoint of that thread
namespace references are deleted too. It lists the value and segment keys
*before* it reads the checkpoints, so an entry written by a concurrent
``put`` is either not listed or referenced by a checkpoint it reads.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

from swarmstate._base import BaseStore
from swarmstate._codec import dumps
from swarmstate._errors import CorruptDataError, DecodeError, InvalidArgumentError
from swarmstate.integrations import _lg_entry as E
from swarmstate.integrations import _lg_keys as K
from swarmstate.integrations import _lg_lists as L
from swarmstate.integrations._lg_memo import Contents, Generations, Memo
from swarmstate.integrations._lg_revive import Reviver

__all__ = ["APART", "BLOB", "INLINE_MAX", "LIST", "SPLIT_MIN", "Head", "Rows", "Values"]

BLOB: Final = 0
LIST: Final = 1
APART: Final = 2
"""The inline form of a value stored in an entry of its own."""
SPLIT_MIN: Final = 1024
"""A list value whose serialized bytes reach this size is stored as a listing."""
INLINE_MAX: Final = 128
"""A blob whose serialized bytes are at most this long rides in the checkpoint entry."""
_PAGE: Final = 256
_HEADS_MAX: Final = 8192
_VERSION_TYPES: Final = (str, int, float)

Pair = tuple[str, str]
"""``(values namespace, value key)``: the name of one channel's value at one version."""
Context = tuple[str, str, str]
"""``(thread id, checkpoint_ns, checkpoint id)`` that asked for a value: named in errors."""
Entry = tuple[str, str, bytes]
_ABSENT: Final = object()


class Head(NamedTuple):
    """What a child checkpoint needs of its parent: channel versions and inline values."""

    versions: dict[str, Any]
    inline: dict[str, list[Any]]
    run_id: str | None = None
    """The run that wrote it: a child of the same run finds the run index in place."""


class Blob(NamedTuple):
    """A value stored apart, as the serializer's pair: what a read of it needs."""

    kind: str
    data: bytes


Written = tuple[Pair, "L.Listing | Blob", "Contents | None"]
"""A value a put wrote, to cache once the write is done: its listing's contents, if any."""


class _Recent:
    """Recently used stored values, listings and blobs, by :data:`Pair`, within a byte budget."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._size = 0
        self._items: OrderedDict[Pair, L.Listing | Blob] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pair: Pair) -> L.Listing | Blob | None:
        with self._lock:
            found = self._items.get(pair)
            if found is not None:
                self._items.move_to_end(pair)
            return found

    def put(self, pair: Pair, value: L.Listing | Blob) -> None:
        size = len(value.data)
        if size > self._budget:
            return
        with self._lock:
            old = self._items.pop(pair, None)
            if old is not None:
                self._size -= len(old.data)
            self._items[pair] = value
            self._size += size
            while self._size > self._budget:
                _, evicted = self._items.popitem(last=False)
                self._size -= len(evicted.data)

    def drop(self, prefix: str) -> None:
        """Forget every value of the namespaces under ``prefix`` (a thread)."""
        with self._lock:
            for pair in [p for p in self._items if p[0].startswith(prefix)]:
                self._size -= len(self._items.pop(pair).data)


class Rows:
    """Stored bytes of checkpoint entries and of pending writes to regular channels, by name.

    For DeltaChannel history walks, which read a page of keys and then only
    the rows they have not met. Neither kind is rewritten under its key in a
    thread's life: an entry is written once under its checkpoint's id (a put
    of the same id again drops it here), a regular pending write is
    insert-or-ignore. One per store in a process, shared by its savers, so a
    put, delete or copy through any of them drops what it changed. ``changes``
    counts those drops: a walk keeps what it fetched only if none happened
    while it read, so it never keeps bytes older than a drop.
    """

    def __init__(self, budget: int) -> None:
        self.cache: Generations[Pair, bytes] = Generations(
            budget, lambda pair, data: len(data) + len(pair[1]) + 128
        )
        self.changes = 0

    @classmethod
    def of(cls, store: BaseStore, budget: int) -> Rows:
        """The store's shared instance (made with the first nonzero budget); 0: a disabled one."""
        if budget <= 0:
            return cls(0)
        with _SHARED_LOCK:
            found = _SHARED_ROWS.get(store)
            if found is None:
                found = _SHARED_ROWS[store] = cls(budget)
            return found

    def discard(self, pair: Pair) -> None:
        self.changes += 1
        self.cache.discard(pair)

    def drop(self, prefix: str) -> None:
        """Forget every row of the namespaces under ``prefix``."""
        self.changes += 1
        self.cache.drop(lambda pair: pair[0].startswith(prefix))


_SHARED_ROWS: weakref.WeakKeyDictionary[BaseStore, Rows] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


class Values:
    """Channel values of every thread of one store: writes, batched reads, reclaim."""

    def __init__(
        self,
        store: BaseStore,
        cache_bytes: int,
        compress: bool = False,
        plain_none: Any = None,
    ) -> None:
        self.store = store
        self.compress = compress
        self._recent = _Recent(cache_bytes // 2 - cache_bytes // 16)
        # Decoded checkpoint entries (values beside them) by their stored bytes:
        # a DeltaChannel history walks the same ancestors for each checkpoint
        # it rebuilds. Read-only for its users; equal bytes, equal entry.
        self.entries_by_bytes: Generations[bytes, E.Decoded] = Generations(
            cache_bytes // 32, lambda data, _: 4 * len(data) + 256
        )
        self.rows = Rows.of(store, cache_bytes // 32)
        self._memo = Memo(cache_bytes // 8)
        # The parent's contents, for a put to tell an appended list from its parent's
        # version in one comparison (._lg_memo); each holds its listing, counted too.
        self._contents: Generations[Pair, tuple[Contents, L.Listing]] = Generations(
            cache_bytes // 8, lambda pair, found: found[0].cost() + len(found[1].data)
        )
        self.reviver = Reviver(cache_bytes // 4)
        self.heads: OrderedDict[tuple[str, str, str], Head] = OrderedDict()
        # The serializer known to write None as ("null", b"") (LangGraph's, whose
        # dumps_typed returns that for None first thing): a None of its is stored
        # as that without a call. None: always call.
        self.plain_none = plain_none

    # -- the heads of recent checkpoints ---------------------------------------

    def remember(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, head: Head) -> None:
        """Record the versions and inline values of a checkpoint just written or read."""
        # No lock: each dict operation is one step for other threads (see forget).
        heads = self.heads
        heads[(thread_id, checkpoint_ns, checkpoint_id)] = head
        if len(heads) > _HEADS_MAX:
            with contextlib.suppress(KeyError):  # another thread emptied it meanwhile
                heads.popitem(last=False)

    def parent_head(
        self, serde: Any, thread_id: str, checkpoint_ns: str, parent_id: str
    ) -> Head | None:
        """The versions and inline values of the parent of a new checkpoint.

        None when the parent is missing or stored whole (an earlier layout):
        the new checkpoint then stores every value it holds, and relies on no
        other entry.
        """
        found = self.heads.get((thread_id, checkpoint_ns, parent_id))
        if found is not None:
            return found
        namespace = K.scope(thread_id, checkpoint_ns)
        key = K.checkpoint_key(parent_id)
        rows = self.store.items(namespace, start=key, limit=1, raw=True)
        if not rows or rows[0][0] != key:
            return None
        decoded = E.decode(serde, rows[0][1])
        if decoded.inline is None:
            return None
        run_id = decoded.metadata.get("run_id")
        head = Head(
            decoded.checkpoint["channel_versions"],
            decoded.inline,
            run_id if type(run_id) is str else None,
        )
        self.remember(thread_id, checkpoint_ns, parent_id, head)
        return head

    # -- writes ----------------------------------------------------------------

    def entries(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        values: Mapping[str, Any],
        stored: Mapping[str, Any],
        parent: Head | None,
    ) -> tuple[list[Entry], dict[str, list[Any]], list[Written]]:
        """How to store ``values[channel]`` at each ``(channel, version)`` of ``stored``.

        Returns the store entries, the forms to carry in the checkpoint
        entry, and the listings and blobs to cache: pass those to :meth:`cache`
        once the entries are written (a listing cached before its segments
        exist could become the base of another version).
        """
        out: list[Entry] = []
        inline: dict[str, list[Any]] = {}
        listings: list[Written] = []
        for channel, version in stored.items():
            if channel not in values:
                continue  # no value at this version: a read leaves the channel out
            if type(version) not in _VERSION_TYPES:  # what K.value_key takes
                raise InvalidArgumentError(
                    f"channel {channel!r} has version {version!r}; "
                    "channel versions must be str, int or float"
                )
            value = values[channel]
            if value is None and serde is self.plain_none:
                inline[channel] = [BLOB, "null", b""]  # what serde.dumps_typed(None) returns
                continue
            data = contents = previous = None
            if type(value) is list:
                if parent is not None and channel in parent.versions:
                    previous = self._previous(thread_id, checkpoint_ns, channel, parent)
                made = self._memo.serialize(serde, value, previous)
                if made is not None:
                    data, contents = made
            if data is not None:
                kind = "msgpack"
            else:
                kind, data = serde.dumps_typed(value)
            built = None
            if kind == "msgpack" and len(data) >= SPLIT_MIN:
                base = previous[1] if previous is not None else None
                if base is None and parent is not None and channel in parent.versions:
                    base = self._base(thread_id, checkpoint_ns, channel, parent)
                built = L.build(bytes(data), base, pack=self.compress)
            if built is None and len(data) <= INLINE_MAX:
                inline[channel] = [BLOB, kind, bytes(data)]
                continue  # the common case: no entry of its own, no key needed
            key = K.value_key(channel, version)
            assert key is not None  # its type was checked above
            pair = (K.values(thread_id, checkpoint_ns), key)
            if built is not None:
                listing, segments = built
                segments_ns = K.segments(thread_id, checkpoint_ns)
                out.extend((segments_ns, name, encoded) for name, encoded in segments)
                inline[channel] = [LIST, [list(ref) for ref in listing.refs]]
                listings.append((pair, listing, contents))
            else:
                data = data if type(data) is bytes else bytes(data)
                out.append((*pair, dumps([BLOB, kind, data])))
                inline[channel] = [APART]
                listings.append((pair, Blob(kind, data), None))
        return out, inline, listings

    def cache(self, written: Iterable[Written]) -> None:
        for pair, value, contents in written:
            self._recent.put(pair, value)
            if contents is not None and type(value) is L.Listing:
                self._contents.put(pair, (contents, value))
            else:
                self._contents.discard(pair)  # a checkpoint put again, with another value

    def _previous(
        self, thread_id: str, checkpoint_ns: str, channel: str, parent: Head
    ) -> tuple[Contents, L.Listing] | None:
        """The contents and listing of the parent's version of a list, if this saver made them.

        Only when the listing is the one the parent's entry refers to.
        """
        form = parent.inline.get(channel)
        key = K.value_key(channel, parent.versions[channel])
        if form is None or form[0] != LIST or key is None:
            return None
        found = self._contents.get((K.values(thread_id, checkpoint_ns), key))
        if found is None or [list(ref) for ref in found[1].refs] != form[1]:
            return None
        return found  # type: ignore[no-any-return]

    def _base(
        self, thread_id: str, checkpoint_ns: str, channel: str, parent: Head
    ) -> L.Listing | None:
        """The listing a new version is built from: the parent's, cached or read."""
        form = parent.inline.get(channel)
        key = K.value_key(channel, parent.versions[channel])
        if form is None or form[0] != LIST or key is None:
            return None  # the parent's value is not a listing: nothing to share
        pair = (K.values(thread_id, checkpoint_ns), key)
        context = (thread_id, checkpoint_ns, "(parent)")
        listings = self._resolve({pair: (context, form)})[1]
        return listings.get(pair)

    # -- reads -----------------------------------------------------------------

    def fill(self, serde: Any, found: list[tuple[Context, dict[str, Any], dict[str, Any]]]) -> None:
        """Set ``channel_values`` of each ``(context, checkpoint, inline forms)``.

        Every value is decoded anew for each checkpoint (callers may change
        what they get); the stored bytes are fetched once for the batch.
        """
        wanted: dict[Pair, tuple[Context, list[Any]]] = {}
        names: list[list[tuple[str, Pair]]] = []
        for context, checkpoint, inline in found:
            values_ns = K.values(context[0], context[1])
            mine = []
            for channel, version in checkpoint["channel_versions"].items():
                form = inline.get(channel)
                key = K.value_key(channel, version)
                if form is None or key is None:
                    continue  # no value at this version
                pair = (values_ns, key)
                mine.append((channel, pair))
                if pair not in wanted:
                    wanted[pair] = (context, form)
            names.append(mine)
        blobs, listings = self._resolve(wanted)
        for (context, checkpoint, _), mine in zip(found, names, strict=True):
            channel_values: dict[str, Any] = {}
            for channel, pair in mine:
                value = _decode(self.reviver, serde, pair, blobs, listings, context)
                if value is not _ABSENT:
                    channel_values[channel] = value
            checkpoint["channel_values"] = channel_values

    def read(self, serde: Any, wanted: dict[Pair, tuple[Context, list[Any]]]) -> dict[Pair, Any]:
        """The decoded values of ``wanted`` (pair -> asking checkpoint, its inline form)."""
        blobs, listings = self._resolve(wanted)
        out: dict[Pair, Any] = {}
        for pair, (context, _) in wanted.items():
            value = _decode(self.reviver, serde, pair, blobs, listings, context)
            if value is not _ABSENT:
                out[pair] = value
        return out

    def _resolve(
        self, wanted: dict[Pair, tuple[Context, list[Any]]]
    ) -> tuple[dict[Pair, tuple[str, bytes]], dict[Pair, L.Listing]]:
        """The stored forms of ``wanted``: blobs as serializer pairs, lists as listings.

        Inline forms are used as given; values stored apart are read in one
        batch, then the segments of every list not in the cache in another.
        """
        blobs: dict[Pair, tuple[str, bytes]] = {}
        listings: dict[Pair, L.Listing] = {}
        roots: dict[Pair, tuple[L.Ref, ...]] = {}
        missing: list[Pair] = []
        for pair, (context, form) in wanted.items():
            if type(form) is list and form == [APART]:
                cached = self._recent.get(pair)
                if type(cached) is Blob:
                    blobs[pair] = cached
                else:
                    missing.append(pair)
            else:
                self._sort(pair, form, context, blobs, listings, roots)
        if missing:
            for pair, row in zip(missing, self.store.get_many(missing), strict=True):
                if row is None:
                    raise _corrupt(*wanted[pair][0], _channel_of(pair), DecodeError("missing"))
                self._sort(pair, row, wanted[pair][0], blobs, listings, roots)
                if pair in blobs:
                    self._recent.put(pair, Blob(*blobs[pair]))
        if roots:
            self._assemble(roots, wanted, listings)
        return blobs, listings

    def _sort(
        self,
        pair: Pair,
        form: Any,
        context: Context,
        blobs: dict[Pair, tuple[str, bytes]],
        listings: dict[Pair, L.Listing],
        roots: dict[Pair, tuple[L.Ref, ...]],
    ) -> None:
        try:
            kind = form[0]
            if kind == BLOB:
                if type(form[1]) is not str or type(form[2]) is not bytes:
                    raise DecodeError(f"a stored value is {form!r}")
                blobs[pair] = (form[1], form[2])
            elif kind == LIST:
                cached = self._recent.get(pair)
                if type(cached) is L.Listing:
                    listings[pair] = cached
                else:
                    roots[pair] = tuple(_ref(ref) for ref in form[1])
            else:
                raise DecodeError(f"unknown value form {kind!r}")
        except (TypeError, IndexError, ValueError) as exc:
            raise _corrupt(*context, _channel_of(pair), exc) from exc

    def _assemble(
        self,
        roots: dict[Pair, tuple[L.Ref, ...]],
        wanted: dict[Pair, tuple[Context, list[Any]]],
        listings: dict[Pair, L.Listing],
    ) -> None:
        owners: dict[Pair, Pair] = {}
        for pair, refs in roots.items():
            segments_ns = K.segments(*wanted[pair][0][:2])
            for ref in refs:
                owners.setdefault((segments_ns, ref.key), pair)
        order = list(owners)
        segments: dict[Pair, tuple[array[int], bytes]] = {}
        for segment_pair, row in zip(order, self.store.get_many(order), strict=True):
            if row is None:
                continue  # reported by assemble() as missing
            owner = owners[segment_pair]
            try:
                segments[segment_pair] = L.parse_segment(row)
            except DecodeError as exc:
                raise _corrupt(*wanted[owner][0], _channel_of(owner), exc) from exc
        for pair, refs in roots.items():
            segments_ns = K.segments(*wanted[pair][0][:2])
            by_key = {
                ref.key: segments[(segments_ns, ref.key)]
                for ref in refs
                if (segments_ns, ref.key) in segments
            }
            try:
                listing = L.assemble(refs, by_key)
            except DecodeError as exc:
                raise _corrupt(*wanted[pair][0], _channel_of(pair), exc) from exc
            listings[pair] = listing
            self._recent.put(pair, listing)

    # -- reclaim ---------------------------------------------------------------

    def forget(self, thread_id: str) -> None:
        """Drop what the caches hold of one thread (after it was changed by a delete)."""
        prefix = K.thread_prefix(thread_id)
        self._recent.drop(prefix)
        self._contents.drop(lambda pair: pair[0].startswith(prefix))
        self.rows.drop(prefix)
        # list() copies the keys in one step (no Python code runs inside it):
        # a put on another thread cannot change the dict under the loop.
        for key in [k for k in list(self.heads) if k[0] == thread_id]:
            self.heads.pop(key, None)

    def collect(self, serde: Any, thread_id: str, checkpoint_ns: str) -> int:
        """Delete the values and segments no checkpoint of the namespace references.

        Returns how many entries were deleted.
        """
        values_ns = K.values(thread_id, checkpoint_ns)
        segments_ns = K.segments(thread_id, checkpoint_ns)
        # Listed before the checkpoints are read: see the module docstring.
        value_keys = set(self.store.keys(values_ns))
        segment_keys = set(self.store.keys(segments_ns))
        if not value_keys and not segment_keys:
            return 0
        referenced: set[str] = set()
        used: set[str] = set()
        for key, entry in self.scan(K.scope(thread_id, checkpoint_ns)):
            if key[-1] != K.CHECKPOINT:
                continue
            decoded = E.decode(serde, entry)
            if decoded.inline is None:
                continue
            for channel, version in decoded.checkpoint["channel_versions"].items():
                form = decoded.inline.get(channel)
                if form is None:
                    continue
                if form[0] == APART:
                    value_key = K.value_key(channel, version)
                    if value_key is not None:
                        referenced.add(value_key)
                elif form[0] == LIST:
                    used.update(ref[0] for ref in form[1])
        live = sorted(value_keys & referenced)
        dead = [(values_ns, key) for key in sorted(value_keys - referenced)]
        for start in range(0, len(live), _PAGE):
            page = [(values_ns, key) for key in live[start : start + _PAGE]]
            for row in self.store.get_many(page):
                if type(row) is list and row and row[0] == LIST:
                    used.update(ref[0] for ref in row[1])
        dead += [(segments_ns, key) for key in sorted(segment_keys - used)]
        for start in range(0, len(dead), _PAGE):
            self.store.delete_many(dead[start : start + _PAGE])
        return len(dead)

    def scan(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        """Every ``(key, stored bytes)`` of a namespace in key order, a page at a time."""
        rows = self.store.items(namespace, limit=_PAGE, raw=True)
        yield from rows
        while len(rows) == _PAGE:
            last = rows[-1][0]
            # ``start`` is inclusive: the next page begins with the last key seen.
            rows = self.store.items(namespace, start=last, limit=_PAGE + 1, raw=True)
            rows = rows[1:] if rows and rows[0][0] == last else rows[:_PAGE]
            yield from rows


def _decode(
    reviver: Reviver,
    serde: Any,
    pair: Pair,
    blobs: dict[Pair, tuple[str, bytes]],
    listings: dict[Pair, L.Listing],
    context: Context,
) -> Any:
    """The value stored under ``pair``, decoded, or :data:`_ABSENT`."""
    try:
        listing = listings.get(pair)
        if listing is not None:
            return reviver.loads(serde, ("msgpack", listing.data))
        if pair in blobs:
            return reviver.loads(serde, blobs[pair])
    except Exception as exc:  # stored bytes that do not decode are damaged
        raise _corrupt(*context, _channel_of(pair), exc) from exc
    return _ABSENT


def _ref(stored: Any) -> L.Ref:
    key, start, stop = stored
    if type(key) is not str or type(start) is not int or type(stop) is not int:
        raise DecodeError(f"a list value names a segment as {stored!r}")
    return L.Ref(key, start, stop)


def _channel_of(pair: Pair) -> str:
    try:
        return K.read_field(pair[1], 0)[0]
    except (ValueError, IndexError):
        return pair[1]


def _corrupt(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, channel: str, exc: BaseException
) -> CorruptDataError:
    return CorruptDataError(
        f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (checkpoint_ns "
        f"{checkpoint_ns!r}): the value of channel {channel!r} cannot be read "
        f"({type(exc).__name__}: {exc}); the stored data is damaged or incomplete"
    )

"""Where the LangGraph checkpointer keeps channel values, and how they are read back.

LangGraph versions every channel and passes ``new_versions``, the channels
whose version changed, to each ``put``. A channel's value is stored when
its version changes, exactly as passed, and a checkpoint names the versions
it holds: a read returns the value stored at each channel's version
(LangGraph's reference semantics; ``InMemorySaver`` and ``PostgresSaver``
agree). An in-place edit of a channel that no node wrote is therefore not
recorded, as there.

Every checkpoint entry carries, in its *forms* map (:mod:`.entry`), the
stored form of each channel that has a value at its version:

* ``[BLOB, type, bytes]``: the serializer's pair, inside the record, for a
  new value under :data:`SHARE_AT` bytes that is not a list (a counter, a
  route, a scratchpad, a small dict), or a list of at most
  :data:`INLINE_MAX` bytes. It is never compared with its previous version:
  below that size the comparison and a chunk row cost a put more than the
  bytes they save (docs/floors.md);
* ``[CHUNKS, type, id, parts]``: the serializer's bytes as parts, each a
  literal or a range of one of the thread's chunks (:mod:`.sharing`), for
  a larger value and for a list (windows and growing conversations repeat
  most of the version before): a new version shares every byte it can with
  the version it replaces, so it costs what changed. A channel whose last
  comparison shared under a quarter of its bytes (a plan regenerated whole)
  stores its next :data:`_SKIP` versions without comparing, then compares
  again: the comparison is paid where it pays. ``id`` names this
  version's bytes, never used for other bytes (a pending write and the
  checkpoint that takes its bytes share it), so they are cached by it.

A child entry copies its parent's forms for the channels whose version did
not change, as they were stored, except a ``BLOB`` of more than
:data:`INLINE_MAX` bytes: the first checkpoint that carries it unchanged
stores it once as a chunk, which every later one references, so a value
that stays is stored once, not once per checkpoint. A channel whose version is neither in
``new_versions`` nor the parent's (LangGraph's ``__copy__`` fork puts a
copy of a checkpoint under that checkpoint's parent) takes the form stored
at that version elsewhere in the thread namespace, as the reference saver
looks values up by ``(channel, version)``; a version stored nowhere has no
value.

A node that replaces a value whole (a plan regenerated, a draft rewritten)
hands its output to the saver twice: as its task's pending write, and as
the child checkpoint's value, the same bytes. A regular pending write of
at least :data:`SHARE_AT` bytes that repeats no stored value is one new
chunk. Whichever of the two is built first offers what it stores (a
:class:`Fresh`, kept bounded by bytes); the other, when its bytes are
equal, takes the same form (no comparison, no new chunk) and requires, in
its own statement, the row that keeps those chunks holding exactly what
was offered: the write's row, or the put's checkpoint record. The runtime
saves writes in the background, so the first may not have landed yet: the
taker is then refused (:exc:`TakenGone`) and built again storing its own
bytes.

What the new version of a value is compared with (its *base*): the
parent's version of the channel, or, for the first checkpoint of a subgraph
call, the version of the enclosing graph's checkpoint it runs under
(LangGraph's ``checkpoint_map``), so a subgraph shares its parent graph's
bytes. A checkpoint whose forms
reference chunks it did not write names the checkpoints it took them from
(*lenders*), and its write requires that they still exist: retention
deletes a checkpoint before the chunks only it referenced
(:mod:`.retention`), so a put that built on a checkpoint deleted meanwhile
is refused by the store, and the saver writes it again with every value
stored anew (:exc:`LenderGone`).

Caches, all keyed by names that are never reused for other content: the
bytes of recently written or read versions (by version id) and chunks (by
key); the heads of recent checkpoints (versions and forms, by checkpoint
id); serialized list items by content (:mod:`.memo`). Another process or a
``restore()`` can delete what they name, never change it, so nothing is
dropped from them when a thread is deleted or pruned: a put that builds on a
head whose checkpoint is gone names it as its lender, and the store refuses
it (then it stores every value anew, or the thread's tombstone refuses it).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

import ormsgpack

from swarmstate._base import BaseStore
from swarmstate._checks import Holds
from swarmstate._codec import loads
from swarmstate._errors import CorruptDataError, DecodeError, InvalidArgumentError
from swarmstate.integrations.langgraph import allowlist, sharing
from swarmstate.integrations.langgraph.format import entry, keys, legacy
from swarmstate.integrations.langgraph.format.pack import (
    CHUNK_AT_LEAST,
    inflate_envelope,
    pack_envelope,
)
from swarmstate.integrations.langgraph.memo import Contents, Generations, Memo
from swarmstate.integrations.langgraph.revive import Reviver
from swarmstate.integrations.langgraph.steps import NeedsStore

__all__ = [
    "APART",
    "BLOB",
    "CHUNKS",
    "INLINE_MAX",
    "LIST",
    "SHARE_AT",
    "Built",
    "Head",
    "LenderGone",
    "Values",
    "chunks_of",
    "write_chunks",
]

BLOB: Final = 0
LIST: Final = 1
"""A list of the earlier layout, as segment refs (:mod:`.legacy`); read, never written."""
APART: Final = 2
"""A value of the earlier layout stored in an entry of its own; read, never written."""
CHUNKS: Final = 3
INLINE_MAX: Final = 128
"""A value carried unchanged is copied into each later record up to this many bytes."""
SHARE_AT: Final = 8192
"""A new value this long or longer shares its bytes with its previous version (chunks);
a shorter one rides inside its record as the serializer made it, not compared."""
_HEADS_MAX: Final = 8192
_SKIP: Final = 3
"""New versions stored without comparing after a comparison that shared under a quarter."""
_FRESH_KEPT: Final = 8
"""New values remembered per checkpoint and channel (parallel tasks writing one channel)."""
_VERSION_TYPES: Final = (str, int, float)

Pair = tuple[str, str]
"""``(namespace, key)`` of one store entry."""
Context = tuple[str, str, str]
"""``(thread id, checkpoint_ns, checkpoint id)`` that asked for a value: named in errors."""
Entry = tuple[str, str, bytes]
_MISSING: Final = object()


class LenderGone(Exception):
    """A checkpoint a put took chunks from was deleted before the put was written."""


class TakenGone(LenderGone):
    """A row a write took chunks from (:class:`Fresh`) was not stored as offered:
    not landed yet, refused, rewritten or deleted."""


class Head(NamedTuple):
    """What a child checkpoint needs of its parent: channel versions and stored forms."""

    versions: dict[str, Any]
    forms: dict[str, list[Any]]
    run_id: str | None = None
    """The run that wrote it: a child of the same run finds the run index in place."""


class Fresh(NamedTuple):
    """A new value on top of one checkpoint, stored by its child's put or a task's write.

    The other of the two, when its bytes are equal, takes the same form
    (:meth:`Values.fresh`) and requires ``needs`` and ``lender``.
    """

    fid: str
    version: sharing.Version
    needs: Holds
    """The row that names these chunks, holding what was offered: the
    write's row (a write under that key stored before it is kept, and names
    other chunks) or the put's checkpoint record (a put refused, built again
    or put again names other chunks). Required, it keeps them from the sweep."""
    lender: Pair | None
    """The checkpoint whose chunks the version's other parts are, or None."""


class Built(NamedTuple):
    """What a put stores for its channel values, ready for one store batch."""

    rows: list[Entry]
    """The new chunks."""
    forms: dict[str, list[Any]]
    lenders: set[Pair]
    """Checkpoint entries whose chunks the forms reference: they must still exist."""
    written: list[tuple[str, str, Any, sharing.Version, Contents | None]]
    """``(channel, version id, channel version, bytes as stored, contents)`` to cache."""
    classes: set[type]
    """The classes the stored values bring to the state (:mod:`.allowlist`)."""
    required: list[Holds]
    """Rows whose chunks the forms take (:class:`Fresh`): each must still hold them."""
    offers: list[tuple[Pair, str, str, sharing.Version, Pair | None]]
    """``(parent entry, channel, form id, version, lender)`` of the new values a
    task's write on the parent may take, once the record's bytes are known."""


def chunks_of(form: list[Any]) -> Iterable[str]:
    """The chunk keys a ``CHUNKS`` form references."""
    for part in form[3]:
        if type(part) is list:
            yield part[0]


def write_chunks(stored: Any) -> list[str]:
    """The chunk keys a stored pending write names (none for one whose bytes are inline).

    What a sweep keeps for the write. A write that does not decode names
    none (a reader of it raises).
    """
    try:
        write = loads(stored)
    except (ValueError, TypeError):
        return []
    if type(write) is not list or len(write) != 6 or type(write[5]) is not list:
        return []
    form = write[5]
    if len(form) != 4 or form[0] != CHUNKS or type(form[3]) is not list:
        return []
    return [part[0] for part in form[3] if type(part) is list and part and type(part[0]) is str]


class Values:
    """Channel values of every thread of one store: the forms a put stores, and reads."""

    def __init__(
        self,
        store: BaseStore,
        cache_bytes: int,
        compress: bool = False,
        plain_none: Any = None,
    ) -> None:
        self.store = store
        self.compress = compress
        # Version id -> its bytes and parts (a put compares with its parent's, a
        # read of a recent checkpoint needs no chunk).
        self.versions: Generations[str, sharing.Version] = Generations(
            cache_bytes // 2 - cache_bytes // 16,
            lambda fid, version: len(version.data) + 24 * len(version.parts) + 128,
        )
        # Chunk key -> bytes, for reads of versions not cached (history pages).
        self._chunks: Generations[str, bytes] = Generations(
            cache_bytes // 8, lambda key, data: len(data) + 64
        )
        # Decoded checkpoint entries by their stored bytes: a DeltaChannel history
        # walks the same ancestors for each checkpoint it rebuilds. Read-only for
        # its users; equal bytes, equal entry.
        self.entries_by_bytes: Generations[bytes, entry.Decoded] = Generations(
            cache_bytes // 32, lambda data, _: 4 * len(data) + 256
        )
        self._memo = Memo(cache_bytes // 8)
        # Version id -> the memo's contents of a list version, for the next put.
        self._contents: Generations[str, Contents] = Generations(
            cache_bytes // 16, lambda fid, contents: contents.cost()
        )
        self.reviver = Reviver(cache_bytes // 4)
        self.heads: OrderedDict[tuple[str, str, str], Head] = OrderedDict()
        # Checkpoint namespace -> the newest checkpoint this saver wrote or read in
        # it: a latest read starts there (a hint; a stale one costs a read).
        self.latest: dict[str, str] = {}
        # (thread, checkpoint_ns, channel) -> how many more new versions to store
        # without comparing, because the last comparison shared under a quarter
        # (a plan regenerated whole). A hint: losing it costs one comparison.
        self._skipping: dict[tuple[str, str, str], int] = {}
        # (checkpoint entry, channel) -> new values on top of it offered (Fresh) by
        # its child's put or its tasks' writes, each at most a share of the budget.
        self._fresh: Generations[tuple[Pair, str], tuple[Fresh, ...]] = Generations(
            cache_bytes // 16,
            lambda at, kept: sum(len(f.version.data) + 256 for f in kept),
        )
        self._fresh_max = cache_bytes // 16 // _FRESH_KEPT
        # The serializer known to write None as ("null", b"") (LangGraph's, whose
        # dumps_typed returns that for None first thing): a None of its is stored
        # as that without a call. None: always call.
        self.plain_none = plain_none

    # -- the heads of recent checkpoints ---------------------------------------

    def remember(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, head: Head) -> None:
        """Record the versions and forms of a checkpoint just written or read."""
        # No lock: each dict operation is one step for other threads.
        heads = self.heads
        heads[(thread_id, checkpoint_ns, checkpoint_id)] = head
        if len(heads) > _HEADS_MAX:
            with contextlib.suppress(KeyError):  # another thread emptied it meanwhile
                heads.popitem(last=False)

    def saw_latest(self, namespace: str, checkpoint_id: str) -> None:
        """Record ``checkpoint_id`` as the newest checkpoint of ``namespace`` known here."""
        latest = self.latest
        if len(latest) > _HEADS_MAX and namespace not in latest:
            latest.clear()
        latest[namespace] = checkpoint_id

    def parent_head(
        self, serde: Any, thread_id: str, checkpoint_ns: str, parent_id: str
    ) -> Head | None:
        """The versions and forms of the parent of a new checkpoint.

        None when the parent is missing or was stored by an earlier layout:
        the new checkpoint then stores every value it holds, and takes
        nothing from another entry.
        """
        found = self.heads.get((thread_id, checkpoint_ns, parent_id))
        if found is not None:
            return found
        key = keys.checkpoint_key(parent_id)
        rows = self.store.items(keys.scope(thread_id, checkpoint_ns), start=key, limit=1, raw=True)
        if not rows or rows[0][0] != key:
            return None
        decoded = entry.decode(serde, rows[0][1])
        head = head_of(decoded)
        if head is not None:
            self.remember(thread_id, checkpoint_ns, parent_id, head)
        return head

    # -- writes ----------------------------------------------------------------

    def build(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        values: Mapping[str, Any],
        versions: Mapping[str, Any],
        stored: Mapping[str, Any],
        parent: Head | None,
        parent_pair: Pair | None,
        outer: Head | None = None,
        outer_pair: Pair | None = None,
        *,
        take: bool = True,
        offline: bool = False,
    ) -> Built:
        """The forms and chunks that store ``values`` at ``versions``.

        ``stored`` are the channels whose value this checkpoint stores anew
        (LangGraph's ``new_versions``; every channel when ``parent`` is None,
        then nothing is taken from another entry). ``outer`` is the head of
        the enclosing graph's checkpoint a subgraph's first checkpoint runs
        under: a new value is compared with its version of the channel. Pass
        the result to :meth:`cache` once the batch is written. ``offline``:
        raise :class:`NeedsStore` instead of reading the store (a version not
        cached, a fork's value looked up), so an event loop can run the
        build itself and hand only a build that reads to a worker thread.
        ``take``: a value with the bytes of a pending write of the parent
        takes its chunks (:class:`Fresh`); the put offers its own large new
        values back (``offers``).
        """
        forms: dict[str, list[Any]] = {}
        rows: list[Entry] = []
        lenders: set[Pair] = set()
        written: list[tuple[str, str, Any, sharing.Version, Contents | None]] = []
        classes: set[type] = set()
        required: list[Holds] = []
        offers: list[tuple[Pair, str, str, sharing.Version, Pair | None]] = []
        chunks_ns = keys.chunks(thread_id)
        for channel, version in stored.items():
            if channel not in values:
                continue  # no value at this version: a read leaves the channel out
            if type(version) not in _VERSION_TYPES:
                raise InvalidArgumentError(
                    f"channel {channel!r} has version {version!r}; "
                    "channel versions must be str, int or float"
                )
            value = values[channel]
            if value is None and serde is self.plain_none:
                forms[channel] = [BLOB, "null", b""]  # what serde.dumps_typed(None) returns
                continue
            base = None
            lender: Pair | None = None
            if parent is not None:
                base, lender = self._base(
                    thread_id, checkpoint_ns, channel, parent, parent_pair, offline
                )
                if base is None and lender is None and outer is not None:
                    base, lender = self._base(
                        thread_id, checkpoint_ns, channel, outer, outer_pair, offline
                    )
            data = contents = None
            if type(value) is list:
                previous = None
                if base is not None:
                    before = self._contents.get(base[0])
                    if before is not None:
                        previous = (before, base[1].data)
                made = self._memo.serialize(serde, value, previous)
                if made is not None:
                    data, contents = made
            if data is not None:
                kind = "msgpack"
                assert contents is not None
                classes |= contents.kinds
            else:
                kind, data = serde.dumps_typed(value)
                classes |= allowlist.classes_in(value, kind, data)
            on = parent_pair if len(data) >= SHARE_AT else None
            if on is not None and take:
                fresh = self.fresh(on, channel, data)
                if fresh is not None:
                    # A task's output that became the value as it was: its write
                    # stored the bytes, taken as a lender's (no comparison).
                    forms[channel] = self.fresh_form(kind, fresh)
                    required.append(fresh.needs)
                    if fresh.lender is not None:
                        lenders.add(fresh.lender)
                    continue
            skipping = self._skipping.get((thread_id, checkpoint_ns, channel), 0)
            if skipping:
                # The last comparison of this channel found little to share.
                self._skipping[(thread_id, checkpoint_ns, channel)] = skipping - 1
                base = None
            if len(data) < SHARE_AT and (
                type(value) is not list or len(data) <= INLINE_MAX or skipping
            ):
                # Inside the record as the serializer made it: comparing it with its
                # previous version costs more than the bytes it would save. A list
                # (a window, a growing conversation, a plan) is shared
                # from INLINE_MAX up: its versions mostly repeat each other's items.
                forms[channel] = [BLOB, kind, data if type(data) is bytes else bytes(data)]
                continue
            data = data if type(data) is bytes else bytes(data)
            if base is None and lender is None and not skipping and parent is not None:
                # A channel new to its head (a subgraph's input, the state it then
                # builds from it): compared with the largest value the head stores
                # as chunks, the one it most likely copies.
                base, lender = self._largest(parent, parent_pair)
                if base is None and outer is not None:
                    base, lender = self._largest(outer, outer_pair)
            if base is not None:
                made_version, chunks = sharing.share(data, base[1])
                assert lender is not None  # a base always comes with its lender
                lenders.add(lender)
                if made_version.fresh * 4 > len(data) * 3:
                    # Under a quarter shared: the next versions are stored without
                    # comparing, then it is compared again.
                    if len(self._skipping) > _HEADS_MAX:
                        self._skipping.clear()
                    self._skipping[(thread_id, checkpoint_ns, channel)] = _SKIP
            else:
                made_version, chunks = sharing.whole(data)
            fid = sharing.new_chunk_key()
            forms[channel] = [
                CHUNKS,
                kind,
                fid,
                [list(p) if type(p) is tuple else p for p in made_version.parts],
            ]
            if on is not None:
                # A task's write of the same bytes on the parent, saved meanwhile,
                # may take them. Its parts beyond the new chunks are the base's.
                offers.append((on, channel, fid, made_version, lender if base else None))
            rows.extend((chunks_ns, key, self._chunk_row(chunk)) for key, chunk in chunks)
            written.append((channel, fid, version, made_version, contents))
        if parent is not None:
            # Channels whose version did not change: the parent's forms, as stored.
            parent_versions = parent.versions
            for channel, form in parent.forms.items():
                if (
                    channel not in stored
                    and channel in versions
                    and versions[channel] == parent_versions.get(channel)
                ):
                    if channel in forms:
                        continue
                    if form[0] == BLOB and len(form[2]) > INLINE_MAX:
                        # Carried unchanged: stored once as a chunk from now on, which
                        # every later checkpoint references instead of copying.
                        made_version, chunks = sharing.whole(form[2])
                        fid = sharing.new_chunk_key()
                        parts = [_stored_part(made_version.parts[0])]
                        forms[channel] = [CHUNKS, form[1], fid, parts]
                        rows.extend((chunks_ns, k, self._chunk_row(c)) for k, c in chunks)
                        written.append((channel, fid, versions[channel], made_version, None))
                        continue
                    forms[channel] = form
                    if form[0] == CHUNKS and parent_pair is not None:
                        lenders.add(parent_pair)
            changed = versions.items() - parent_versions.items()
            if changed:
                missing = {ch: v for ch, v in changed if ch not in stored and ch not in forms}
                if missing:
                    if offline:
                        raise NeedsStore
                    self._resolve_missing(serde, thread_id, checkpoint_ns, missing, forms, lenders)
        return Built(rows, forms, lenders, written, classes, required, offers)

    def _base(
        self,
        thread_id: str,
        checkpoint_ns: str,
        channel: str,
        head: Head,
        pair: Pair | None,
        offline: bool = False,
    ) -> tuple[tuple[str, sharing.Version] | None, Pair | None]:
        """``((version id, version), lender)`` a new version of ``channel`` is compared with.

        ``(None, None)`` when ``head`` has no value of the channel; ``(None,
        pair)`` when it has one that is not stored as chunks (nothing to share).
        """
        form = head.forms.get(channel)
        if form is None or pair is None:
            return None, None
        if form[0] != CHUNKS:
            return None, pair  # a small value: nothing to share
        fid = form[2]
        found = self.versions.get(fid)
        if found is None:
            if offline:
                raise NeedsStore
            found = self._read_version(thread_id, form, (thread_id, checkpoint_ns, "(parent)"))
        return (fid, found), pair

    def write_form(
        self,
        thread_id: str,
        checkpoint_ns: str,
        built_on: list[tuple[str, str]],
        channel: str,
        kind: str,
        data: bytes,
    ) -> tuple[list[Any], list[Entry], sharing.Version, Pair] | None:
        """A pending write's bytes as a ``CHUNKS`` form taking a stored value's bytes.

        A write that repeats a value stored as chunks, whole or with items
        added at its end, is stored as ranges of that value's chunks: a
        subgraph's input (the state it was given) and the state it hands
        back. ``built_on`` are the ``(namespace, checkpoint id)`` the write
        builds on, the nearest last (its own checkpoint, in ``checkpoint_ns``,
        then the enclosing graphs' it runs under): the nearest whose head is cached and holds
        the channel's value as chunks is the one compared with (nothing is
        read for this; a subgraph's first writes may reach the saver before
        its first checkpoint, then the enclosing one serves). Returns the
        form, the new chunk rows, the version made and the checkpoint it
        borrows from (its *lender*, which the write must require), or None:
        too small, nothing cached to compare with, or not beginning with that
        value's bytes (a node's new output, such as a plan made anew or a
        text rewritten at its start: its put compares it), and then the
        write keeps its bytes inline, as written.
        """
        if len(data) < SHARE_AT:
            return None
        for nearest, (namespace, checkpoint_id) in enumerate(reversed(built_on)):
            if nearest:
                parsed = keys.parse_scope(namespace)
                if parsed is None or parsed[0] != thread_id:
                    continue
                head = self.heads.get((thread_id, parsed[1], checkpoint_id))
            else:
                head = self.heads.get((thread_id, checkpoint_ns, checkpoint_id))
            form = head.forms.get(channel) if head is not None else None
            if form is None or form[0] != CHUNKS:
                continue
            base = self.versions.get(form[2])
            if base is None:
                continue
            at = sharing.header_length(data)
            base_at = sharing.header_length(base.data) if at else 0
            if not data.startswith(memoryview(base.data)[base_at:], at):
                return None  # not a copy of it: one comparison of its first bytes
            made, chunks = sharing.share(data, base)
            chunks_ns = keys.chunks(thread_id)
            rows = [(chunks_ns, key, self._chunk_row(chunk)) for key, chunk in chunks]
            parts = [list(p) if type(p) is tuple else p for p in made.parts]
            lender = (namespace, keys.checkpoint_key(checkpoint_id))
            return [CHUNKS, kind, sharing.new_chunk_key(), parts], rows, made, lender
        return None

    def fresh(self, on: Pair, channel: str, data: bytes) -> Fresh | None:
        """A value of ``channel`` on top of checkpoint ``on`` offered with exactly ``data``."""
        kept: tuple[Fresh, ...] = self._fresh.get((on, channel), ())
        for fresh in kept:
            if fresh.version.data == data:
                return fresh
        return None

    @staticmethod
    def fresh_form(kind: str, fresh: Fresh) -> list[Any]:
        """The ``CHUNKS`` form that stores ``fresh``'s bytes of type ``kind``."""
        return [CHUNKS, kind, fresh.fid, [_stored_part(p) for p in fresh.version.parts]]

    def offer(self, on: Pair, channel: str, fresh: Fresh) -> None:
        """Remember a new value on top of checkpoint ``on``, as its row is being stored.

        A taker requires that row in its own statement: refused when it has
        not landed (or is gone), it then stores its bytes anew.
        """
        if len(fresh.version.data) > self._fresh_max:
            return  # bounded: a value this large is not kept for a taker
        kept: tuple[Fresh, ...] = self._fresh.get((on, channel), ())
        self._fresh.put((on, channel), (*kept[1 - _FRESH_KEPT :], fresh))

    def write_whole(
        self, kind: str, data: bytes
    ) -> tuple[list[Any], list[tuple[str, bytes]], sharing.Version]:
        """A pending write's bytes as one new chunk: its ``CHUNKS`` form, the chunk
        (:meth:`chunk_rows` makes its row), the version made.

        For a regular write of at least :data:`SHARE_AT` bytes that
        :meth:`write_form` does not store as a value's ranges: the child
        checkpoint's value of the channel is the same bytes when the node
        replaced it whole, and its put takes them (:meth:`offer`).
        """
        made, chunks = sharing.whole(data)
        parts = [_stored_part(p) for p in made.parts]
        return [CHUNKS, kind, sharing.new_chunk_key(), parts], chunks, made

    def chunk_rows(self, thread_id: str, chunks: list[tuple[str, bytes]]) -> list[Entry]:
        """The rows that store the thread's new ``(key, bytes)`` chunks."""
        chunks_ns = keys.chunks(thread_id)
        return [(chunks_ns, key, self._chunk_row(chunk)) for key, chunk in chunks]

    def write_values(
        self, wanted: list[tuple[Context, list[Any]]], *, offline: bool = False
    ) -> list[tuple[str, bytes] | None]:
        """The serializer's pairs of pending writes stored as ``CHUNKS`` forms, in order.

        One read of the chunks not cached, for all of them. None where a
        chunk is missing (the caller tells a checkpoint deleted meanwhile
        from damaged data). ``offline``: raise :class:`NeedsStore` rather
        than read the store.
        """
        named = {("w", i): (context, form) for i, (context, form) in enumerate(wanted)}
        stored = self._fetch(named, offline=offline)
        return [stored.get(("w", i)) for i in range(len(wanted))]

    def _largest(
        self, head: Head, pair: Pair | None
    ) -> tuple[tuple[str, sharing.Version] | None, Pair | None]:
        """The largest version ``head`` stores as chunks that is cached, with ``pair``.

        ``(None, None)`` when it has none cached (nothing is read for this).
        """
        if pair is None:
            return None, None
        best: tuple[str, sharing.Version] | None = None
        for form in head.forms.values():
            if form[0] != CHUNKS:
                continue
            found = self.versions.get(form[2])
            if found is not None and (best is None or len(found.data) > len(best[1].data)):
                best = (form[2], found)
        return (best, pair) if best is not None else (None, None)

    def _resolve_missing(
        self,
        serde: Any,
        thread_id: str,
        checkpoint_ns: str,
        missing: dict[str, Any],
        forms: dict[str, list[Any]],
        lenders: set[Pair],
    ) -> None:
        """Forms of channel versions that neither ``new_versions`` nor the parent holds.

        Looked up where the namespace stored them: in its entries, newest
        first (a ``__copy__`` fork copies a recent checkpoint, so the search is
        short). A version found nowhere has no value (as in the reference saver).
        """
        namespace = keys.scope(thread_id, checkpoint_ns)
        for key, data in scan(self.store, namespace, reverse=True):
            if key[-1] != keys.CHECKPOINT:
                continue
            decoded = entry.decode(serde, data)
            head = head_of(decoded)
            if head is None:
                continue  # an entry of the earlier layouts: nothing to take from it
            for channel, version in list(missing.items()):
                found_form = head.forms.get(channel)
                if found_form is not None and head.versions.get(channel) == version:
                    forms[channel] = found_form
                    if found_form[0] == CHUNKS:
                        lenders.add((namespace, key))
                    del missing[channel]
            if not missing:
                return

    def _chunk_row(self, chunk: bytes) -> bytes:
        """The stored bytes of a chunk: msgpack bin, or ``[1, packed, size]`` compressed."""
        if self.compress:
            packed = pack_envelope(chunk, CHUNK_AT_LEAST)
            if packed is not None:
                return packed
        return ormsgpack.packb(chunk)

    def cache(self, built: Built) -> None:
        """Remember what a put wrote, once its batch is in the store."""
        for _, fid, _, made, contents in built.written:
            self.versions.put(fid, made)
            if contents is not None:
                self._contents.put(fid, contents)

    # -- reads -----------------------------------------------------------------

    def fill(
        self,
        serde: Any,
        found: list[tuple[Context, dict[str, Any], dict[str, list[Any]]]],
        *,
        offline: bool = False,
    ) -> list[tuple[int, str]]:
        """Set ``channel_values`` of each ``(context, checkpoint, forms)``.

        Every value is decoded anew for each checkpoint (callers may change
        what they get); stored bytes are fetched once for the batch. Returns
        ``(index, channel)`` for each checkpoint some of whose stored bytes
        are missing (its ``channel_values`` are left unset): the caller tells
        a checkpoint deleted while it was read from damaged data.
        """
        wanted: dict[Any, tuple[Context, list[Any]]] = {}
        names: list[list[tuple[str, Any, list[Any]]]] = []
        for context, checkpoint, forms in found:
            mine = []
            for channel, version in checkpoint["channel_versions"].items():
                form = forms.get(channel)
                if form is None:
                    continue  # no value at this version
                name = _name(context, channel, version, form)
                mine.append((channel, name, form))
                if name is not None and name not in wanted:
                    wanted[name] = (context, form)
            names.append(mine)
        stored = self._fetch(wanted, offline=offline)
        incomplete: list[tuple[int, str]] = []
        reviver = self.reviver
        for index, ((context, checkpoint, _), mine) in enumerate(zip(found, names, strict=True)):
            channel_values: dict[str, Any] = {}
            for channel, name, form in mine:
                pair = (form[1], form[2]) if name is None else stored.get(name, _MISSING)
                if pair is _MISSING:
                    incomplete.append((index, channel))
                    break
                if pair is None:
                    continue  # an earlier layout's value that holds no value
                try:
                    channel_values[channel] = reviver.loads(serde, pair)
                except Exception as exc:  # stored bytes that do not decode are damaged
                    raise _corrupt(*context, channel, exc) from exc
            else:
                checkpoint["channel_values"] = channel_values
        return incomplete

    def read(
        self, serde: Any, wanted: dict[tuple[Context, str], tuple[Any, list[Any]]]
    ) -> tuple[dict[tuple[Context, str], Any], list[tuple[Context, str]]]:
        """The decoded values of ``wanted``: ``(context, channel) -> (version, form)``.

        Also the asked keys whose stored bytes are missing (left out of the
        values; the caller tells deleted from damaged). An earlier layout's
        value entry that holds no value is left out of both.
        """
        names: dict[Any, tuple[Context, list[Any]]] = {}
        keyed = []
        for (context, channel), (version, form) in wanted.items():
            name = _name(context, channel, version, form)
            keyed.append(((context, channel), name, form))
            if name is not None:
                names.setdefault(name, (context, form))
        stored = self._fetch(names)
        out: dict[tuple[Context, str], Any] = {}
        missing: list[tuple[Context, str]] = []
        for asked, name, form in keyed:
            pair = (form[1], form[2]) if name is None else stored.get(name, _MISSING)
            if pair is _MISSING:
                missing.append(asked)
                continue
            if pair is None:
                continue
            try:
                out[asked] = self.reviver.loads(serde, pair)
            except Exception as exc:  # stored bytes that do not decode are damaged
                raise _corrupt(*asked[0], asked[1], exc) from exc
        return out, missing

    def take_chunks(self, pairs: list[Pair], rows: list[Any]) -> None:
        """Cache chunks read for a read that raised :class:`NeedsStore` naming them.

        ``pairs`` are ``(namespace, key)`` as the exception named them, ``rows``
        what ``get_many(pairs, raw=True)`` returned (None for a chunk gone:
        nothing is cached, and the read, tried again, reads the store itself
        and tells a checkpoint deleted from damaged data).
        """
        for (namespace, key), row in zip(pairs, rows, strict=True):
            if row is not None:
                self._chunks.put(key, _parse_chunk(namespace, key, row))

    def _read_version(self, thread_id: str, form: list[Any], context: Context) -> sharing.Version:
        """The bytes of one ``CHUNKS`` form (cached by its id), read from the store if needed."""
        fid = form[2]
        found: sharing.Version | None = self.versions.get(fid)
        if found is None:
            made: dict[str, sharing.Version] = {}
            self._fetch({("c", thread_id, fid): (context, form)}, made)
            found = made.get(fid)
            if found is None:
                raise _corrupt(*context, "?", DecodeError(f"a chunk of version {fid!r} is missing"))
        return found

    def _fetch(
        self,
        wanted: dict[Any, tuple[Context, list[Any]]],
        made: dict[str, sharing.Version] | None = None,
        *,
        offline: bool = False,
    ) -> dict[Any, Any]:
        """The serializer pairs of ``wanted`` (name -> asking context, form).

        A name whose bytes are missing (a chunk, segment or value entry gone)
        is left out; a legacy value entry that holds no value maps to None.
        ``made`` receives the versions assembled from chunks, by id.
        ``offline``: raise :class:`NeedsStore` rather than read the store.
        """
        out: dict[Any, Any] = {}
        chunk_names: dict[Any, tuple[str, list[Any]]] = {}
        chunk_keys: dict[Pair, None] = {}
        legacy_lists: dict[Any, tuple[Context, list[Any]]] = {}
        apart: list[Any] = []
        fetched: dict[str, bytes] = {}  # chunk key -> bytes, for this read
        versions, chunks_cache = self.versions, self._chunks
        for name, (context, form) in wanted.items():
            code = form[0] if type(form) is list and form else None
            try:
                if code == CHUNKS:
                    kind, fid = form[1], form[2]
                    if type(kind) is not str or type(fid) is not str or type(form[3]) is not list:
                        raise DecodeError(f"a stored value is {form!r}")
                    if len(form[3]) > sharing.MAX_PARTS:
                        # No writer stores more; a planted list must not be walked.
                        raise DecodeError(
                            f"a stored value names {len(form[3])} parts, more than the "
                            f"{sharing.MAX_PARTS} a writer stores"
                        )
                    found = versions.get(fid)
                    if found is not None:
                        out[name] = (kind, found.data)
                        continue
                    namespace = keys.chunks(context[0])
                    for key in chunks_of(form):
                        if type(key) is not str:
                            raise DecodeError(f"a stored value names a chunk as {key!r}")
                        if key not in fetched:
                            cached = chunks_cache.get(key)
                            if cached is None:
                                chunk_keys[(namespace, key)] = None
                            else:
                                fetched[key] = cached
                    chunk_names[name] = (namespace, form)
                elif code == LIST:
                    legacy_lists[name] = (context, form)
                elif code == APART:
                    apart.append(name)
                else:
                    raise DecodeError(f"unknown value form {code!r}")
            except (TypeError, IndexError, DecodeError) as exc:
                raise _corrupt(*context, "?", exc) from exc
        if offline and (chunk_keys or legacy_lists or apart):
            # The chunks to read, when they are all that is missing (see take_chunks).
            raise NeedsStore(list(chunk_keys)) if not (legacy_lists or apart) else NeedsStore
        if chunk_keys:
            order = list(chunk_keys)
            rows = self.store.get_many(order, raw=True)
            for (namespace, key), row in zip(order, rows, strict=True):
                if row is not None:
                    fetched[key] = chunk = _parse_chunk(namespace, key, row)
                    chunks_cache.put(key, chunk)
        for name, (_, form) in chunk_names.items():
            try:
                parts = tuple(_part(p) for p in form[3])
            except DecodeError as exc:
                raise _corrupt(*wanted[name][0], "?", exc) from exc
            pieces = {}
            for key in sharing.chunk_keys(parts):
                found_chunk = fetched.get(key)
                if found_chunk is None:
                    break
                pieces[key] = found_chunk
            else:
                try:
                    data = sharing.assemble(parts, pieces)
                except ValueError as exc:
                    raise _corrupt(*wanted[name][0], "?", exc) from exc
                version = sharing.version(data, parts)
                versions.put(form[2], version)
                if made is not None:
                    made[form[2]] = version
                out[name] = (form[1], data)
        if legacy_lists:
            out.update(self._legacy_lists(legacy_lists))
        if apart:
            for name, row in zip(apart, self.store.get_many([n[1] for n in apart]), strict=True):
                if row is None:
                    continue
                if type(row) is list and row and row[0] == BLOB and len(row) == 3:
                    out[name] = (row[1], row[2])
                elif type(row) is list and row and row[0] == LIST:
                    out.update(self._legacy_lists({name: (wanted[name][0], row)}))
                else:
                    raise _corrupt(*wanted[name][0], "?", DecodeError(f"a stored value is {row!r}"))
        return out

    def _legacy_lists(self, wanted: dict[Any, tuple[Context, list[Any]]]) -> dict[Any, Any]:
        """Lists of the earlier layout: their segments read in one batch."""
        refs = {}
        owners: dict[Pair, Any] = {}
        for name, (context, form) in wanted.items():
            try:
                refs[name] = tuple(legacy.parse_ref(ref) for ref in form[1])
            except (TypeError, ValueError, DecodeError) as exc:
                raise _corrupt(*context, "?", exc) from exc
            segments_ns = keys.segments(context[0], context[1])
            for ref in refs[name]:
                owners.setdefault((segments_ns, ref.key), name)
        order = list(owners)
        parsed: dict[Pair, Any] = {}
        for pair, row in zip(order, self.store.get_many(order), strict=True):
            if row is not None:
                try:
                    parsed[pair] = legacy.parse_segment(row)
                except DecodeError as exc:
                    raise _corrupt(*wanted[owners[pair]][0], "?", exc) from exc
        out = {}
        for name, (context, _) in wanted.items():
            segments_ns = keys.segments(context[0], context[1])
            by_key = {
                r.key: parsed[(segments_ns, r.key)]
                for r in refs[name]
                if (segments_ns, r.key) in parsed
            }
            if len(by_key) < len({r.key for r in refs[name]}):
                continue  # a segment is gone
            try:
                out[name] = ("msgpack", legacy.assemble(refs[name], by_key))
            except DecodeError as exc:
                raise _corrupt(*context, "?", exc) from exc
        return out


def head_of(decoded: entry.Decoded) -> Head | None:
    """The head of a decoded entry; None for the earlier layouts (nothing to share with)."""
    forms = decoded.forms
    if forms is None or any(form[0] in (LIST, APART) for form in forms.values()):
        return None
    run_id = decoded.metadata.get("run_id")
    # A copy: the decoded checkpoint is handed to LangGraph, whose runtime
    # updates its ``channel_versions`` in place as the next step runs, and a
    # head is what a child (or a ``__copy__`` fork) is built on later.
    versions = dict(decoded.checkpoint["channel_versions"])
    return Head(versions, forms, run_id if type(run_id) is str else None)


def scan(
    store: BaseStore, namespace: str, *, reverse: bool = False, page: int = 256
) -> Iterable[tuple[str, bytes]]:
    """Every ``(key, stored bytes)`` of a namespace in key order (or reversed), a page at a time."""
    bound: str | None = None
    while True:
        if reverse:
            rows = store.items(namespace, stop=bound, reverse=True, limit=page, raw=True)
        else:
            # ``start`` is inclusive: a page begins with the last key seen, dropped.
            rows = store.items(namespace, start=bound, limit=page + (bound is not None), raw=True)
            if bound is not None and rows and rows[0][0] == bound:
                rows = rows[1:]
        yield from rows
        if len(rows) < page:
            return
        bound = rows[-1][0]


def _name(context: Context, channel: str, version: Any, form: list[Any]) -> Any:
    """What a stored value is fetched and cached by; None for a value inline in the entry."""
    if type(form) is not list or not form:
        raise _corrupt(*context, channel, DecodeError(f"a stored value is {form!r}"))
    code = form[0]
    if code == BLOB:
        if len(form) != 3 or type(form[1]) is not str or type(form[2]) is not bytes:
            raise _corrupt(*context, channel, DecodeError(f"a stored value is {form!r}"))
        return None
    if code == CHUNKS:
        if len(form) != 4 or type(form[2]) is not str:
            raise _corrupt(*context, channel, DecodeError(f"a stored value is {form!r}"))
        return ("c", context[0], form[2])
    if code == APART:
        key = keys.value_key(channel, version)
        if key is None:
            raise _corrupt(*context, channel, DecodeError(f"version {version!r}"))
        return ("a", (keys.values(context[0], context[1]), key), channel)
    if code == LIST:
        return ("l", context[0], context[1], channel, version)
    raise _corrupt(*context, channel, DecodeError(f"unknown value form {code!r}"))


def _stored_part(part: sharing.Part) -> Any:
    return list(part) if type(part) is tuple else part


def _part(stored: Any) -> sharing.Part:
    if type(stored) is bytes:
        return stored
    if (
        type(stored) is list
        and len(stored) == 3
        and type(stored[0]) is str
        and type(stored[1]) is int
        and type(stored[2]) is int
    ):
        return (stored[0], stored[1], stored[2])
    raise DecodeError(f"a stored value names a part as {stored!r}")


def _parse_chunk(namespace: str, key: str, row: bytes) -> bytes:
    """The bytes a stored chunk holds (it may be compressed)."""
    try:
        value = loads(row)
    except DecodeError as exc:
        raise CorruptDataError(f"chunk {key!r} of {namespace!r} does not decode: {exc}") from exc
    if type(value) is bytes:
        return value
    raw = inflate_envelope(value)
    if raw is not None:
        return raw
    raise CorruptDataError(f"chunk {key!r} of {namespace!r} is malformed")


def _corrupt(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, channel: str, exc: BaseException
) -> CorruptDataError:
    return CorruptDataError(
        f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (checkpoint_ns "
        f"{checkpoint_ns!r}): the value of channel {channel!r} cannot be read "
        f"({type(exc).__name__}: {exc}); the stored data is damaged or incomplete"
    )

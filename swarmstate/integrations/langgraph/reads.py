"""Reading the checkpointer's rows back: groups of entries, decoded rows, tuples.

A checkpoint's pending writes are keyed right after it (:mod:`.keys`),
so a reverse scan of a thread namespace meets a checkpoint's writes just
before the checkpoint: :func:`fold` turns such a scan into *groups*,
``(checkpoint id, entry, write entries)``, carrying the writes at the end of
one page over to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any, NamedTuple

from langgraph.checkpoint.base import CheckpointTuple

from swarmstate._codec import loads
from swarmstate._errors import CorruptDataError
from swarmstate.integrations.langgraph import config
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.format.pack import unpack
from swarmstate.integrations.langgraph.revive import Reviver
from swarmstate.integrations.langgraph.values import CHUNKS, Values, head_of

__all__ = [
    "Found",
    "Pending",
    "Unread",
    "complete",
    "corrupt",
    "decode",
    "fold",
    "groups",
    "pending_writes",
    "resolve_writes",
]

_PAGE_MAX = 256
_new_tuple = tuple.__new__

Group = tuple[str, Any, list[Any]]
Pending = tuple[list[Any], "str | None"]
"""Write entries seen at the bottom of a page, and the key head they share."""


class Unread(NamedTuple):
    """A pending write stored as ranges of the thread's chunks, its bytes not read yet.

    :func:`pending_writes` leaves it in a write's value; :func:`complete`
    (or :func:`resolve_writes`) reads the bytes and revives the value.
    """

    form: list[Any]


class Found(NamedTuple):
    """A checkpoint read from the store, before its values are: what a tuple is built from."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    checkpoint: dict[str, Any]
    """The checkpoint; its ``channel_values`` are set by :func:`complete`."""
    metadata: dict[str, Any]
    parent_id: str | None
    writes: list[tuple[str, str, Any]]
    """Its pending writes, decoded."""
    forms: dict[str, list[Any]] | None
    """The stored forms of its values (None: an entry of the earlier layout holds them)."""


def fold(rows: list[tuple[str, Any]], pending: Pending) -> tuple[list[Group], Pending]:
    """The complete groups in a page of a reverse scan, and the writes left over.

    A write belongs to the checkpoint whose key shares its ``O(id)`` head;
    writes whose checkpoint does not exist are dropped.
    """
    out: list[Group] = []
    writes, writes_head = pending
    end = keys.ID_END
    for key, value in rows:
        if key[-1] == keys.CHECKPOINT:
            out.append(
                (keys.checkpoint_id_of(key), value, writes if writes_head == key[:-1] else [])
            )
            writes, writes_head = [], None
        else:
            head = key[: key.index(end) + 2]
            if head == writes_head:
                writes.append(value)
            else:
                writes, writes_head = [value], head
    return out, (writes, writes_head)


def groups(
    items: Callable[..., list[tuple[str, Any]]], namespace: str, stop: str | None, page: int
) -> Iterator[Group]:
    """Groups of a namespace newest first, a page of keys at a time (growing pages)."""
    page = max(1, page)
    pending: Pending = ([], None)
    while True:
        rows = items(namespace, stop=stop, reverse=True, limit=page, raw=True)
        found, pending = fold(rows, pending)
        yield from found
        if len(rows) < page:
            return
        stop = rows[-1][0]
        page = min(page * 4, _PAGE_MAX)


def pending_writes(
    serde: Any, reviver: Reviver, writes: list[Any], channels: Collection[str] | None = None
) -> list[tuple[str, str, Any]]:
    """Decode stored pending writes into LangGraph's ``(task id, channel, value)``, in order.

    The runtime's order: task path, then task id, then index. With
    ``channels``, only the writes to those channels (the others are not
    revived at all). A write stored as chunks (``[CHUNKS, type, id,
    parts]`` where the bytes are) gets an :class:`Unread` value, which
    :func:`resolve_writes` turns into the value.
    """
    decoded = []
    for stored in writes:
        try:
            write = loads(stored)
        except (ValueError, TypeError) as exc:
            raise CorruptDataError(f"a pending write does not decode ({exc})") from exc
        if (
            type(write) is not list
            or not 6 <= len(write) <= 7
            or type(write[0]) is not str
            or type(write[1]) is not int
            or type(write[2]) is not str
            or type(write[3]) is not str
            or type(write[4]) is not str
        ):
            raise CorruptDataError(
                "a pending write is not [task id, idx, path, channel, type, bytes(, size)]"
            )
        if channels is None or write[3] in channels:
            if type(write[5]) is list:  # its bytes are ranges of chunks
                form = write[5]
                if len(write) != 6 or len(form) != 4 or form[0] != CHUNKS or form[1] != write[4]:
                    raise CorruptDataError(
                        "a pending write stored as chunks is not [CHUNKS, type, id, parts]"
                    )
                write[5] = Unread(form)
            elif len(write) == 7:  # compressed (pack): the bytes and their size
                packed, size = write[5], write[6]
                raw = unpack(packed, size) if type(packed) is bytes and type(size) is int else None
                if raw is None:
                    raise CorruptDataError("a compressed pending write does not inflate")
                write[5] = raw
            decoded.append(write)
    decoded.sort(key=lambda w: (w[2], w[0], w[1]))
    revive = reviver.loads
    try:
        return [
            (w[0], w[3], w[5] if type(w[5]) is Unread else revive(serde, (w[4], w[5])))
            for w in decoded
        ]
    except Exception as exc:  # any failure to decode stored bytes means they are damaged
        raise CorruptDataError(
            f"a pending write's value does not decode ({type(exc).__name__}: {exc})"
        ) from exc


def corrupt(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, exc: Exception
) -> CorruptDataError:
    """``exc`` again, naming the checkpoint it is about."""
    return CorruptDataError(
        f"checkpoint {checkpoint_id!r} of thread {thread_id!r} (checkpoint_ns "
        f"{checkpoint_ns!r}) cannot be read: {exc}"
    )


def decode(
    serde: Any,
    values: Values,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    stored_entry: Any,
    writes: list[Any],
    filter: dict[str, Any] | None = None,
    *,
    remember: bool = True,
) -> Found | None:
    """Decode a stored checkpoint entry and its pending-write entries (stored bytes).

    With a ``filter``, the metadata is read first and None is returned
    when it does not match, so skipped checkpoints cost no checkpoint decode.
    Channel values stored beside the entry are read by :func:`complete`.
    ``remember``: keep its head for a put that builds on it (:mod:`.values`);
    a listing leaves it out (the runtime reads a checkpoint by its id before
    it builds on it, and that read keeps it).
    """
    try:
        if filter and not config.matches(entry.head(serde, stored_entry)[0], filter):
            return None
        decoded = entry.decode(serde, stored_entry)
        pending = pending_writes(serde, values.reviver, writes) if writes else []
    except CorruptDataError as exc:
        raise corrupt(thread_id, checkpoint_ns, checkpoint_id, exc) from exc
    if remember:
        head = head_of(decoded)
        if head is not None:
            values.remember(thread_id, checkpoint_ns, checkpoint_id, head)
    return Found(
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        decoded.checkpoint,
        decoded.metadata,
        decoded.parent_id,
        pending,
        decoded.forms,
    )


def complete(
    serde: Any, values: Values, batch: list[Found], *, offline: bool = False
) -> list[CheckpointTuple]:
    """Read the channel values of a batch of decoded rows, and build their tuples.

    ``offline``: raise :class:`~.steps.NeedsStore` where a value must be read
    from the store (none of its bytes cached).

    A checkpoint whose stored values went missing while it was read, because
    it was deleted meanwhile (retention in another process), is left out; one
    that still exists without them is damaged: :class:`CorruptDataError`.
    """
    shared = [i for i, row in enumerate(batch) if row.forms is not None]
    if shared:
        incomplete = values.fill(
            serde,
            [
                (
                    (batch[i].thread_id, batch[i].checkpoint_ns, batch[i].checkpoint_id),
                    batch[i].checkpoint,
                    batch[i].forms,  # type: ignore[misc]  # not None in ``shared``
                )
                for i in shared
            ],
            offline=offline,
        )
        if incomplete:
            gone = _deleted(values, [(batch[shared[i]], channel) for i, channel in incomplete])
            batch = [row for row in batch if (row[0], row[1], row[2]) not in gone]
    if any(type(w[2]) is Unread for row in batch for w in row.writes):
        lost = resolve_writes(serde, values, batch, offline=offline)
        if lost:
            gone = _deleted(values, lost)
            batch = [row for row in batch if (row[0], row[1], row[2]) not in gone]
    out: list[CheckpointTuple] = []
    for (
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        checkpoint,
        metadata,
        parent_id,
        writes,
        _,
    ) in batch:
        parent = (
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": parent_id,
                }
            }
            if parent_id
            else None
        )
        run_config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        # tuple.__new__ is what NamedTuple._make uses: it skips the keyword-handling __new__.
        out.append(_new_tuple(CheckpointTuple, (run_config, checkpoint, metadata, parent, writes)))
    return out


def resolve_writes(
    serde: Any, values: Values, batch: list[Found], *, offline: bool = False
) -> list[tuple[Found, str]]:
    """Read and revive the :class:`Unread` pending writes of ``batch``, in place.

    Their chunks are read at once. Returns ``(row, channel)`` for each write
    whose bytes are missing (its value is left :class:`Unread`): the caller
    tells a checkpoint deleted while it was read from damaged data.
    """
    places = [
        (row, index, write)
        for row in batch
        for index, write in enumerate(row.writes)
        if type(write[2]) is Unread
    ]
    pairs = values.write_values(
        [((row[0], row[1], row[2]), write[2].form) for row, _, write in places],
        offline=offline,
    )
    lost: list[tuple[Found, str]] = []
    for (row, index, write), pair in zip(places, pairs, strict=True):
        if pair is None:
            lost.append((row, write[1]))
            continue
        try:
            row.writes[index] = (write[0], write[1], values.reviver.loads(serde, pair))
        except Exception as exc:  # stored bytes that do not decode are damaged
            raise corrupt(
                row[0],
                row[1],
                row[2],
                CorruptDataError(
                    f"a pending write's value does not decode ({type(exc).__name__}: {exc})"
                ),
            ) from exc
    return lost


def _deleted(values: Values, rows: list[tuple[Found, str]]) -> set[tuple[str, str, str]]:
    """Which of ``rows`` (read without all their values) no longer exist; raise for the rest.

    Each row comes with the channel whose stored bytes were missing.
    """
    pairs = [(keys.scope(row[0], row[1]), keys.checkpoint_key(row[2])) for row, _ in rows]
    present = values.store.get_many(pairs, raw=True)
    for (row, channel), found in zip(rows, present, strict=True):
        if found is not None:
            raise CorruptDataError(
                f"checkpoint {row[2]!r} of thread {row[0]!r} (checkpoint_ns {row[1]!r}): "
                f"the value of channel {channel!r} cannot be read (a chunk of it is missing); "
                "the stored data is damaged or incomplete"
            )
    return {(row[0], row[1], row[2]) for row, _ in rows}


_PLAIN_TYPES = frozenset({"msgpack", "json", "null", "bytes", "bytearray"})
"""The type names LangGraph's own serializer writes and reads without a cipher."""


def foreign_types(stored_entry: Any, writes: list[Any]) -> set[str]:
    """Type names in a checkpoint's stored entry and writes that LangGraph's serializer
    does not read by itself (an encrypting serializer's ``msgpack+aes``, say)."""
    names: set[str] = set()
    try:
        if type(stored_entry) is bytes:
            stored_entry = entry.inflated(stored_entry)
        if type(stored_entry) is bytes and stored_entry[:1] in (b"\x96", b"\x97"):
            typed = loads(stored_entry)
            names.update(t for t in (typed[0], typed[2]) if type(t) is str)
            forms = typed[6] if len(typed) == 7 and type(typed[6]) is dict else {}
            names.update(f[1] for f in forms.values() if type(f) is list and len(f) > 1)
        for stored in writes:
            write = loads(stored)
            if type(write) is list and len(write) >= 5 and type(write[4]) is str:
                names.add(write[4])
    except (ValueError, TypeError, IndexError, CorruptDataError):
        return set()
    return {name for name in names if type(name) is str and name not in _PLAIN_TYPES}

"""How the LangGraph checkpointer turns one checkpoint into one store value.

Four layouts, all msgpack arrays, told apart by their first byte. The two
written today hold the checkpoint *without* its channel values, and the
stored form of each value beside it (:mod:`.values`):

* ``0x95``, five elements, the usual one: ``[metadata, parent id, run id,
  checkpoint, forms]`` as one document of the saver's serializer, when
  that serializer writes plain msgpack (LangGraph's ``JsonPlusSerializer``
  does). Its bytes are stored as they are (``raw`` store writes and reads).
* ``0x97``, seven elements, for serializers of another format (encryption,
  pickle, ...): ``[checkpoint type, checkpoint bytes, metadata type,
  metadata bytes, parent id, run id, forms]`` in the store's own codec.

``forms`` maps a channel to the stored form of its value at the
checkpoint's version (:mod:`.values`): a small value itself, or where its
bytes are stored. Copied from the parent's entry, never re-read from the
live value, while they do not change.

Two earlier layouts held the whole checkpoint, channel values included; they
are still read (and a thread written in them can be extended):

* ``0x94``: ``[metadata, parent id, run id, checkpoint]``, one serializer document;
* ``0x96``: ``[checkpoint type, checkpoint bytes, metadata type, metadata
  bytes, parent id, run id]``.

Metadata comes first, so a metadata filter or a run-id lookup reads the
head of the value (:func:`head`) without decoding the checkpoint.

A saver that compresses (its ``compress`` option, on by default over
PostgreSQL) stores an entry of either layout written today as ``0x93``,
``[1, packed, size]``: the entry's bytes deflated (:func:`compressed`), when
that saves an eighth. Every reader inflates it first (:func:`inflated`), so
an entry reads the same whichever way it was stored.

Every decoded entry is checked for shape before it is returned: bytes that
are not one of these layouts raise :class:`~swarmstate.CorruptDataError`,
never a builtin error or a value of the wrong type.

This module has no LangGraph import; the serializer is passed in.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgpack

from swarmstate._codec import dumps, loads
from swarmstate._errors import CorruptDataError, SwarmStateError
from swarmstate.integrations.langgraph.format.pack import inflate_envelope, pack_envelope

__all__ = ["Decoded", "compressed", "decode", "encode", "head", "inflated", "with_metadata"]

_SERDE_WHOLE: int = 0x94  # fixarray of 4: the serializer's document, values inside
_SERDE: int = 0x95  # fixarray of 5: the serializer's document, values beside
_TYPED_WHOLE: int = 0x96  # fixarray of 6: typed pairs, values inside
_TYPED: int = 0x97  # fixarray of 7: typed pairs, values beside
_PACKED: int = 0x93  # fixarray of 3: [1, another layout deflated, its size] (pack_envelope)
_PAGE = 4096


class Decoded(NamedTuple):
    """A stored checkpoint entry, decoded and checked."""

    metadata: dict[str, Any]
    parent_id: str | None
    checkpoint: dict[str, Any]
    forms: dict[str, list[Any]] | None
    """The stored forms of the channel values; None when the entry holds every value."""


class _NeedsSerializer(Exception):
    """The head holds an extension type only the serializer can revive."""


def _refuse_ext(code: int, data: bytes) -> Any:
    raise _NeedsSerializer


def encode(
    serde: Any,
    checkpoint: Any,
    metadata: Any,
    parent_id: str | None,
    run_id: str | None,
    forms: dict[str, list[Any]],
    *,
    typed: bool = False,
) -> bytes | None:
    """The stored bytes of one checkpoint (without its values), its metadata and value forms.

    The serializer's own document (``0x95``); None when ``serde`` did not
    write plain msgpack for it: then call again with ``typed=True`` for the
    seven-element layout of typed pairs (``0x97``), which always succeeds.
    """
    if typed:
        pairs = [*serde.dumps_typed(checkpoint), *serde.dumps_typed(metadata)]
        return dumps([*pairs, parent_id, run_id, forms])
    kind, data = serde.dumps_typed([metadata, parent_id, run_id, checkpoint, forms])
    if kind == "msgpack" and data and data[0] == _SERDE:
        return data if type(data) is bytes else bytes(data)
    return None


def compressed(data: bytes) -> bytes:
    """The stored bytes of an encoded entry: deflated (``0x93``) when that saves an eighth."""
    return pack_envelope(data) or data


def inflated(data: bytes) -> bytes:
    """The entry ``data`` holds in one of the other layouts: itself, or inflated from ``0x93``.

    Raises:
        CorruptDataError: ``data`` starts as a compressed entry and does not
            inflate to exactly the size it names, or to another layout.
    """
    if not data or data[0] != _PACKED:
        return data
    with _reading(data):
        raw = inflate_envelope(loads(data))
        if raw is not None and raw[0] != _PACKED:
            return raw
    raise CorruptDataError(f"{len(data)} stored bytes: not a compressed entry that inflates")


def decode(serde: Any, data: bytes) -> Decoded:
    """The checked contents of stored bytes; :class:`CorruptDataError` if they are not."""
    data = inflated(data)
    with _reading(data):
        first = data[0]
        if first in (_SERDE_WHOLE, _SERDE):
            entry = serde.loads_typed(("msgpack", data))
            if type(entry) is not list or len(entry) != first - 0x90:
                raise CorruptDataError("not the saver's array")
            metadata, parent_id, _, checkpoint = entry[:4]
            forms = entry[4] if first == _SERDE else None
        else:
            entry = _typed(data)
            metadata = _metadata(serde, entry)
            parent_id = entry[4]
            checkpoint = serde.loads_typed((entry[0], entry[1]))
            forms = entry[6] if first == _TYPED else None
    _check_shape(metadata, parent_id, checkpoint, forms)
    return Decoded(metadata, parent_id, checkpoint, forms)


@contextlib.contextmanager
def _reading(data: bytes) -> Iterator[None]:
    """Turn any failure to decode stored bytes into :class:`CorruptDataError`."""
    try:
        yield
    except SwarmStateError as exc:
        raise CorruptDataError(f"{len(data)} stored bytes: {exc}") from exc
    except Exception as exc:  # any failure to decode stored bytes means they are damaged
        raise CorruptDataError(
            f"{len(data)} stored bytes do not decode ({type(exc).__name__}: {exc})"
        ) from exc


def _check_shape(metadata: Any, parent_id: Any, checkpoint: Any, forms: Any) -> None:
    if type(metadata) is not dict:
        raise CorruptDataError(f"its metadata is a {type(metadata).__name__}, not a dict")
    if parent_id is not None and type(parent_id) is not str:
        raise CorruptDataError(f"its parent id is a {type(parent_id).__name__}, not a str")
    if type(checkpoint) is not dict:
        raise CorruptDataError(f"the checkpoint is a {type(checkpoint).__name__}, not a dict")
    if type(checkpoint.get("channel_versions")) is not dict:
        raise CorruptDataError("the checkpoint has no channel_versions dict")
    if forms is None:
        if type(checkpoint.get("channel_values")) is not dict:
            raise CorruptDataError("the checkpoint has no channel_values dict")
        return
    if type(forms) is not dict or not all(
        type(form) is list and form and type(form[0]) is int for form in forms.values()
    ):
        raise CorruptDataError("its value forms are not a dict of stored forms")


def head(serde: Any, data: bytes) -> tuple[Any, str | None, str | None]:
    """``(metadata, parent id, run id)`` of stored bytes, leaving the checkpoint undecoded."""
    data = inflated(data)
    with _reading(data):
        if data[0] in (_SERDE_WHOLE, _SERDE):
            return _serde_head(serde, data)
        entry = _typed(data)
        return _metadata(serde, entry), entry[4], entry[5]


def _serde_head(serde: Any, data: bytes) -> tuple[Any, str | None, str | None]:
    # Streamed a page at a time: a large checkpoint is neither copied nor read
    # past its head (and no buffer limit applies to it).
    unpacker = msgpack.Unpacker(
        io.BytesIO(data),
        read_size=_PAGE,
        max_buffer_size=max(len(data), _PAGE),
        raw=False,
        strict_map_key=False,
        ext_hook=_refuse_ext,
    )
    unpacker.read_array_header()
    try:
        metadata, parent_id, run_id = unpacker.unpack(), unpacker.unpack(), unpacker.unpack()
    except _NeedsSerializer:  # e.g. a datetime in the metadata
        metadata, parent_id, run_id = serde.loads_typed(("msgpack", data))[:3]
    if type(metadata) is not dict:
        raise CorruptDataError(f"its metadata is a {type(metadata).__name__}, not a dict")
    return metadata, parent_id, run_id


def with_metadata(serde: Any, data: bytes, metadata: dict[str, Any]) -> bytes:
    """Stored bytes of the same checkpoint under other metadata, in the same layout.

    Only the metadata is encoded again; the rest keeps its bytes. The
    checkpoint (in the two earlier layouts, with its channel values) is
    never decoded, so nothing in it is rewritten: not even a value the
    serializer would not revive. When ``serde`` writes the metadata in a
    format other than msgpack, a serializer document becomes typed pairs,
    its checkpoint the msgpack it was. A compressed entry comes back compressed.
    """
    if data and data[0] == _PACKED:
        return compressed(with_metadata(serde, inflated(data), metadata))
    with _reading(data):
        first = data[0]
        if first in (_SERDE_WHOLE, _SERDE):
            kind, packed = serde.dumps_typed(metadata)
            ends = _element_ends(data)
            if kind == "msgpack":
                return data[:1] + bytes(packed) + data[ends[0] :]
            parent_id = loads(data[ends[0] : ends[1]])
            run_id = loads(data[ends[1] : ends[2]])
            checkpoint = data[ends[2] : ends[3]]
            forms = [loads(data[ends[3] : ends[4]])] if first == _SERDE else []
            return dumps(["msgpack", checkpoint, kind, bytes(packed), parent_id, run_id, *forms])
        entry = _typed(data)
        kind, packed = serde.dumps_typed(metadata)
        entry[2:4] = [kind, bytes(packed)]
        return dumps(entry)


def _element_ends(data: bytes) -> list[int]:
    """Where each element of the msgpack array ``data`` ends, without decoding any."""
    unpacker = msgpack.Unpacker(
        io.BytesIO(data), read_size=_PAGE, max_buffer_size=max(len(data), _PAGE)
    )
    ends = []
    for _ in range(unpacker.read_array_header()):
        unpacker.skip()
        ends.append(unpacker.tell())
    return ends


def _metadata(serde: Any, entry: list[Any]) -> Any:
    # swarmstate 0.1.0 before the typed layout stored plain metadata as it is,
    # with None for its type: still read as written.
    return entry[3] if entry[2] is None else serde.loads_typed((entry[2], entry[3]))


def _typed(data: bytes) -> list[Any]:
    first = data[0]
    if first not in (_TYPED_WHOLE, _TYPED):
        raise CorruptDataError(
            f"first byte {first:#x} starts none of the saver's layouts; "
            "was it written by SwarmStateSaver?"
        )
    entry = loads(data)
    if type(entry) is not list or len(entry) != first - 0x90:
        raise CorruptDataError("not the saver's typed array")
    return entry

"""How the LangGraph checkpointer turns one checkpoint into one store value.

Two layouts, both msgpack arrays, told apart by their first byte:

* ``0x94``, four elements, the usual one: ``[metadata, parent id, run id,
  checkpoint]`` as one document of the saver's serializer, when that
  serializer writes plain msgpack (LangGraph's ``JsonPlusSerializer``
  does). Its bytes are the stored value as they are (``raw`` store writes
  and reads): a put encodes the checkpoint once and copies it no more, and
  a read hands the stored bytes straight to the serializer.
* ``0x96``, six elements, for serializers of another format (encryption,
  pickle, ...): ``[checkpoint type, checkpoint bytes, metadata type,
  metadata bytes, parent id, run id]`` in the store's own codec.

Metadata comes first, so a metadata filter or a run-id lookup reads the
head of the value (:func:`head`) without decoding the checkpoint.

This module has no LangGraph import; the serializer is passed in.
"""

from __future__ import annotations

import io
from typing import Any

import msgpack

from swarmstate._codec import dumps, loads
from swarmstate._errors import DecodeError

__all__ = ["decode", "encode", "encode_typed", "head"]

_SERDE: int = 0x94  # fixarray of 4: the serializer's own document
_TYPED: int = 0x96  # fixarray of 6: typed pairs in the store's codec
_PAGE = 4096


class _NeedsSerializer(Exception):
    """The head holds an extension type only the serializer can revive."""


def _refuse_ext(code: int, data: bytes) -> Any:
    raise _NeedsSerializer


def encode(
    serde: Any, checkpoint: Any, metadata: Any, parent_id: str | None, run_id: str | None
) -> bytes | None:
    """The stored bytes of one checkpoint with its metadata, parent and run id.

    None when ``serde`` did not write plain msgpack for the whole entry: then
    :func:`encode_typed` is the layout to use.
    """
    kind, data = serde.dumps_typed([metadata, parent_id, run_id, checkpoint])
    if kind == "msgpack" and data[:1] == b"\x94":
        return bytes(data)
    return None


def encode_typed(
    serde: Any, checkpoint: Any, metadata: Any, parent_id: str | None, run_id: str | None
) -> bytes:
    """The six-element layout: the checkpoint and the metadata as typed pairs."""
    return dumps([*serde.dumps_typed(checkpoint), *serde.dumps_typed(metadata), parent_id, run_id])


def decode(serde: Any, data: bytes) -> tuple[Any, str | None, Any]:
    """``(metadata, parent id, checkpoint)`` of stored bytes."""
    if data[0] == _SERDE:
        metadata, parent_id, _, checkpoint = serde.loads_typed(("msgpack", data))
        return metadata, parent_id, checkpoint
    entry = _typed(data)
    return _metadata(serde, entry), entry[4], serde.loads_typed((entry[0], entry[1]))


def head(serde: Any, data: bytes) -> tuple[Any, str | None, str | None]:
    """``(metadata, parent id, run id)`` of stored bytes, leaving the checkpoint undecoded."""
    if data[0] == _SERDE:
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
            return unpacker.unpack(), unpacker.unpack(), unpacker.unpack()
        except _NeedsSerializer:  # e.g. a datetime in the metadata
            metadata, parent_id, run_id, _ = serde.loads_typed(("msgpack", data))
            return metadata, parent_id, run_id
    entry = _typed(data)
    return _metadata(serde, entry), entry[4], entry[5]


def _metadata(serde: Any, entry: list[Any]) -> Any:
    # swarmstate 0.1.0 before this layout stored plain metadata as it is,
    # with None for its type: still read as written.
    return entry[3] if entry[2] is None else serde.loads_typed((entry[2], entry[3]))


def _typed(data: bytes) -> list[Any]:
    entry = loads(data)
    if data[0] != _TYPED or type(entry) is not list or len(entry) != 6:
        raise DecodeError(
            f"a checkpoint entry of {len(data)} bytes has neither known layout "
            f"(first byte {data[0]:#x}); was it written by SwarmStateSaver?"
        )
    return entry

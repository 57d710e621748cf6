"""The stable value codec: plain msgpack, readable by any msgpack library.

Values are None, bool, int (-2**63 .. 2**64-1), float, str, bytes, list,
tuple (decoded as list), dict with str keys, nested. bytearray and memoryview
are stored as bytes. msgpack extension values, which other writers (such as
LangGraph's serializer, through ``raw`` writes) put in stored bytes, decode
to :class:`Ext` and encode back unchanged. Everything else is refused
with an error that names the offending type and where it sits in the value.

Encoding runs ormsgpack with every "helpful" conversion switched off
(datetime, dataclass, enum, UUID, subclasses), so its fast path accepts only
the types above; when it refuses, a slow walk finds the culprit for the
error message. The happy path never walks the value in Python.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import ormsgpack

from swarmstate._errors import (
    DecodeError,
    InvalidArgumentError,
    UnsupportedTypeError,
    ValueOutOfRangeError,
)

__all__ = ["PACK_OPTIONS", "Ext", "dumps", "encode", "ext_default", "loads", "packb", "refusal"]


class Ext(NamedTuple):
    """A msgpack extension value: an application type ``code`` and its bytes.

    swarmstate never makes these itself; they appear when stored bytes came
    from another msgpack writer (LangGraph's serializer keeps its objects this
    way), and :func:`dumps` writes them back unchanged. Codes 0 to 127 (the
    application range) can be written; others, such as msgpack's own
    timestamp (-1), decode but are refused by :func:`dumps`.
    """

    code: int
    data: bytes


def ext_default(obj: Any) -> Any:
    """ormsgpack's hook for the types it does not pack itself: only :class:`Ext`."""
    if type(obj) is Ext and _writable_ext(obj):
        return ormsgpack.Ext(obj.code, obj.data)
    raise TypeError(f"Type is not msgpack serializable: {type(obj).__name__}")


def _writable_ext(ext: Ext) -> bool:
    return type(ext.code) is int and 0 <= ext.code <= 127 and type(ext.data) is bytes


def _ext_hook(code: int, data: bytes) -> Ext:
    return Ext(code, data)


PACK_OPTIONS: Final = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_SCALARS = (type(None), bool, float, str, bytes, bytearray, memoryview, Ext)
packb: Final = ormsgpack.packb
"""With ``default=ext_default, option=PACK_OPTIONS``, what :func:`dumps` runs; a
hot path may call it inline and raise :func:`refusal` on ``TypeError``."""
_unpackb = ormsgpack.unpackb


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` as msgpack bytes.

    Raises:
        UnsupportedTypeError: ``obj`` holds a type outside the codec's rules.
        ValueOutOfRangeError: an int does not fit 64 bits, or nesting is too deep.
    """
    try:
        return packb(obj, default=ext_default, option=PACK_OPTIONS)
    except TypeError as exc:
        raise refusal(obj, exc) from None


def encode(value: Any, raw: bool) -> bytes:
    """The bytes a store keeps for ``value``: :func:`dumps` of it, or itself when ``raw``.

    Raises:
        InvalidArgumentError: ``raw`` and ``value`` is not bytes.
    """
    if not raw:
        return dumps(value)
    if type(value) is not bytes:
        raise InvalidArgumentError(
            f"with raw=True every value must be msgpack bytes, got {type(value).__name__}; "
            "pass raw=False to have the store encode it"
        )
    return value


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Decode msgpack bytes produced by :func:`dumps` (or any msgpack writer).

    Raises:
        DecodeError: ``data`` is not complete, valid msgpack.
    """
    try:
        return _unpackb(data, ext_hook=_ext_hook)
    except (ValueError, TypeError) as exc:
        raise DecodeError(f"cannot decode {len(data)} bytes as msgpack: {exc}") from None


def refusal(obj: Any, exc: Exception) -> Exception:
    """Find why ``obj`` cannot be encoded and build the error that says so."""
    stack: list[tuple[Any, str, int]] = [(obj, "value", 0)]
    while stack:
        item, path, depth = stack.pop()
        kind = type(item)
        if kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return ValueOutOfRangeError(
                    f"{path} = {item} does not fit msgpack's 64-bit integer range "
                    f"[{_INT_MIN}, {_INT_MAX}]; store it as a str instead"
                )
        elif kind in (list, tuple):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
        elif kind is dict:
            for k, v in item.items():
                if type(k) is not str:
                    return UnsupportedTypeError(
                        f"{path} has a key of type {type(k).__name__} ({k!r}); "
                        "dict keys must be str"
                    )
                stack.append((v, f"{path}[{k!r}]", depth + 1))
        elif kind is Ext and not _writable_ext(item):
            return UnsupportedTypeError(
                f"{path} is an extension value with code {item.code!r} and "
                f"{type(item.data).__name__} data; swarmstate writes extension codes "
                "0 to 127 with bytes data"
            )
        elif kind not in _SCALARS:
            return UnsupportedTypeError(
                f"{path} is of type {kind.__module__}.{kind.__qualname__}, which "
                "swarmstate does not store; use None, bool, int, float, str, bytes, "
                "list, tuple or dict with str keys (convert it first, e.g. to a dict "
                "or str)"
            )
    if "ecursion" in str(exc):
        return ValueOutOfRangeError(f"value is nested too deeply to encode: {exc}")
    return UnsupportedTypeError(f"value cannot be encoded: {exc}")

"""The stable value codec: plain msgpack, readable by any msgpack library.

Values are None, bool, int (-2**63 .. 2**64-1), float, str, bytes, list,
tuple (decoded as list), dict with str keys, nested. bytearray and memoryview
are stored as bytes. Everything else is refused with an error that names the
offending type and where it sits in the value.

Encoding runs ormsgpack with every "helpful" conversion switched off
(datetime, dataclass, enum, UUID, subclasses), so its fast path accepts only
the types above; when it refuses, a slow walk finds the culprit for the
error message. The happy path never walks the value in Python.
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from swarmstate._errors import DecodeError, UnsupportedTypeError, ValueOutOfRangeError

__all__ = ["dumps", "loads"]

_PACK_OPTIONS = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_SCALARS = (type(None), bool, float, str, bytes, bytearray, memoryview)
_packb = ormsgpack.packb
_unpackb = ormsgpack.unpackb


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` as msgpack bytes.

    Raises:
        UnsupportedTypeError: ``obj`` holds a type outside the codec's rules.
        ValueOutOfRangeError: an int does not fit 64 bits, or nesting is too deep.
    """
    try:
        return _packb(obj, option=_PACK_OPTIONS)
    except TypeError as exc:
        raise _explain(obj, exc) from None


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Decode msgpack bytes produced by :func:`dumps` (or any msgpack writer).

    Raises:
        DecodeError: ``data`` is not complete, valid msgpack.
    """
    try:
        return _unpackb(data)
    except (ValueError, TypeError) as exc:
        raise DecodeError(f"cannot decode {len(data)} bytes as msgpack: {exc}") from None


def _explain(obj: Any, exc: Exception) -> Exception:
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

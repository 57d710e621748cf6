"""The codec: standard msgpack bytes, strict types, errors that say where."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

import swarmstate as ss

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(VALUES)
def test_round_trip(value: Any) -> None:
    assert ss.loads(ss.dumps(value)) == value


@given(VALUES)
def test_reference_msgpack_reads_our_bytes(value: Any) -> None:
    assert msgpack.unpackb(ss.dumps(value), raw=False) == value


@given(VALUES)
def test_we_read_reference_msgpack_bytes(value: Any) -> None:
    assert ss.loads(msgpack.packb(value, use_bin_type=True)) == value


def test_tuples_decode_as_lists() -> None:
    assert ss.loads(ss.dumps((1, (2, "x")))) == [1, [2, "x"]]


def test_bytes_like_decode_as_bytes() -> None:
    assert ss.loads(ss.dumps(bytearray(b"ab"))) == b"ab"
    assert ss.loads(ss.dumps(memoryview(b"cd"))) == b"cd"


def test_int_range_edges() -> None:
    for edge in (-(2**63), 2**64 - 1):
        assert ss.loads(ss.dumps(edge)) == edge


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_out_of_range_int_raises_value_error_with_path(big: int) -> None:
    with pytest.raises(ss.ValueOutOfRangeError, match=r"value\['n'\]\[1\]") as info:
        ss.dumps({"n": [0, big]})
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ss.SwarmStateError)


class Color(enum.Enum):
    RED = 1


class MyStr(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("bad", "type_name"),
    [
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (object(), "object"),
        (datetime.datetime(2026, 1, 1), "datetime"),
        (uuid.UUID(int=1), "UUID"),
        (Color.RED, "Color"),
        (MyStr("x"), "MyStr"),
        (Point(1), "Point"),
        (1 + 2j, "complex"),
    ],
)
def test_unsupported_types_raise_type_error_naming_type_and_path(bad: Any, type_name: str) -> None:
    with pytest.raises(ss.UnsupportedTypeError, match=type_name) as info:
        ss.dumps({"outer": [1, {"inner": bad}]})
    assert "value['outer'][1]['inner']" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_top_level_unsupported_value_names_value() -> None:
    with pytest.raises(ss.UnsupportedTypeError, match=r"^value is of type builtins.set"):
        ss.dumps({1})


def test_non_str_dict_key_is_refused() -> None:
    with pytest.raises(ss.UnsupportedTypeError, match=r"value\['a'\] has a key of type int"):
        ss.dumps({"a": {1: "x"}})


def test_garbage_bytes_raise_decode_error() -> None:
    with pytest.raises(ss.DecodeError) as info:
        ss.loads(b"\xc1")
    assert isinstance(info.value, ValueError)
    with pytest.raises(ss.DecodeError):
        ss.loads(ss.dumps([1, 2, 3])[:-1])


def test_extension_values_from_other_writers_round_trip_unchanged() -> None:
    # Another writer's bytes (LangGraph's serializer stores its objects as
    # msgpack extensions) decode without that writer and encode back the same.
    other = msgpack.packb({"m": msgpack.ExtType(5, b"\x93\x01\x02\x03"), "n": [1]})
    value = ss.loads(other)
    assert value["n"] == [1]
    assert value["m"] == ss.Ext(5, b"\x93\x01\x02\x03")
    assert ss.dumps(value) == other
    assert ss.loads(ss.dumps([ss.Ext(127, b"")])) == [ss.Ext(127, b"")]
    timestamp = b"\xd6\xff" + b"\x00" * 4  # fixext 4 of type -1: msgpack's timestamp
    assert ss.loads(timestamp) == ss.Ext(-1, b"\x00" * 4)  # read, but not written back
    for bad in (ss.Ext(-1, b""), ss.Ext(128, b""), ss.Ext(1, bytearray(b"x"))):
        with pytest.raises(ss.UnsupportedTypeError, match=r"value\['e'\] is an extension"):
            ss.dumps({"e": bad})

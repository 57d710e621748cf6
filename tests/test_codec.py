"""The codec: standard msgpack bytes, strict types, errors that say where."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Any

import msgpack
import pytest
from hypothesis import given, strategies

import swarmstate

VALUES = strategies.recursive(
    strategies.none()
    | strategies.booleans()
    | strategies.integers(min_value=-(2**63), max_value=2**64 - 1)
    | strategies.floats(allow_nan=False)
    | strategies.text()
    | strategies.binary(),
    lambda inner: (
        strategies.lists(inner, max_size=4)
        | strategies.dictionaries(strategies.text(), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(VALUES)
def test_round_trip(value: Any) -> None:
    assert swarmstate.loads(swarmstate.dumps(value)) == value


@given(VALUES)
def test_reference_msgpack_reads_our_bytes(value: Any) -> None:
    assert msgpack.unpackb(swarmstate.dumps(value), raw=False) == value


@given(VALUES)
def test_we_read_reference_msgpack_bytes(value: Any) -> None:
    assert swarmstate.loads(msgpack.packb(value, use_bin_type=True)) == value


def test_tuples_decode_as_lists() -> None:
    assert swarmstate.loads(swarmstate.dumps((1, (2, "x")))) == [1, [2, "x"]]


def test_bytes_like_decode_as_bytes() -> None:
    assert swarmstate.loads(swarmstate.dumps(bytearray(b"ab"))) == b"ab"
    assert swarmstate.loads(swarmstate.dumps(memoryview(b"cd"))) == b"cd"


def test_int_range_edges() -> None:
    for edge in (-(2**63), 2**64 - 1):
        assert swarmstate.loads(swarmstate.dumps(edge)) == edge


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_out_of_range_int_raises_value_error_with_path(big: int) -> None:
    with pytest.raises(swarmstate.ValueOutOfRangeError, match=r"value\['n'\]\[1\]") as info:
        swarmstate.dumps({"n": [0, big]})
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, swarmstate.SwarmStateError)


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
    with pytest.raises(swarmstate.UnsupportedTypeError, match=type_name) as info:
        swarmstate.dumps({"outer": [1, {"inner": bad}]})
    assert "value['outer'][1]['inner']" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_top_level_unsupported_value_names_value() -> None:
    with pytest.raises(swarmstate.UnsupportedTypeError, match=r"^value is of type builtins.set"):
        swarmstate.dumps({1})


def test_non_str_dict_key_is_refused() -> None:
    with pytest.raises(
        swarmstate.UnsupportedTypeError, match=r"value\['a'\] has a key of type int"
    ):
        swarmstate.dumps({"a": {1: "x"}})


def test_garbage_bytes_raise_decode_error() -> None:
    with pytest.raises(swarmstate.DecodeError) as info:
        swarmstate.loads(b"\xc1")
    assert isinstance(info.value, ValueError)
    with pytest.raises(swarmstate.DecodeError):
        swarmstate.loads(swarmstate.dumps([1, 2, 3])[:-1])


def test_extension_values_from_other_writers_round_trip_unchanged() -> None:
    # Another writer's bytes (LangGraph's serializer stores its objects as
    # msgpack extensions) decode without that writer and encode back the same.
    other = msgpack.packb({"m": msgpack.ExtType(5, b"\x93\x01\x02\x03"), "n": [1]})
    value = swarmstate.loads(other)
    assert value["n"] == [1]
    assert value["m"] == swarmstate.Ext(5, b"\x93\x01\x02\x03")
    assert swarmstate.dumps(value) == other
    assert swarmstate.loads(swarmstate.dumps([swarmstate.Ext(127, b"")])) == [
        swarmstate.Ext(127, b"")
    ]
    timestamp = b"\xd6\xff" + b"\x00" * 4  # fixext 4 of type -1: msgpack's timestamp
    assert swarmstate.loads(timestamp) == swarmstate.Ext(
        -1, b"\x00" * 4
    )  # read, but not written back
    for bad in (
        swarmstate.Ext(-1, b""),
        swarmstate.Ext(128, b""),
        swarmstate.Ext(1, bytearray(b"x")),
    ):
        with pytest.raises(swarmstate.UnsupportedTypeError, match=r"value\['e'\] is an extension"):
            swarmstate.dumps({"e": bad})

"""The contract's argument checks: the same bad input gets the same answer on every backend.

Each case runs on every backend and must raise the documented exception
class with a message that names the offending value; the message must also
be exactly the in-memory store's (one validation layer, not three copies),
and nothing stored may change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import swarmstate

Call = Callable[[swarmstate.BaseStore], Any]

SURROGATE = "\udc80"


def _raises(store: swarmstate.BaseStore, call: Call, error: type[Exception], shown: str) -> None:
    """``call(store)`` raises ``error`` naming ``shown``, exactly as the in-memory store does."""
    with pytest.raises(error) as got:
        call(store)
    assert type(got.value) is error
    assert shown in str(got.value)
    reference = swarmstate.Store()
    reference.set("ns", "k", "kept")
    with pytest.raises(error) as expected:
        call(reference)
    assert str(got.value) == str(expected.value)


RANGE_CASES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"start": SURROGATE}, swarmstate.InvalidKeyError, repr(SURROGATE)),
    ({"stop": "\ud800"}, swarmstate.InvalidKeyError, repr("\ud800")),
    ({"start": 3}, swarmstate.InvalidKeyError, "3"),
    ({"stop": b"k"}, swarmstate.InvalidKeyError, "b'k'"),
    ({"reverse": "no"}, swarmstate.InvalidArgumentError, "'no'"),
    ({"reverse": 1}, swarmstate.InvalidArgumentError, "1"),
    ({"reverse": None}, swarmstate.InvalidArgumentError, "None"),
    ({"limit": 2**63}, swarmstate.InvalidArgumentError, str(2**63)),
    ({"limit": -1}, swarmstate.InvalidArgumentError, "-1"),
    ({"limit": 1.5}, swarmstate.InvalidArgumentError, "1.5"),
    ({"limit": True}, swarmstate.InvalidArgumentError, "True"),
    ({"limit": "3"}, swarmstate.InvalidArgumentError, "'3'"),
    # The first bad argument wins: namespace, start, stop, reverse, limit.
    ({"start": 3, "reverse": "no"}, swarmstate.InvalidKeyError, "3"),
    ({"reverse": "no", "limit": -1}, swarmstate.InvalidArgumentError, "'no'"),
]


@pytest.mark.parametrize(("kwargs", "error", "shown"), RANGE_CASES, ids=repr)
@pytest.mark.parametrize("method", ["keys", "items"])
def test_range_arguments_are_refused_alike(
    store: swarmstate.BaseStore,
    method: str,
    kwargs: dict[str, Any],
    error: type[Exception],
    shown: str,
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, lambda s: getattr(s, method)("ns", **kwargs), error, shown)


@pytest.mark.parametrize("namespace", [1, None, b"ns", SURROGATE])
@pytest.mark.parametrize("method", ["keys", "items", "count"])
def test_a_bad_namespace_of_a_read_is_refused_alike(
    store: swarmstate.BaseStore, method: str, namespace: Any
) -> None:
    _raises(
        store, lambda s: getattr(s, method)(namespace), swarmstate.InvalidKeyError, repr(namespace)
    )


def test_the_largest_limit_is_accepted_and_means_all(store: swarmstate.BaseStore) -> None:
    store.set_many([("ns", "a", 1), ("ns", "b", 2)])
    assert store.keys("ns", limit=2**63 - 1) == ["a", "b"]
    assert store.items("ns", reverse=True, limit=2**63 - 1) == [("b", 2), ("a", 1)]


def test_items_raw_must_be_a_bool(store: swarmstate.BaseStore) -> None:
    _raises(store, lambda s: s.items("ns", raw="yes"), swarmstate.InvalidArgumentError, "'yes'")
    _raises(store, lambda s: s.get_many([("ns", "a")], raw=1), swarmstate.InvalidArgumentError, "1")


BATCH_CASES: list[tuple[Call, type[Exception], str]] = [
    # Entry by entry: shape, namespace, key, value; the first bad entry wins.
    (
        lambda s: s.set_many([("a", "k", object()), (1, "k", 2)]),
        swarmstate.UnsupportedTypeError,
        "object",
    ),
    (
        lambda s: s.set_many([(1, "k", 2), ("a", "k", object())]),
        swarmstate.InvalidKeyError,
        "int: 1",
    ),
    (lambda s: s.set_many([("a", 2.5, {1}), ("a", "k")]), swarmstate.InvalidKeyError, "2.5"),
    (
        lambda s: s.set_many([("a", "k", 1), ("a", "k")]),
        swarmstate.InvalidArgumentError,
        "('a', 'k')",
    ),
    (lambda s: s.set_many(["abc"]), swarmstate.InvalidArgumentError, "'abc'"),
    (lambda s: s.set_many([("a", SURROGATE, 1)]), swarmstate.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.set_many([(SURROGATE, "k", 1)]), swarmstate.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.set_many([("a", "k", 2**64)]), swarmstate.ValueOutOfRangeError, str(2**64)),
    # ensure entries are checked before the items.
    (
        lambda s: s.set_many([(1, "k", 2)], ensure=[("a", "k", object())]),
        swarmstate.UnsupportedTypeError,
        "object",
    ),
    (
        lambda s: s.set_many([("a", "k", object())], ensure=[("i", 7, 1)]),
        swarmstate.InvalidKeyError,
        "7",
    ),
    (
        lambda s: s.set_many([("a", "k", {"x": 1}), (2, "k", b"")], raw=True),
        swarmstate.InvalidArgumentError,
        "dict",
    ),
    (
        lambda s: s.set_many([("a", "k", 1)], if_absent="yes"),
        swarmstate.InvalidArgumentError,
        "'yes'",
    ),
    (lambda s: s.set_many([("a", "k", b"")], raw=1), swarmstate.InvalidArgumentError, "1"),
    (lambda s: s.set("a", 5, object()), swarmstate.InvalidKeyError, "5"),
    # Not an iterable at all: the argument is named.
    (lambda s: s.set_many(None), swarmstate.InvalidArgumentError, "items must be an iterable"),
    (lambda s: s.set_many("abc"), swarmstate.InvalidArgumentError, "items must be an iterable"),
    (
        lambda s: s.set_many([], ensure=3),
        swarmstate.InvalidArgumentError,
        "ensure must be an iterable",
    ),
    (
        lambda s: s.set_many([], require=5),
        swarmstate.InvalidArgumentError,
        "require must be an iterable",
    ),
]


@pytest.mark.parametrize(("call", "error", "shown"), BATCH_CASES)
def test_a_bad_batch_is_refused_alike_and_writes_nothing(
    store: swarmstate.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, error, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


def _write(**kwargs: Any) -> Call:
    return lambda s: s.write(swarmstate.Transaction(**kwargs))


WRITE_CASES: list[tuple[Call, type[Exception], str]] = [
    (
        lambda s: s.write([("ns", "k", 1)]),
        swarmstate.InvalidArgumentError,
        "takes a swarmstate.Transaction",
    ),
    (lambda s: s.write(None), swarmstate.InvalidArgumentError, "NoneType"),
    (_write(if_absent="yes"), swarmstate.InvalidArgumentError, "if_absent must be True or False"),
    (_write(raw=1), swarmstate.InvalidArgumentError, "raw must be True or False"),
    (
        _write(conditions=[("ns", "k", swarmstate.ABSENT)]),
        swarmstate.InvalidArgumentError,
        "got tuple",
    ),
    (_write(conditions=[swarmstate.ABSENT]), swarmstate.InvalidArgumentError, "ABSENT"),
    (_write(conditions=5), swarmstate.InvalidArgumentError, "conditions must be an iterable"),
    (
        _write(conditions=[swarmstate.Absent("ns", 1)]),
        swarmstate.InvalidKeyError,
        "key must be a str",
    ),
    (
        _write(conditions=[swarmstate.Present(SURROGATE, "k")]),
        swarmstate.InvalidKeyError,
        repr(SURROGATE),
    ),
    (
        _write(conditions=[swarmstate.Holds("ns", "k", 1)]),
        swarmstate.InvalidArgumentError,
        "got int",
    ),
    (
        _write(conditions=[swarmstate.Holds("ns", "k", bytearray(b"x"))]),
        swarmstate.InvalidArgumentError,
        "bytearray",
    ),
    (
        _write(conditions=[swarmstate.Empty(None)]),
        swarmstate.InvalidKeyError,
        "namespace must be a str",
    ),
    (
        _write(conditions=[swarmstate.Empty("ns", 3)]),
        swarmstate.InvalidKeyError,
        "start must be a str",
    ),
    (
        _write(conditions=[swarmstate.Empty("ns", "a", b"z")]),
        swarmstate.InvalidKeyError,
        "stop must be a str",
    ),
    # The first bad part wins: conditions, sets, deletes, then prefixes.
    (
        _write(conditions=[swarmstate.Empty("ns", 3)], sets=[(1, "k", 1)]),
        swarmstate.InvalidKeyError,
        "start must be a str",
    ),
    (
        _write(sets=[("a", "k", object())], deletes=[("ns", 1)], prefix_deletes=[2]),
        swarmstate.UnsupportedTypeError,
        "object",
    ),
    (
        _write(sets=[("a", "k")]),
        swarmstate.InvalidArgumentError,
        "sets takes (namespace, key, value)",
    ),
    (_write(sets="abc"), swarmstate.InvalidArgumentError, "sets must be an iterable"),
    (_write(sets=[("a", "k", {})], raw=True), swarmstate.InvalidArgumentError, "dict"),
    (
        _write(deletes=[("ns", 1)], prefix_deletes=[2]),
        swarmstate.InvalidKeyError,
        "key must be a str",
    ),
    (_write(deletes=[("ns",)]), swarmstate.InvalidArgumentError, "('ns',)"),
    (_write(deletes=3), swarmstate.InvalidArgumentError, "deletes must be an iterable"),
    (_write(prefix_deletes=["a", b"n"]), swarmstate.InvalidKeyError, "prefix must be a str"),
    (
        _write(prefix_deletes="ns"),
        swarmstate.InvalidArgumentError,
        "prefix_deletes must be an iterable",
    ),
    (_write(prefix_deletes=[SURROGATE]), swarmstate.InvalidKeyError, repr(SURROGATE)),
    # Tags: a set's 4th element, then tag deletes (after the prefixes).
    (
        _write(sets=[("a", "k", 1, {"order": "x"})]),
        swarmstate.InvalidArgumentError,
        "must be a swarmstate.Tags",
    ),
    (_write(sets=[("a", "k", 1, None)]), swarmstate.InvalidArgumentError, "got NoneType"),
    (
        _write(sets=[("a", "k", 1, swarmstate.Tags(order=5))]),
        swarmstate.InvalidKeyError,
        "tag order must be a str",
    ),
    (
        _write(sets=[("a", "k", 1, swarmstate.Tags(group=SURROGATE))]),
        swarmstate.InvalidKeyError,
        "tag group",
    ),
    (
        _write(sets=[("a", "k", 1, swarmstate.Tags(order="x" * 513))]),
        swarmstate.InvalidKeyError,
        "513 UTF-8 bytes",
    ),
    (
        _write(sets=[("a", "k", 1, swarmstate.Tags(order="é" * 257))]),
        swarmstate.InvalidKeyError,
        "514 UTF-8 bytes",
    ),
    (
        _write(sets=[("a", "k", 1, swarmstate.Tags(), 2)]),
        swarmstate.InvalidArgumentError,
        "sets takes (namespace, key, value)",
    ),
    (
        _write(tag_deletes=[("when", None, None)]),
        swarmstate.InvalidArgumentError,
        "tag must be 'order' or 'group', got 'when'",
    ),
    (_write(tag_deletes=[("order", 1, None)]), swarmstate.InvalidKeyError, "start must be a str"),
    (_write(tag_deletes=[("group", None, SURROGATE)]), swarmstate.InvalidKeyError, repr(SURROGATE)),
    (
        _write(tag_deletes=[("order", None)]),
        swarmstate.InvalidArgumentError,
        "tag_deletes takes (tag, start, stop)",
    ),
    (
        _write(tag_deletes="order"),
        swarmstate.InvalidArgumentError,
        "tag_deletes must be an iterable",
    ),
    (
        _write(prefix_deletes=[1], tag_deletes=[("when", None, None)]),
        swarmstate.InvalidKeyError,
        "prefix must be a str",
    ),
]

TAGGED_CASES: list[tuple[Call, type[Exception], str]] = [
    (lambda s: s.tagged("when"), swarmstate.InvalidArgumentError, "tag must be 'order' or 'group'"),
    (lambda s: s.tagged(None), swarmstate.InvalidArgumentError, "None"),
    (lambda s: s.tagged("order", start=3), swarmstate.InvalidKeyError, "start must be a str"),
    (lambda s: s.tagged("group", stop=SURROGATE), swarmstate.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.tagged("order", start="x" * 600), swarmstate.InvalidKeyError, "600 UTF-8 bytes"),
    (
        lambda s: s.tagged("order", reverse=1),
        swarmstate.InvalidArgumentError,
        "reverse must be True or False",
    ),
    (lambda s: s.tagged("order", limit=-1), swarmstate.InvalidArgumentError, "limit must be None"),
    (
        lambda s: s.tagged("order", limit=2**63),
        swarmstate.InvalidArgumentError,
        "limit must be None",
    ),
    (lambda s: s.tagged("when", start=3, limit=-1), swarmstate.InvalidArgumentError, "tag must be"),
]


@pytest.mark.parametrize(("call", "error", "shown"), TAGGED_CASES)
def test_a_bad_tagged_read_is_refused_alike(
    store: swarmstate.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    _raises(store, call, error, shown)


@pytest.mark.parametrize(("call", "error", "shown"), WRITE_CASES)
def test_a_bad_write_is_refused_alike_and_changes_nothing(
    store: swarmstate.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, error, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


PAIR_CASES: list[tuple[Call, type[Exception], str]] = [
    (lambda s: s.get_many([("ns", "k"), ("ns",)]), swarmstate.InvalidArgumentError, "('ns',)"),
    (lambda s: s.get_many([("ns", 1)]), swarmstate.InvalidKeyError, "1"),
    (lambda s: s.get_many([("ns", "k", "v")]), swarmstate.InvalidArgumentError, "'v'"),
    (lambda s: s.delete_many([("ns", "k"), "nk"]), swarmstate.InvalidArgumentError, "'nk'"),
    (
        lambda s: s.delete_many([("ns", "k"), (SURROGATE, "k")]),
        swarmstate.InvalidKeyError,
        "surrogate",
    ),
    (lambda s: s.delete("ns", None), swarmstate.InvalidKeyError, "None"),
    (lambda s: s.contains(SURROGATE, "k"), swarmstate.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.get("ns", b"k"), swarmstate.InvalidKeyError, "b'k'"),
    (lambda s: s.get_many(None), swarmstate.InvalidArgumentError, "pairs must be an iterable"),
    (lambda s: s.delete_many(7), swarmstate.InvalidArgumentError, "pairs must be an iterable"),
    (lambda s: s.footprint("ns", 1, 10), swarmstate.InvalidKeyError, "1"),
    (lambda s: s.footprint("ns", "k", -1), swarmstate.InvalidArgumentError, "-1"),
    (lambda s: s.footprint("ns", "k", 2.5), swarmstate.InvalidArgumentError, "2.5"),
]


@pytest.mark.parametrize(("call", "error", "shown"), PAIR_CASES)
def test_bad_pairs_are_refused_alike_and_delete_nothing(
    store: swarmstate.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, error, shown)
    assert store.get("ns", "k") == "kept"


PREFIX_CASES: list[tuple[Call, str]] = [
    (lambda s: s.namespaces(3), "3"),
    (lambda s: s.namespaces(SURROGATE), repr(SURROGATE)),
    (lambda s: s.delete_prefix(b"n"), "b'n'"),
    (lambda s: s.delete_prefix("n" + SURROGATE), repr("n" + SURROGATE)),
    (lambda s: s.copy_prefix("n", None), "None"),
    (lambda s: s.copy_prefix(SURROGATE, "m"), repr(SURROGATE)),
]


@pytest.mark.parametrize(("call", "shown"), PREFIX_CASES)
def test_bad_prefixes_are_refused_alike_and_change_nothing(
    store: swarmstate.BaseStore, call: Call, shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, swarmstate.InvalidKeyError, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


def test_a_bad_key_of_a_snapshot_read_is_refused_alike(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", "kept")
    snap = store.snapshot()
    with pytest.raises(swarmstate.InvalidKeyError) as got:
        snap.get("ns", SURROGATE)
    assert repr(SURROGATE) in str(got.value)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, [3]], ids=repr)
def test_bad_max_history_is_refused_alike(store_factory: Any, bad: Any) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError) as got:
        store_factory(max_history=bad)
    with pytest.raises(swarmstate.InvalidArgumentError) as expected:
        swarmstate.Store(max_history=bad)
    assert repr(bad) in str(got.value)
    assert str(got.value) == str(expected.value)


def test_footprint_counts_at_least_the_entry_and_grows_with_its_value(
    store: swarmstate.BaseStore,
) -> None:
    small, large = store.footprint("ns", "k", 10), store.footprint("ns", "k", 100_000)
    assert small >= len("ns") + len("k") + 10
    assert large >= 100_000 + len("ns") + len("k")
    assert large > small

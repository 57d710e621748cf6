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

import swarmstate as ss

Call = Callable[[ss.BaseStore], Any]

SURROGATE = "\udc80"


def _raises(store: ss.BaseStore, call: Call, error: type[Exception], shown: str) -> None:
    """``call(store)`` raises ``error`` naming ``shown``, exactly as the in-memory store does."""
    with pytest.raises(error) as got:
        call(store)
    assert type(got.value) is error
    assert shown in str(got.value)
    reference = ss.Store()
    reference.set("ns", "k", "kept")
    with pytest.raises(error) as expected:
        call(reference)
    assert str(got.value) == str(expected.value)


RANGE_CASES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"start": SURROGATE}, ss.InvalidKeyError, repr(SURROGATE)),
    ({"stop": "\ud800"}, ss.InvalidKeyError, repr("\ud800")),
    ({"start": 3}, ss.InvalidKeyError, "3"),
    ({"stop": b"k"}, ss.InvalidKeyError, "b'k'"),
    ({"reverse": "no"}, ss.InvalidArgumentError, "'no'"),
    ({"reverse": 1}, ss.InvalidArgumentError, "1"),
    ({"reverse": None}, ss.InvalidArgumentError, "None"),
    ({"limit": 2**63}, ss.InvalidArgumentError, str(2**63)),
    ({"limit": -1}, ss.InvalidArgumentError, "-1"),
    ({"limit": 1.5}, ss.InvalidArgumentError, "1.5"),
    ({"limit": True}, ss.InvalidArgumentError, "True"),
    ({"limit": "3"}, ss.InvalidArgumentError, "'3'"),
    # The first bad argument wins: namespace, start, stop, reverse, limit.
    ({"start": 3, "reverse": "no"}, ss.InvalidKeyError, "3"),
    ({"reverse": "no", "limit": -1}, ss.InvalidArgumentError, "'no'"),
]


@pytest.mark.parametrize(("kwargs", "error", "shown"), RANGE_CASES, ids=repr)
@pytest.mark.parametrize("method", ["keys", "items"])
def test_range_arguments_are_refused_alike(
    store: ss.BaseStore, method: str, kwargs: dict[str, Any], error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, lambda s: getattr(s, method)("ns", **kwargs), error, shown)


@pytest.mark.parametrize("namespace", [1, None, b"ns", SURROGATE])
@pytest.mark.parametrize("method", ["keys", "items", "count"])
def test_a_bad_namespace_of_a_read_is_refused_alike(
    store: ss.BaseStore, method: str, namespace: Any
) -> None:
    _raises(store, lambda s: getattr(s, method)(namespace), ss.InvalidKeyError, repr(namespace))


def test_the_largest_limit_is_accepted_and_means_all(store: ss.BaseStore) -> None:
    store.set_many([("ns", "a", 1), ("ns", "b", 2)])
    assert store.keys("ns", limit=2**63 - 1) == ["a", "b"]
    assert store.items("ns", reverse=True, limit=2**63 - 1) == [("b", 2), ("a", 1)]


def test_items_raw_must_be_a_bool(store: ss.BaseStore) -> None:
    _raises(store, lambda s: s.items("ns", raw="yes"), ss.InvalidArgumentError, "'yes'")
    _raises(store, lambda s: s.get_many([("ns", "a")], raw=1), ss.InvalidArgumentError, "1")


BATCH_CASES: list[tuple[Call, type[Exception], str]] = [
    # Entry by entry: shape, namespace, key, value; the first bad entry wins.
    (lambda s: s.set_many([("a", "k", object()), (1, "k", 2)]), ss.UnsupportedTypeError, "object"),
    (lambda s: s.set_many([(1, "k", 2), ("a", "k", object())]), ss.InvalidKeyError, "int: 1"),
    (lambda s: s.set_many([("a", 2.5, {1}), ("a", "k")]), ss.InvalidKeyError, "2.5"),
    (lambda s: s.set_many([("a", "k", 1), ("a", "k")]), ss.InvalidArgumentError, "('a', 'k')"),
    (lambda s: s.set_many(["abc"]), ss.InvalidArgumentError, "'abc'"),
    (lambda s: s.set_many([("a", SURROGATE, 1)]), ss.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.set_many([(SURROGATE, "k", 1)]), ss.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.set_many([("a", "k", 2**64)]), ss.ValueOutOfRangeError, str(2**64)),
    # ensure entries are checked before the items.
    (
        lambda s: s.set_many([(1, "k", 2)], ensure=[("a", "k", object())]),
        ss.UnsupportedTypeError,
        "object",
    ),
    (
        lambda s: s.set_many([("a", "k", object())], ensure=[("i", 7, 1)]),
        ss.InvalidKeyError,
        "7",
    ),
    (
        lambda s: s.set_many([("a", "k", {"x": 1}), (2, "k", b"")], raw=True),
        ss.InvalidArgumentError,
        "dict",
    ),
    (lambda s: s.set_many([("a", "k", 1)], if_absent="yes"), ss.InvalidArgumentError, "'yes'"),
    (lambda s: s.set_many([("a", "k", b"")], raw=1), ss.InvalidArgumentError, "1"),
    (lambda s: s.set("a", 5, object()), ss.InvalidKeyError, "5"),
    # Not an iterable at all: the argument is named.
    (lambda s: s.set_many(None), ss.InvalidArgumentError, "items must be an iterable"),
    (lambda s: s.set_many("abc"), ss.InvalidArgumentError, "items must be an iterable"),
    (lambda s: s.set_many([], ensure=3), ss.InvalidArgumentError, "ensure must be an iterable"),
    (lambda s: s.set_many([], require=5), ss.InvalidArgumentError, "require must be an iterable"),
]


@pytest.mark.parametrize(("call", "error", "shown"), BATCH_CASES)
def test_a_bad_batch_is_refused_alike_and_writes_nothing(
    store: ss.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, error, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


def _write(**kwargs: Any) -> Call:
    return lambda s: s.write(ss.Transaction(**kwargs))


WRITE_CASES: list[tuple[Call, type[Exception], str]] = [
    (
        lambda s: s.write([("ns", "k", 1)]),
        ss.InvalidArgumentError,
        "takes a swarmstate.Transaction",
    ),
    (lambda s: s.write(None), ss.InvalidArgumentError, "NoneType"),
    (_write(if_absent="yes"), ss.InvalidArgumentError, "if_absent must be True or False"),
    (_write(raw=1), ss.InvalidArgumentError, "raw must be True or False"),
    (_write(conditions=[("ns", "k", ss.ABSENT)]), ss.InvalidArgumentError, "got tuple"),
    (_write(conditions=[ss.ABSENT]), ss.InvalidArgumentError, "ABSENT"),
    (_write(conditions=5), ss.InvalidArgumentError, "conditions must be an iterable"),
    (_write(conditions=[ss.Absent("ns", 1)]), ss.InvalidKeyError, "key must be a str"),
    (_write(conditions=[ss.Present(SURROGATE, "k")]), ss.InvalidKeyError, repr(SURROGATE)),
    (_write(conditions=[ss.Holds("ns", "k", 1)]), ss.InvalidArgumentError, "got int"),
    (
        _write(conditions=[ss.Holds("ns", "k", bytearray(b"x"))]),
        ss.InvalidArgumentError,
        "bytearray",
    ),
    (_write(conditions=[ss.Empty(None)]), ss.InvalidKeyError, "namespace must be a str"),
    (_write(conditions=[ss.Empty("ns", 3)]), ss.InvalidKeyError, "start must be a str"),
    (_write(conditions=[ss.Empty("ns", "a", b"z")]), ss.InvalidKeyError, "stop must be a str"),
    # The first bad part wins: conditions, sets, deletes, then prefixes.
    (
        _write(conditions=[ss.Empty("ns", 3)], sets=[(1, "k", 1)]),
        ss.InvalidKeyError,
        "start must be a str",
    ),
    (
        _write(sets=[("a", "k", object())], deletes=[("ns", 1)], prefix_deletes=[2]),
        ss.UnsupportedTypeError,
        "object",
    ),
    (_write(sets=[("a", "k")]), ss.InvalidArgumentError, "sets takes (namespace, key, value)"),
    (_write(sets="abc"), ss.InvalidArgumentError, "sets must be an iterable"),
    (_write(sets=[("a", "k", {})], raw=True), ss.InvalidArgumentError, "dict"),
    (_write(deletes=[("ns", 1)], prefix_deletes=[2]), ss.InvalidKeyError, "key must be a str"),
    (_write(deletes=[("ns",)]), ss.InvalidArgumentError, "('ns',)"),
    (_write(deletes=3), ss.InvalidArgumentError, "deletes must be an iterable"),
    (_write(prefix_deletes=["a", b"n"]), ss.InvalidKeyError, "prefix must be a str"),
    (_write(prefix_deletes="ns"), ss.InvalidArgumentError, "prefix_deletes must be an iterable"),
    (_write(prefix_deletes=[SURROGATE]), ss.InvalidKeyError, repr(SURROGATE)),
    # Tags: a set's 4th element, then tag deletes (after the prefixes).
    (
        _write(sets=[("a", "k", 1, {"order": "x"})]),
        ss.InvalidArgumentError,
        "must be a swarmstate.Tags",
    ),
    (_write(sets=[("a", "k", 1, None)]), ss.InvalidArgumentError, "got NoneType"),
    (_write(sets=[("a", "k", 1, ss.Tags(order=5))]), ss.InvalidKeyError, "tag order must be a str"),
    (_write(sets=[("a", "k", 1, ss.Tags(group=SURROGATE))]), ss.InvalidKeyError, "tag group"),
    (_write(sets=[("a", "k", 1, ss.Tags(order="x" * 513))]), ss.InvalidKeyError, "513 UTF-8 bytes"),
    (_write(sets=[("a", "k", 1, ss.Tags(order="é" * 257))]), ss.InvalidKeyError, "514 UTF-8 bytes"),
    (
        _write(sets=[("a", "k", 1, ss.Tags(), 2)]),
        ss.InvalidArgumentError,
        "sets takes (namespace, key, value)",
    ),
    (
        _write(tag_deletes=[("when", None, None)]),
        ss.InvalidArgumentError,
        "tag must be 'order' or 'group', got 'when'",
    ),
    (_write(tag_deletes=[("order", 1, None)]), ss.InvalidKeyError, "start must be a str"),
    (_write(tag_deletes=[("group", None, SURROGATE)]), ss.InvalidKeyError, repr(SURROGATE)),
    (
        _write(tag_deletes=[("order", None)]),
        ss.InvalidArgumentError,
        "tag_deletes takes (tag, start, stop)",
    ),
    (_write(tag_deletes="order"), ss.InvalidArgumentError, "tag_deletes must be an iterable"),
    (
        _write(prefix_deletes=[1], tag_deletes=[("when", None, None)]),
        ss.InvalidKeyError,
        "prefix must be a str",
    ),
]

TAGGED_CASES: list[tuple[Call, type[Exception], str]] = [
    (lambda s: s.tagged("when"), ss.InvalidArgumentError, "tag must be 'order' or 'group'"),
    (lambda s: s.tagged(None), ss.InvalidArgumentError, "None"),
    (lambda s: s.tagged("order", start=3), ss.InvalidKeyError, "start must be a str"),
    (lambda s: s.tagged("group", stop=SURROGATE), ss.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.tagged("order", start="x" * 600), ss.InvalidKeyError, "600 UTF-8 bytes"),
    (
        lambda s: s.tagged("order", reverse=1),
        ss.InvalidArgumentError,
        "reverse must be True or False",
    ),
    (lambda s: s.tagged("order", limit=-1), ss.InvalidArgumentError, "limit must be None"),
    (lambda s: s.tagged("order", limit=2**63), ss.InvalidArgumentError, "limit must be None"),
    (lambda s: s.tagged("when", start=3, limit=-1), ss.InvalidArgumentError, "tag must be"),
]


@pytest.mark.parametrize(("call", "error", "shown"), TAGGED_CASES)
def test_a_bad_tagged_read_is_refused_alike(
    store: ss.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    _raises(store, call, error, shown)


@pytest.mark.parametrize(("call", "error", "shown"), WRITE_CASES)
def test_a_bad_write_is_refused_alike_and_changes_nothing(
    store: ss.BaseStore, call: Call, error: type[Exception], shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, error, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


PAIR_CASES: list[tuple[Call, type[Exception], str]] = [
    (lambda s: s.get_many([("ns", "k"), ("ns",)]), ss.InvalidArgumentError, "('ns',)"),
    (lambda s: s.get_many([("ns", 1)]), ss.InvalidKeyError, "1"),
    (lambda s: s.get_many([("ns", "k", "v")]), ss.InvalidArgumentError, "'v'"),
    (lambda s: s.delete_many([("ns", "k"), "nk"]), ss.InvalidArgumentError, "'nk'"),
    (lambda s: s.delete_many([("ns", "k"), (SURROGATE, "k")]), ss.InvalidKeyError, "surrogate"),
    (lambda s: s.delete("ns", None), ss.InvalidKeyError, "None"),
    (lambda s: s.contains(SURROGATE, "k"), ss.InvalidKeyError, repr(SURROGATE)),
    (lambda s: s.get("ns", b"k"), ss.InvalidKeyError, "b'k'"),
    (lambda s: s.get_many(None), ss.InvalidArgumentError, "pairs must be an iterable"),
    (lambda s: s.delete_many(7), ss.InvalidArgumentError, "pairs must be an iterable"),
    (lambda s: s.footprint("ns", 1, 10), ss.InvalidKeyError, "1"),
    (lambda s: s.footprint("ns", "k", -1), ss.InvalidArgumentError, "-1"),
    (lambda s: s.footprint("ns", "k", 2.5), ss.InvalidArgumentError, "2.5"),
]


@pytest.mark.parametrize(("call", "error", "shown"), PAIR_CASES)
def test_bad_pairs_are_refused_alike_and_delete_nothing(
    store: ss.BaseStore, call: Call, error: type[Exception], shown: str
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
    store: ss.BaseStore, call: Call, shown: str
) -> None:
    store.set("ns", "k", "kept")
    _raises(store, call, ss.InvalidKeyError, shown)
    assert store.items("ns") == [("k", "kept")]
    assert store.namespaces() == ["ns"]


def test_a_bad_key_of_a_snapshot_read_is_refused_alike(store: ss.BaseStore) -> None:
    store.set("ns", "k", "kept")
    snap = store.snapshot()
    with pytest.raises(ss.InvalidKeyError) as got:
        snap.get("ns", SURROGATE)
    assert repr(SURROGATE) in str(got.value)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, [3]], ids=repr)
def test_bad_max_history_is_refused_alike(store_factory: Any, bad: Any) -> None:
    with pytest.raises(ss.InvalidArgumentError) as got:
        store_factory(max_history=bad)
    with pytest.raises(ss.InvalidArgumentError) as expected:
        ss.Store(max_history=bad)
    assert repr(bad) in str(got.value)
    assert str(got.value) == str(expected.value)


def test_footprint_counts_at_least_the_entry_and_grows_with_its_value(
    store: ss.BaseStore,
) -> None:
    small, large = store.footprint("ns", "k", 10), store.footprint("ns", "k", 100_000)
    assert small >= len("ns") + len("k") + 10
    assert large >= 100_000 + len("ns") + len("k")
    assert large > small

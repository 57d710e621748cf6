"""The store contract: every backend behaves the same, method by method."""

from __future__ import annotations

import random
from typing import Any

import pytest

import swarmstate

VALUES: list[Any] = [
    None,
    True,
    0,
    -(2**63),
    2**64 - 1,
    1.5,
    "",
    "héllo ✓",
    b"\x00\xff",
    [],
    [1, [2, [3]]],
    {},
    {"a": {"b": [1, None, b"x"]}},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_set_then_get_returns_an_equal_value(store: swarmstate.BaseStore, value: Any) -> None:
    store.set("ns", "k", value)
    assert store.get("ns", "k") == value
    assert store.contains("ns", "k")


def test_tuple_comes_back_as_list(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", (1, (2, 3)))
    assert store.get("ns", "k") == [1, [2, 3]]


def test_get_missing_returns_default(store: swarmstate.BaseStore) -> None:
    assert store.get("ns", "nope") is None
    assert store.get("ns", "nope", default=7) == 7
    assert not store.contains("ns", "nope")


def test_stored_none_is_not_missing(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", None)
    assert store.contains("ns", "k")
    assert store.get("ns", "k", default=7) is None


def test_set_overwrites(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", 1)
    store.set("ns", "k", {"x": 2})
    assert store.get("ns", "k") == {"x": 2}
    assert len(store) == 1


def test_namespaces_keep_keys_apart(store: swarmstate.BaseStore) -> None:
    store.set("a", "k", 1)
    store.set("b", "k", 2)
    assert (store.get("a", "k"), store.get("b", "k")) == (1, 2)


def test_set_many_stores_all_and_later_items_win(store: swarmstate.BaseStore) -> None:
    written = store.set_many([("a", "x", 1), ("b", "y", 2), ("a", "x", 3)])
    assert written == 3
    assert store.get_many([("a", "x"), ("b", "y")]) == [3, 2]
    assert len(store) == 2


def test_get_many_raw_gives_the_stored_bytes_as_items_does(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", {"n": 1}), ("a", "y", [1, "two"])])
    stored = dict(store.items("a", raw=True))
    got = store.get_many([("a", "y"), ("a", "gone"), ("a", "x")], raw=True)
    assert got == [stored["y"], None, stored["x"]]
    assert [swarmstate.loads(data) for data in (got[0], got[2])] == [[1, "two"], {"n": 1}]
    assert store.get_many([], raw=True) == []


def test_set_many_is_all_or_nothing(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", "before")
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.set_many([("a", "x", "after"), ("a", "y", 1), ("a", "z", object())])
    assert store.get("a", "x") == "before"
    assert not store.contains("a", "y")
    assert len(store) == 1


def test_set_many_rejects_bad_key_before_writing(store: swarmstate.BaseStore) -> None:
    with pytest.raises(swarmstate.InvalidKeyError):
        store.set_many([("a", "x", 1), ("a", 5, 2)])  # type: ignore[list-item]
    assert len(store) == 0


def test_set_many_rejects_malformed_entries(store: swarmstate.BaseStore) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError):
        store.set_many([("a", "x")])  # type: ignore[list-item]
    assert len(store) == 0


def test_set_many_if_absent_keeps_existing_values(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", "old")
    written = store.set_many([("a", "x", "new"), ("a", "y", "fresh")], if_absent=True)
    assert written == 1
    assert store.get_many([("a", "x"), ("a", "y")]) == ["old", "fresh"]


def test_set_many_ensure_adds_only_missing_keys_in_the_same_batch(
    store: swarmstate.BaseStore,
) -> None:
    store.set("index", "kept", "old")
    written = store.set_many(
        [("data", "x", 1)], ensure=[("index", "kept", "new"), ("index", "added", "fresh")]
    )
    assert written == 2  # data/x and index/added
    assert store.get_many([("index", "kept"), ("index", "added"), ("data", "x")]) == [
        "old",
        "fresh",
        1,
    ]
    # Applied before items: an item with the same key replaces the ensured value.
    store.set_many([("index", "both", "item")], ensure=[("index", "both", "ensured")])
    assert store.get("index", "both") == "item"
    # Only ensured entries, with if_absent items: nothing existing is touched.
    assert store.set_many([("data", "x", 2)], if_absent=True, ensure=[("index", "kept", 0)]) == 0
    assert store.get_many([("data", "x"), ("index", "kept")]) == [1, "old"]


def test_set_many_with_a_bad_ensure_entry_writes_nothing(store: swarmstate.BaseStore) -> None:
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.set_many([("data", "x", 1)], ensure=[("index", "k", {1, 2})])
    with pytest.raises(swarmstate.InvalidKeyError):
        store.set_many([("data", "x", 1)], ensure=[("index", 7, "v")])  # type: ignore[list-item]
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.set_many([("data", "x", {1})], ensure=[("index", "k", "v")])
    assert len(store) == 0


def test_raw_values_are_stored_and_read_back_as_they_are(store: swarmstate.BaseStore) -> None:
    data = swarmstate.dumps({"a": [1, "two"]})
    assert (
        store.set_many([("a", "x", data)], ensure=[("a", "y", swarmstate.dumps(None))], raw=True)
        == 2
    )
    assert store.get("a", "x") == {"a": [1, "two"]}
    assert store.get("a", "y") is None
    assert store.items("a", raw=True) == [("x", data), ("y", swarmstate.dumps(None))]
    store.set("a", "z", [3])
    assert store.items("a", start="z", raw=True) == [("z", swarmstate.dumps([3]))]
    assert store.items("a", reverse=True, limit=1, raw=True) == [("z", swarmstate.dumps([3]))]


def test_raw_write_of_a_value_that_is_not_bytes_writes_nothing(store: swarmstate.BaseStore) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError, match="raw"):
        store.set_many([("a", "x", swarmstate.dumps(1)), ("a", "y", {"not": "bytes"})], raw=True)
    with pytest.raises(swarmstate.InvalidArgumentError, match="raw"):
        store.set_many([("a", "x", swarmstate.dumps(1))], ensure=[("a", "y", 2)], raw=True)
    assert len(store) == 0


def test_get_many_keeps_order_and_fills_missing_with_none(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "1", 1), ("a", "2", 2)])
    assert store.get_many([("a", "2"), ("z", "z"), ("a", "1")]) == [2, None, 1]
    assert store.get_many([]) == []


def test_delete_reports_whether_it_existed(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", 1)
    assert store.delete("a", "x") is True
    assert store.delete("a", "x") is False
    assert not store.contains("a", "x")
    assert store.namespaces() == []


def test_delete_many_counts_existing(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", 1), ("a", "y", 2), ("b", "x", 3)])
    assert store.delete_many([("a", "x"), ("a", "nope"), ("b", "x")]) == 2
    assert store.keys("a") == ["y"]
    assert store.namespaces() == ["a"]


def test_keys_are_sorted_by_code_point(store: swarmstate.BaseStore) -> None:
    keys = ["b", "a", "B", "é", "aa", "", "z\x00", "\U0001f600"]
    store.set_many([("ns", k, None) for k in keys])
    assert store.keys("ns") == sorted(keys)
    assert store.keys("missing") == []


def test_keys_range_and_limit(store: swarmstate.BaseStore) -> None:
    store.set_many([("ns", f"k{i:03d}", i) for i in range(300)])
    assert store.keys("ns", start="k010", stop="k013") == ["k010", "k011", "k012"]
    assert store.keys("ns", reverse=True, limit=2) == ["k299", "k298"]
    assert store.keys("ns", stop="k005", reverse=True, limit=2) == ["k004", "k003"]
    assert store.keys("ns", start="k297") == ["k297", "k298", "k299"]
    assert store.keys("ns", start="k0105", limit=1) == ["k011"]
    assert store.keys("ns", limit=0) == []
    assert store.keys("ns", start="zzz") == []
    assert store.keys("ns", stop="a", reverse=True) == []


def test_items_follow_the_same_range(store: swarmstate.BaseStore) -> None:
    store.set_many([("ns", f"k{i}", {"i": i}) for i in range(5)])
    assert store.items("ns", start="k1", stop="k3") == [("k1", {"i": 1}), ("k2", {"i": 2})]
    assert store.items("ns", reverse=True, limit=1) == [("k4", {"i": 4})]


def test_range_arguments_are_checked(store: swarmstate.BaseStore) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError):
        store.keys("ns", limit=-1)
    with pytest.raises(swarmstate.InvalidKeyError):
        store.items("ns", start=3)  # type: ignore[arg-type]


def test_count_and_len(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", 1), ("a", "y", 2), ("b", "x", 3)])
    assert (store.count("a"), store.count("b"), store.count("c")) == (2, 1, 0)
    assert len(store) == 3


def test_namespaces_sorted_and_by_prefix(store: swarmstate.BaseStore) -> None:
    for ns in ["t/2", "t/1", "t", "u", "s\uffff", "t\U0010ffff"]:
        store.set(ns, "k", 1)
    assert store.namespaces() == sorted(["t/2", "t/1", "t", "u", "s\uffff", "t\U0010ffff"])
    assert store.namespaces("t/") == ["t/1", "t/2"]
    assert store.namespaces("t") == ["t", "t/1", "t/2", "t\U0010ffff"]
    assert store.namespaces("") == store.namespaces()
    assert store.namespaces("v") == []


def test_delete_prefix_touches_only_that_prefix(store: swarmstate.BaseStore) -> None:
    store.set_many([("t1/a", "k", 1), ("t1/b", "k", 2), ("t1/b", "j", 3), ("t10", "k", 4)])
    assert store.delete_prefix("t1/") == 3
    assert store.namespaces() == ["t10"]
    assert store.delete_prefix("nothing") == 0


def test_copy_prefix_copies_under_the_new_name(store: swarmstate.BaseStore) -> None:
    store.set_many([("src/a", "k", 1), ("src/b", "k", 2), ("dst/a", "old", 0), ("dst/a", "k", 9)])
    assert store.copy_prefix("src/", "dst/") == 2
    assert store.items("dst/a") == [("k", 1), ("old", 0)]
    assert store.get("dst/b", "k") == 2
    assert store.get("src/a", "k") == 1  # source untouched
    store.set("src/a", "k", 5)
    assert store.get("dst/a", "k") == 1  # copies are independent


def test_clear_empties_the_store(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", 1), ("b", "y", 2)])
    store.clear()
    assert len(store) == 0
    assert store.namespaces() == []
    assert store.get("a", "x") is None


@pytest.mark.parametrize(
    ("namespace", "key"), [(1, "k"), ("ns", None), (b"ns", "k"), ("ns", ("k",))]
)
def test_non_str_namespace_or_key_raises_type_error(
    store: swarmstate.BaseStore, namespace: Any, key: Any
) -> None:
    store.set("ns", "k", "kept")
    for call in (
        lambda: store.set(namespace, key, 1),
        lambda: store.get(namespace, key),
        lambda: store.contains(namespace, key),
        lambda: store.delete(namespace, key),
        lambda: store.get_many([(namespace, key)]),
    ):
        with pytest.raises(swarmstate.InvalidKeyError) as info:
            call()
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, swarmstate.SwarmStateError)
    assert store.get("ns", "k") == "kept"
    assert len(store) == 1


def test_lone_surrogate_in_a_key_is_refused_everywhere(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", "kept")
    for call in (
        lambda: store.set("ns", "bad\ud800", 1),
        lambda: store.set("\udfff", "k", 1),
        lambda: store.set_many([("ns", "ok", 1), ("ns", "\ud800", 2)]),
        lambda: store.get("ns", "\ud800"),
    ):
        with pytest.raises(swarmstate.InvalidKeyError, match="surrogate"):
            call()
    assert store.items("ns") == [("k", "kept")]


def test_unsupported_value_raises_and_changes_nothing(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", "kept")
    with pytest.raises(swarmstate.UnsupportedTypeError, match=r"value\['a'\]\[1\]"):
        store.set("ns", "k", {"a": [1, {2}]})
    with pytest.raises(swarmstate.ValueOutOfRangeError):
        store.set("ns", "k", 2**64)
    assert store.get("ns", "k") == "kept"


def test_namespace_like_methods_reject_non_str(store: swarmstate.BaseStore) -> None:
    for call in (
        lambda: store.keys(1),  # type: ignore[arg-type]
        lambda: store.items(None),  # type: ignore[arg-type]
        lambda: store.count(b"x"),  # type: ignore[arg-type]
        lambda: store.namespaces(3),  # type: ignore[arg-type]
        lambda: store.delete_prefix(3),  # type: ignore[arg-type]
        lambda: store.copy_prefix("a", 3),  # type: ignore[arg-type]
    ):
        with pytest.raises(swarmstate.InvalidKeyError):
            call()


# -- snapshots -------------------------------------------------------------


def test_snapshot_is_immutable_view(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", 1)
    snap = store.snapshot()
    store.set("a", "x", 2)
    store.set("a", "y", 3)
    store.delete("a", "x")
    assert snap.get("a", "x") == 1
    assert snap.get("a", "y", default="none") == "none"
    assert snap.keys == [("a", "x")]
    assert snap.count == 1


def test_snapshot_ids_are_monotonic_and_parents_chain(store: swarmstate.BaseStore) -> None:
    first = store.snapshot()
    second = store.snapshot()
    assert second.id > first.id
    assert first.parent is None
    assert second.parent == first.id
    store.restore(first)
    third = store.snapshot()
    assert third.parent == first.id
    assert third.timestamp >= first.timestamp


def test_snapshot_size_bytes_sums_encoded_values(store: swarmstate.BaseStore) -> None:
    values = {"x": {"a": 1}, "y": "hello", "z": b"\x00" * 100}
    store.set_many([("ns", k, v) for k, v in values.items()])
    snap = store.snapshot()
    assert snap.size_bytes == sum(len(swarmstate.dumps(v)) for v in values.values())
    store.set("ns", "x", None)
    store.delete("ns", "z")
    assert store.snapshot().size_bytes == len(swarmstate.dumps(None)) + len(
        swarmstate.dumps("hello")
    )


def test_restore_brings_back_the_state(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", 1), ("b", "y", 2)])
    snap = store.snapshot()
    store.set("a", "x", 10)
    store.delete("b", "y")
    store.set("c", "z", 3)
    store.restore(snap)
    assert store.get_many([("a", "x"), ("b", "y"), ("c", "z")]) == [1, 2, None]
    assert store.namespaces() == ["a", "b"]
    assert len(store) == 2


def test_restore_after_clear(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", 1)
    snap = store.snapshot()
    store.clear()
    assert snap.get("a", "x") == 1
    store.restore(snap)
    assert store.get("a", "x") == 1


def test_restore_forward_to_a_later_snapshot(store: swarmstate.BaseStore) -> None:
    store.set("a", "x", 1)
    early = store.snapshot()
    store.set("a", "x", 2)
    late = store.snapshot()
    store.restore(early)
    store.restore(late)
    assert store.get("a", "x") == 2


def test_diff_lists_added_removed_changed(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "same", 1), ("a", "change", 1), ("b", "gone", 1)])
    base = store.snapshot()
    store.set("a", "change", 2)
    store.set("a", "same", 1)  # same bytes: not a change
    store.delete("b", "gone")
    store.set("c", "new", 1)
    later = store.snapshot()
    assert later.diff(base) == {
        "added": [("c", "new")],
        "removed": [("b", "gone")],
        "changed": [("a", "change")],
    }
    assert base.diff(later) == {
        "added": [("b", "gone")],
        "removed": [("c", "new")],
        "changed": [("a", "change")],
    }
    assert later.diff(later) == {"added": [], "removed": [], "changed": []}


def test_diff_between_branches_after_restore(store: swarmstate.BaseStore) -> None:
    store.set_many([("a", "x", 1), ("a", "y", 1)])
    root = store.snapshot()
    store.set("a", "x", 2)
    left = store.snapshot()
    store.restore(root)
    store.set("b", "z", 3)
    store.delete("a", "y")
    right = store.snapshot()
    assert right.parent == root.id
    assert right.diff(left) == {
        "added": [("b", "z")],
        "removed": [("a", "y")],
        "changed": [("a", "x")],
    }
    assert left.diff(right) == {
        "added": [("a", "y")],
        "removed": [("b", "z")],
        "changed": [("a", "x")],
    }


def test_diff_across_clear_and_many_steps(store: swarmstate.BaseStore) -> None:
    store.set_many([(f"n{i % 3}", f"k{i}", i) for i in range(30)])
    first = store.snapshot()
    for step in range(5):
        store.set(f"n{step % 3}", f"k{step}", -step)  # k0 stays: -0 == 0
        store.snapshot()
    store.clear()
    store.set("n1", "k1", 1)
    last = store.snapshot()
    expected_removed = sorted((f"n{i % 3}", f"k{i}") for i in range(30) if i != 1)
    assert last.diff(first) == {"added": [], "removed": expected_removed, "changed": []}
    middle = store.snapshots()[3]
    assert middle.diff(first) == {
        "added": [],
        "removed": [],
        "changed": [("n1", "k1"), ("n2", "k2")],
    }


def test_snapshots_lists_retained_in_order(store: swarmstate.BaseStore) -> None:
    ids = [store.snapshot().id for _ in range(3)]
    assert [s.id for s in store.snapshots()] == ids


def test_max_history_evicts_oldest(store_factory: Any) -> None:
    store = store_factory(max_history=2)
    store.set("a", "x", 1)
    oldest = store.snapshot()
    store.set("a", "x", 2)
    middle = store.snapshot()
    store.set("a", "x", 3)
    newest = store.snapshot()
    assert [s.id for s in store.snapshots()] == [middle.id, newest.id]
    with pytest.raises(swarmstate.SnapshotError, match="evicted"):
        store.restore(oldest)
    with pytest.raises(swarmstate.SnapshotError):
        oldest.get("a", "x")
    store.restore(middle)
    assert store.get("a", "x") == 2
    assert newest.diff(middle)["changed"] == [("a", "x")]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_max_history_must_be_positive_int(store_factory: Any, bad: Any) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError):
        store_factory(max_history=bad)


def test_snapshot_of_another_store_is_refused(store_factory: Any) -> None:
    one, other = store_factory(), store_factory()
    one.set("a", "x", 1)
    foreign = one.snapshot()
    mine = other.snapshot()
    with pytest.raises(swarmstate.SnapshotError, match="another store"):
        other.restore(foreign)
    with pytest.raises(swarmstate.SnapshotError):
        mine.diff(foreign)
    with pytest.raises(swarmstate.SnapshotError):
        other.restore("not a snapshot")  # type: ignore[arg-type]
    assert other.get("a", "x") is None


def test_context_manager_returns_the_store(store: swarmstate.BaseStore) -> None:
    with store as entered:
        assert entered is store


def test_reopen_keeps_values_and_snapshots(durable_store_factory: Any) -> None:
    store_factory = durable_store_factory
    store = store_factory(max_history=3)
    store.set_many([("a", "x", 1), ("b", "y", [2])])
    first = store.snapshot()
    store.set("a", "x", 5)
    second = store.snapshot()
    again = store_factory.reopen(store, max_history=3)
    assert again.get("a", "x") == 5
    assert [s.id for s in again.snapshots()] == [first.id, second.id]
    old = again.snapshots()[0]
    assert old.get("a", "x") == 1
    again.restore(old)
    assert again.get_many([("a", "x"), ("b", "y")]) == [1, [2]]
    assert again.snapshot().id > second.id


def test_insert_or_ignore_counts_only_what_it_wrote_with_shared_raw_values(
    store: swarmstate.BaseStore,
) -> None:
    # One bytes object for every value: "written" must not mean "same object".
    nil = swarmstate.dumps(None)
    assert store.set_many([("a", "x", nil)], ensure=[("i", "k", nil)], raw=True) == 2
    assert store.set_many([("a", "y", nil)], ensure=[("i", "k", nil)], raw=True) == 1
    assert store.set_many([("a", "x", nil), ("a", "z", nil)], if_absent=True, raw=True) == 1
    assert store.keys("a") == ["x", "y", "z"]


def test_set_many_ensure_with_a_large_batch(store: swarmstate.BaseStore) -> None:
    store.set_many([("index", f"e{i}", "old") for i in range(0, 10, 2)])
    items = [("data", f"k{i:02d}", i) for i in range(12)]
    ensure = [("index", f"e{i}", "new") for i in range(10)]
    assert store.set_many(items, ensure=ensure) == 12 + 5
    assert store.get_many([("index", f"e{i}") for i in range(4)]) == ["old", "new", "old", "new"]
    assert store.items("data", start="k10") == [("k10", 10), ("k11", 11)]


def _text(seed: int, chars: int) -> str:
    """Text no compressor shrinks: random CJK characters, 3 bytes each in UTF-8."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(chars))


def test_long_names_keep_their_order_and_prefixes_on_every_backend(
    store: swarmstate.BaseStore,
) -> None:
    # Over 3 kB each, and sharing their first 3 kB: more than any index row holds.
    base = "t/" + _text(1, 1100)
    spaces = [base + tail for tail in "dbeac"] + ["t/short", "t0"]
    keys = [_text(2, 1200) + tail for tail in "qpstr"] + ["a", "\U0010ffff", _text(3, 5)]
    store.set_many([(ns, key, [ns[-1], key[-1]]) for ns in spaces for key in keys])
    assert store.namespaces("t/") == sorted(spaces[:-1])
    assert store.namespaces(base) == sorted(spaces[:5])
    ns = spaces[0]
    assert store.keys(ns) == sorted(keys)
    assert store.keys(ns, reverse=True, limit=3) == sorted(keys, reverse=True)[:3]
    assert store.keys(ns, start=keys[1], stop=keys[3]) == [
        k for k in sorted(keys) if keys[1] <= k < keys[3]
    ]
    assert store.items(ns, start=keys[2], limit=1) == [(keys[2], [ns[-1], keys[2][-1]])]
    assert store.get(ns, keys[0]) == [ns[-1], keys[0][-1]]
    assert store.get_many([(ns, keys[4]), (ns, keys[0] + "x")]) == [[ns[-1], "r"], None]
    assert store.count(ns) == len(keys)
    snap = store.snapshot()
    store.set(ns, keys[0], "new")
    assert store.set_many([(ns, keys[1], "kept?")], if_absent=True) == 0
    assert store.delete(ns, keys[4])
    assert snap.get(ns, keys[0]) == [ns[-1], "q"]
    assert store.snapshot().diff(snap) == {
        "added": [],
        "removed": [(ns, keys[4])],
        "changed": [(ns, keys[0])],
    }
    assert store.copy_prefix(base + "a", base + "f") == len(keys)
    assert store.delete_prefix(base + "b") == len(keys)
    assert store.namespaces(base) == sorted([base + t for t in "acdef"])
    store.restore(snap)
    assert store.items(ns) == [(k, [ns[-1], k[-1]]) for k in sorted(keys)]
    assert store.namespaces(base) == sorted(spaces[:5])


def test_prefix_operations_on_a_prefix_ending_just_below_the_surrogates(
    store: swarmstate.BaseStore,
) -> None:
    # The next code point after U+D7FF is a surrogate, which no name may hold:
    # the prefix's range must end at U+E000, the next character a name can hold.
    prefix = "p\ud7ff"
    inside = [prefix, prefix + "a", prefix + "\U0010ffff"]
    outside = ["p\ud7fe", "p\ue000", "p\uffff"]
    store.set_many([(ns, "k", ns) for ns in inside + outside])
    assert store.namespaces(prefix) == sorted(inside)
    assert store.copy_prefix(prefix, "q") == len(inside)
    assert store.namespaces("q") == sorted("q" + ns[len(prefix) :] for ns in inside)
    assert store.delete_prefix(prefix) == len(inside)
    assert store.namespaces("p") == sorted(outside)

"""Ordered secondary keys ("tags"): ``tagged``, ``Tags`` on sets, ``tag_deletes``; every backend.

An entry carries at most an ``order`` and a ``group`` tag; they go with the
entry: a set replaces them, every kind of delete removes them, snapshots,
restore and ``copy_prefix`` carry them.
"""

from __future__ import annotations

from typing import Any

import pytest

import swarmstate
from swarmstate import Absent, Empty, Present, Tags, Transaction, WriteResult
from swarmstate._checks import MAX_TAG_BYTES

LONG = "n" * 1500  # longer than PostgreSQL's index keeps of a name (1,024 bytes)


def tag(store: swarmstate.BaseStore, *sets: Any, **options: Any) -> WriteResult:
    return store.write(Transaction(sets=list(sets), **options))


def everything(store: swarmstate.BaseStore) -> dict[tuple[str, str], bytes]:
    return {(ns, k): v for ns in store.namespaces() for k, v in store.items(ns, raw=True)}


def both(store: swarmstate.BaseStore) -> tuple[list[Any], list[Any]]:
    return store.tagged("order"), store.tagged("group")


def test_tagged_lists_live_entries_in_tag_order_ties_by_namespace_then_key(
    store: swarmstate.BaseStore,
) -> None:
    tag(
        store,
        ("b", "2", 1, Tags(order="t2")),
        ("a", "9", 2, Tags(order="t2")),
        ("b", "1", 3, Tags(order="t2", group="g")),
        ("z", "0", 4, Tags(order="t1")),
        ("z", "1", 5, Tags(group="g")),
        ("plain", "k", 6),
    )
    store.set("plain", "other", 7)
    assert store.tagged("order") == [
        ("t1", "z", "0"),
        ("t2", "a", "9"),
        ("t2", "b", "1"),
        ("t2", "b", "2"),
    ]
    assert store.tagged("group") == [("g", "b", "1"), ("g", "z", "1")]
    assert store.get("b", "1") == 3  # the value is stored as by any set


def test_tagged_ranges_reverse_and_limit(store: swarmstate.BaseStore) -> None:
    tag(store, *[("ns", f"k{i}", i, Tags(order=f"v{i}")) for i in range(6)])
    assert [v for v, _, _ in store.tagged("order", start="v2")] == ["v2", "v3", "v4", "v5"]
    assert [v for v, _, _ in store.tagged("order", stop="v2")] == ["v0", "v1"]
    assert [v for v, _, _ in store.tagged("order", start="v1", stop="v4")] == ["v1", "v2", "v3"]
    assert [v for v, _, _ in store.tagged("order", start="v1", stop="v4", reverse=True)] == [
        "v3",
        "v2",
        "v1",
    ]
    assert store.tagged("order", reverse=True, limit=2) == [("v5", "ns", "k5"), ("v4", "ns", "k4")]
    assert store.tagged("order", limit=1) == [("v0", "ns", "k0")]
    assert store.tagged("order", limit=0) == []
    assert store.tagged("order", start="v3", stop="v3") == []
    assert store.tagged("order", start="w") == []
    assert store.tagged("group") == []
    # A bound between values, and values that extend a bound.
    tag(store, ("ns", "x", 0, Tags(order="v2a")), ("ns", "y", 0, Tags(order="v")))
    assert [v for v, _, _ in store.tagged("order", start="v2", stop="v3")] == ["v2", "v2a"]
    assert [v for v, _, _ in store.tagged("order", stop="v0")] == ["v"]


def test_reverse_breaks_ties_in_reverse_too(store: swarmstate.BaseStore) -> None:
    tag(
        store,
        ("a", "1", 0, Tags(order="t")),
        ("a", "2", 0, Tags(order="t")),
        ("b", "0", 0, Tags(order="t")),
    )
    assert store.tagged("order", reverse=True) == [
        ("t", "b", "0"),
        ("t", "a", "2"),
        ("t", "a", "1"),
    ]


def test_tag_values_order_by_code_point(store: swarmstate.BaseStore) -> None:
    values = ["", "A", "a", "é", "\u00ff", "\u4e00", "\U0001f600", "\x00"]
    tag(store, *[("ns", str(i), i, Tags(order=v)) for i, v in enumerate(values)])
    assert [v for v, _, _ in store.tagged("order")] == sorted(values)


def test_overwriting_an_entry_replaces_its_tags(store: swarmstate.BaseStore) -> None:
    tag(store, ("ns", "k", 1, Tags(order="old", group="g")))
    tag(store, ("ns", "k", 2, Tags(order="new")))
    assert both(store) == ([("new", "ns", "k")], [])
    # Any write without tags leaves none: set, set_many, a transaction's plain set.
    store.set("ns", "k", 3)
    assert both(store) == ([], [])
    tag(store, ("ns", "k", 4, Tags(group="g")))
    store.set_many([("ns", "k", 5)])
    assert both(store) == ([], [])
    tag(store, ("ns", "k", 6, Tags(order="o")))
    tag(store, ("ns", "k", 7))
    assert both(store) == ([], [])
    tag(store, ("ns", "k", 8, Tags(order="o")))
    store.set_many([("ns", "k", 9)], require=[("ns", "k", swarmstate.PRESENT)])
    assert both(store) == ([], [])
    assert store.get("ns", "k") == 9


def test_a_later_set_of_the_same_key_wins_with_its_tags(store: swarmstate.BaseStore) -> None:
    tag(store, ("ns", "k", 1, Tags(order="first")), ("ns", "k", 2, Tags(order="second")))
    assert store.tagged("order") == [("second", "ns", "k")]
    tag(store, ("ns", "k", 3, Tags(order="a")), ("ns", "k", 4))
    assert store.tagged("order") == []
    assert store.get("ns", "k") == 4


def test_if_absent_keeps_the_entry_and_its_tags(store: swarmstate.BaseStore) -> None:
    tag(store, ("ns", "k", 1, Tags(order="kept")))
    got = tag(
        store, ("ns", "k", 2, Tags(order="lost")), ("ns", "new", 3, Tags(order="n")), if_absent=True
    )
    assert got == WriteResult(written=1, deleted=0)
    assert store.tagged("order") == [("kept", "ns", "k"), ("n", "ns", "new")]
    assert store.get("ns", "k") == 1


def test_deleting_an_entry_any_way_removes_its_tags(store: swarmstate.BaseStore) -> None:
    def fill() -> None:
        tag(
            store,
            ("t/a", "1", 1, Tags(order="o1", group="g")),
            ("t/b", "2", 2, Tags(order="o2")),
            ("u", "3", 3, Tags(order="o3", group="g")),
        )

    fill()
    assert store.delete("t/a", "1")
    assert both(store) == ([("o2", "t/b", "2"), ("o3", "u", "3")], [("g", "u", "3")])
    assert store.delete_many([("u", "3")]) == 1
    assert both(store) == ([("o2", "t/b", "2")], [])
    fill()
    assert store.delete_prefix("t/") == 2
    assert both(store) == ([("o3", "u", "3")], [("g", "u", "3")])
    fill()
    assert store.write(Transaction(deletes=[("t/b", "2")], prefix_deletes=["u"])).deleted == 2
    assert both(store) == ([("o1", "t/a", "1")], [("g", "t/a", "1")])
    fill()
    store.clear()
    assert both(store) == ([], [])
    assert len(store) == 0


def test_tag_deletes_remove_every_entry_in_the_range(store: swarmstate.BaseStore) -> None:
    tag(
        store,
        ("a", "1", 1, Tags(order="o1", group="run-1")),
        ("a", "2", 2, Tags(order="o2", group="run-2")),
        ("b", "3", 3, Tags(order="o3", group="run-1")),
        ("b", "4", 4, Tags(order="o4")),
        ("c", "5", 5),
    )
    got = store.write(Transaction(tag_deletes=[("group", "run-1", "run-1\x00")]))
    assert got == WriteResult(written=0, deleted=2)
    assert store.keys("a") == ["2"]
    assert store.keys("b") == ["4"]
    assert store.tagged("order") == [("o2", "a", "2"), ("o4", "b", "4")]
    got = store.write(Transaction(tag_deletes=[("order", None, "o3"), ("order", "o4", None)]))
    assert got == WriteResult(written=0, deleted=2)
    assert everything(store) == {("c", "5"): swarmstate.dumps(5)}
    assert store.write(Transaction(tag_deletes=[("order", None, None)])) == WriteResult(0, 0)


def test_tag_deletes_run_after_deletes_and_before_sets(store: swarmstate.BaseStore) -> None:
    tag(store, ("ns", "a", 1, Tags(order="x")), ("ns", "b", 2, Tags(order="x")))
    got = store.write(
        Transaction(
            deletes=[("ns", "a")],  # counted once, not again by the tag range
            tag_deletes=[("order", "x", "y"), ("order", "w", "z")],
            sets=[("ns", "c", 3, Tags(order="x")), ("ns", "b", 4)],
        )
    )
    assert got == WriteResult(written=2, deleted=2)
    # The sets came after: the new entry in the range stays.
    assert store.tagged("order") == [("x", "ns", "c")]
    assert everything(store) == {("ns", "b"): swarmstate.dumps(4), ("ns", "c"): swarmstate.dumps(3)}


@pytest.mark.parametrize(
    "broken", [Absent("ns", "a"), Present("ns", "missing"), Empty("ns")], ids=repr
)
def test_a_tag_delete_under_a_broken_condition_writes_nothing(
    store: swarmstate.BaseStore, broken: Any
) -> None:
    tag(store, ("ns", "a", 1, Tags(order="x", group="g")), ("ns", "b", 2, Tags(order="y")))
    before = everything(store), both(store)
    with pytest.raises(swarmstate.ConflictError, match=r"write required .*did not hold"):
        store.write(
            Transaction(
                conditions=[Present("ns", "a"), broken],
                tag_deletes=[("order", None, None)],
                sets=[("ns", "c", 3, Tags(order="z"))],
            )
        )
    assert (everything(store), both(store)) == before


def test_copy_prefix_copies_the_tags(store: swarmstate.BaseStore) -> None:
    tag(
        store,
        ("src/a", "1", 1, Tags(order="o1", group="g")),
        ("src/b", "2", 2, Tags(order="o2")),
        ("src/b", "3", 3),
        ("dst/a", "1", 0, Tags(order="replaced")),
    )
    assert store.copy_prefix("src/", "dst/") == 3
    assert store.tagged("order") == [
        ("o1", "dst/a", "1"),
        ("o1", "src/a", "1"),
        ("o2", "dst/b", "2"),
        ("o2", "src/b", "2"),
    ]
    assert store.tagged("group") == [("g", "dst/a", "1"), ("g", "src/a", "1")]


def test_restore_brings_back_the_tags_of_the_snapshot(store: swarmstate.BaseStore) -> None:
    tag(
        store,
        ("ns", "kept", 1, Tags(order="k")),
        ("ns", "retagged", 2, Tags(order="r1", group="g")),
        ("ns", "deleted", 3, Tags(order="d")),
        ("ns", "untagged", 4, Tags(group="u")),
    )
    snap = store.snapshot()
    before = both(store)
    tag(store, ("ns", "retagged", 2, Tags(order="r2")), ("ns", "new", 5, Tags(order="n")))
    store.delete("ns", "deleted")
    store.set("ns", "untagged", 4)  # same value, no tags
    store.write(Transaction(tag_deletes=[("order", "k", "l")]))
    assert store.tagged("order") == [("n", "ns", "new"), ("r2", "ns", "retagged")]
    store.restore(snap)
    assert both(store) == before
    assert store.get("ns", "kept") == 1
    assert store.get("ns", "new") is None
    # Restoring again after a later snapshot, and a clear in between.
    later = store.snapshot()
    store.clear()
    assert both(store) == ([], [])
    store.restore(later)
    assert both(store) == before


def test_a_snapshot_diff_reports_values_not_tags(store: swarmstate.BaseStore) -> None:
    tag(store, ("ns", "k", 1, Tags(order="a")))
    base = store.snapshot()
    tag(store, ("ns", "k", 1, Tags(order="b")))
    assert store.snapshot().diff(base) == {"added": [], "removed": [], "changed": []}


def test_tags_with_names_longer_than_an_index_holds(store: swarmstate.BaseStore) -> None:
    ns_a, ns_b = LONG + "a", LONG + "b"
    tag(
        store,
        (ns_b, LONG + "1", 1, Tags(order="t", group="g")),
        (ns_a, LONG + "2", 2, Tags(order="t")),
        (ns_a, LONG + "1", 3, Tags(order="t")),
        ("short", "k", 4, Tags(order="t")),
    )
    expected = [
        ("t", ns_a, LONG + "1"),
        ("t", ns_a, LONG + "2"),
        ("t", ns_b, LONG + "1"),
        ("t", "short", "k"),
    ]
    assert store.tagged("order") == expected
    assert store.tagged("order", reverse=True) == expected[::-1]
    assert store.tagged("order", limit=2) == expected[:2]
    store.copy_prefix(LONG, "c")
    assert ("t", "ca", LONG + "1") in store.tagged("order")
    assert store.write(Transaction(tag_deletes=[("group", "g", None)])).deleted == 2  # and its copy
    assert store.get(ns_b, LONG + "1") is None
    assert store.get("cb", LONG + "1") is None


def test_a_tag_value_may_be_as_long_as_the_limit(store: swarmstate.BaseStore) -> None:
    value = "é" * (MAX_TAG_BYTES // 2)
    tag(store, (LONG, LONG, 1, Tags(order=value, group=value)))
    assert store.tagged("order") == [(value, LONG, LONG)]
    assert store.tagged("group", start=value) == [(value, LONG, LONG)]


def test_tags_persist_across_reopen(durable_store_factory: Any) -> None:
    store = durable_store_factory()
    tag(store, ("ns", "k", 1, Tags(order="o", group="g")))
    again = durable_store_factory.reopen(store)
    assert both(again) == ([("o", "ns", "k")], [("g", "ns", "k")])

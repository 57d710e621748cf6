"""``store.write(Transaction(...))``: conditions, then writes, all or nothing, on every backend."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

import swarmstate
from swarmstate import Absent, Empty, Holds, Present, Transaction, WriteResult

LONG = "n" * 1500  # longer than PostgreSQL's index keeps of a name (1,024 bytes)


def everything(store: swarmstate.BaseStore) -> dict[tuple[str, str], bytes]:
    return {(ns, k): v for ns in store.namespaces() for k, v in store.items(ns, raw=True)}


def test_each_kind_of_condition_that_holds_lets_the_write_through(
    store: swarmstate.BaseStore,
) -> None:
    store.set("ns", "k", 1)
    store.set("log", "b", 1)
    conditions = [
        Absent("ns", "missing"),
        Present("ns", "k"),
        Holds("ns", "k", swarmstate.dumps(1)),
        Empty("log", "c"),
        Empty("log", None, "b"),
        Empty("empty"),
    ]
    got = store.write(Transaction(conditions=conditions, sets=[("ns", "new", 2)]))
    assert got == WriteResult(written=1, deleted=0)
    assert store.get("ns", "new") == 2


@pytest.mark.parametrize(
    "broken",
    [
        Absent("ns", "k"),
        Present("ns", "missing"),
        Holds("ns", "k", swarmstate.dumps(99)),
        Holds("ns", "missing", swarmstate.dumps(1)),
        Empty("log"),
        Empty("log", "b"),
        Empty("log", None, "c"),
        Empty("log", "b", "c"),
    ],
    ids=repr,
)
def test_a_broken_condition_writes_nothing_and_is_named(
    store: swarmstate.BaseStore, broken: Any
) -> None:
    store.set("ns", "k", 1)
    store.set("log", "b", 1)
    store.set("other", "x", 1)
    before = everything(store)
    transaction = Transaction(
        conditions=[Present("ns", "k"), Absent("ns", "free"), broken, Empty("nothing")],
        sets=[("ns", "k", 2), ("ns", "new", 3)],
        deletes=[("log", "b")],
        prefix_deletes=["oth"],
    )
    with pytest.raises(swarmstate.ConflictError) as raised:
        store.write(transaction)
    assert repr(broken) in str(raised.value)
    assert everything(store) == before


@pytest.mark.parametrize(
    ("start", "stop", "empty"),
    [
        ("b", "d", False),  # start inclusive: holds "b"
        ("c", "d", True),  # stop exclusive: "d" is not in it
        ("c", "e", False),
        ("e", None, True),
        ("d", None, False),
        (None, "b", True),
        (None, "b\x00", False),
        ("c", "c", True),  # an empty range
        ("d", "a", True),  # start past stop: nothing is in it
        ("", None, False),
    ],
)
def test_empty_ranges_take_start_inclusive_and_stop_exclusive(
    store: swarmstate.BaseStore, start: str | None, stop: str | None, empty: bool
) -> None:
    store.set_many([("log", "b", 1), ("log", "d", 2), ("loga", "c", 3), ("lo", "c", 4)])
    transaction = Transaction(conditions=[Empty("log", start, stop)], sets=[("w", "k", 1)])
    if empty:
        assert store.write(transaction) == WriteResult(1, 0)
        assert store.get("w", "k") == 1
    else:
        with pytest.raises(swarmstate.ConflictError, match="Empty"):
            store.write(transaction)
        assert store.get("w", "k") is None


def test_conditions_see_the_store_before_the_transaction(store: swarmstate.BaseStore) -> None:
    """A key the transaction deletes was present, one it sets was absent."""
    store.set("t", "old", 1)
    got = store.write(
        Transaction(
            conditions=[Present("t", "old"), Absent("t", "new"), Empty("u")],
            sets=[("t", "new", 2), ("u", "k", 3)],
            deletes=[("t", "old")],
        )
    )
    assert got == WriteResult(2, 1)
    assert everything(store) == {("t", "new"): swarmstate.dumps(2), ("u", "k"): swarmstate.dumps(3)}


def test_prefix_deletes_then_deletes_then_sets(store: swarmstate.BaseStore) -> None:
    store.set_many(
        [("t1/a", "k", 1), ("t1/b", "k", 2), ("t1/b", "j", 3), ("t2", "k", 4), ("keep", "k", 5)]
    )
    got = store.write(
        Transaction(
            # Overlapping prefixes and a pair already under one: each entry counts once.
            prefix_deletes=["t1/", "t1/b", "none/"],
            deletes=[("t2", "k"), ("t1/a", "k"), ("t2", "k"), ("keep", "missing")],
            sets=[("t1/b", "k", "again"), ("tomb", "t1", True)],
        )
    )
    assert got == WriteResult(written=2, deleted=4)
    assert everything(store) == {
        ("keep", "k"): swarmstate.dumps(5),
        ("t1/b", "k"): swarmstate.dumps("again"),  # set after its namespace was deleted
        ("tomb", "t1"): swarmstate.dumps(True),
    }
    assert len(store) == 3
    assert store.namespaces("t1/") == ["t1/b"]


def test_insert_or_ignore_keeps_what_is_there(store: swarmstate.BaseStore) -> None:
    store.set("w", "a", "kept")
    got = store.write(
        Transaction(
            conditions=[Absent("guard", "deleted")],
            sets=[("w", "a", 1), ("w", "b", 2), ("w", "b", 3)],  # the first of "b" is inserted
            if_absent=True,
        )
    )
    assert got == WriteResult(written=1, deleted=0)
    assert store.items("w") == [("a", "kept"), ("b", 2)]
    # A key deleted in the same transaction is absent by the time the sets run.
    got = store.write(Transaction(deletes=[("w", "a")], sets=[("w", "a", "new")], if_absent=True))
    assert got == WriteResult(written=1, deleted=1)
    assert store.get("w", "a") == "new"
    assert store.write(Transaction(sets=[("w", "a", 9)], if_absent=True)) == WriteResult(0, 0)


def test_later_sets_win_and_count_as_set_many_counts(store: swarmstate.BaseStore) -> None:
    sets = [("w", "a", 1), ("w", "a", 2), ("w", "b", 3)]
    assert store.write(Transaction(sets=sets)) == WriteResult(written=3, deleted=0)
    assert store.items("w") == [("a", 2), ("b", 3)]


def test_raw_values_are_stored_as_given(store: swarmstate.BaseStore) -> None:
    data = swarmstate.dumps({"x": [1, 2]})
    store.write(Transaction(sets=[("w", "a", data)], raw=True))
    assert store.items("w", raw=True) == [("a", data)]
    store.write(Transaction(sets=[("w", "b", data)]))  # not raw: the bytes are the value
    assert store.get("w", "b") == data


def test_conditions_alone_write_nothing(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", 1)
    assert store.write(Transaction(conditions=[Present("ns", "k")])) == WriteResult(0, 0)
    with pytest.raises(swarmstate.ConflictError, match="Absent"):
        store.write(Transaction(conditions=[Absent("ns", "k")]))
    assert store.write(Transaction()) == WriteResult(0, 0)
    assert everything(store) == {("ns", "k"): swarmstate.dumps(1)}


@pytest.mark.parametrize("conditions", [0, 1, 3, 9])  # 9: more than DiskStore's one statement
def test_one_set_on_absent_and_empty_conditions(
    store: swarmstate.BaseStore, conditions: int
) -> None:
    """The shape of a checkpoint under its thread's guard (one statement on DiskStore)."""
    guard = [
        Absent("guard", f"g{i}") if i % 2 else Empty("tomb", None, f"{i}")
        for i in range(conditions)
    ]
    store.set("tomb", "~", 1)  # sorts after every digit: outside each Empty range
    assert store.write(Transaction(conditions=guard, sets=[("ns", "k", 1)])) == WriteResult(1, 0)
    snap = store.snapshot()
    # The current row is one the snapshot needs: kept for it, not overwritten.
    assert store.write(Transaction(conditions=guard, sets=[("ns", "k", 2)])) == WriteResult(1, 0)
    assert store.write(Transaction(conditions=guard, sets=[("ns", "k", 3)])) == WriteResult(1, 0)
    if conditions:
        store.set("tomb", "5", 1)
        broken = Transaction(conditions=[*guard, Empty("tomb", "0", "9")], sets=[("ns", "k", 4)])
        with pytest.raises(swarmstate.ConflictError):
            store.write(broken)
        store.delete("tomb", "5")
    assert store.get("ns", "k") == 3
    assert snap.get("ns", "k") == 1
    # Insert-or-ignore of one row: a key that holds a value is kept.
    got = store.write(Transaction(conditions=guard, sets=[("ns", "k", 5)], if_absent=True))
    assert got == WriteResult(0, 0)
    assert store.get("ns", "k") == 3
    store.restore(snap)
    assert store.get("ns", "k") == 1


def test_snapshots_diff_and_restore_across_a_transaction(store: swarmstate.BaseStore) -> None:
    store.set_many([("t/a", "k", 1), ("t/b", "k", 2), ("other", "x", 3), ("other", "y", 4)])
    before = store.snapshot()
    seen = everything(store)
    store.write(
        Transaction(
            conditions=[Empty("tomb")],
            prefix_deletes=["t/"],
            deletes=[("other", "y")],
            sets=[("other", "x", 30), ("tomb", "t", True), ("t/b", "k", 20)],
        )
    )
    after = store.snapshot()
    assert after.diff(before) == {
        "added": [("tomb", "t")],
        "removed": [("other", "y"), ("t/a", "k")],
        "changed": [("other", "x"), ("t/b", "k")],
    }
    assert before.get("t/a", "k") == 1
    assert before.get("other", "y") == 4
    assert after.get("t/b", "k") == 20
    assert after.keys == [("other", "x"), ("t/b", "k"), ("tomb", "t")]
    store.restore(before)
    assert everything(store) == seen
    assert len(store) == 4
    store.restore(after)
    assert store.get("t/b", "k") == 20
    assert store.get("t/a", "k") is None


def test_long_names_in_every_part(store: swarmstate.BaseStore) -> None:
    """Names past PostgreSQL's index form: conditions, ranges, deletes and prefixes."""
    long_key = "k" * 1100
    store.set_many([(LONG + "/a", long_key, 1), (LONG + "/a", long_key + "b", 2), ("ns", "x", 3)])
    with pytest.raises(swarmstate.ConflictError):
        store.write(Transaction(conditions=[Absent(LONG + "/a", long_key)], sets=[("w", "k", 1)]))
    with pytest.raises(swarmstate.ConflictError):
        store.write(Transaction(conditions=[Empty(LONG + "/a", long_key + "a", long_key + "c")]))
    got = store.write(
        Transaction(
            conditions=[
                Present(LONG + "/a", long_key),
                Holds(LONG + "/a", long_key + "b", swarmstate.dumps(2)),
                Empty(LONG + "/a", long_key + "c"),
                Empty(LONG + "/a", long_key + "\x00", long_key + "b"),
                Empty(LONG + "/b"),
            ],
            deletes=[(LONG + "/a", long_key)],
            sets=[(LONG + "/b", long_key, 4), ("ns", LONG, 5)],
        )
    )
    assert got == WriteResult(written=2, deleted=1)
    assert store.keys(LONG + "/a") == [long_key + "b"]
    assert store.get(LONG + "/b", long_key) == 4
    assert store.get("ns", LONG) == 5
    got = store.write(Transaction(prefix_deletes=[LONG], sets=[(LONG + "/c", long_key, 6)]))
    assert got == WriteResult(written=1, deleted=2)
    assert store.namespaces(LONG) == [LONG + "/c"]


def test_a_bad_write_is_refused_before_anything_is_written(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", 1)
    before = everything(store)
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.write(Transaction(prefix_deletes=["ns"], sets=[("a", "k", 1), ("a", "j", {1})]))
    assert everything(store) == before


def test_appends_from_many_threads_under_an_empty_condition_lose_none(
    store: swarmstate.BaseStore,
) -> None:
    # Each worker reads the latest key of a log and appends the next one only if
    # nothing was appended since (no key at or after it): conflicts retry, and
    # the log ends with every append exactly once, in order.
    per_worker, workers = 15, 4
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for _ in range(per_worker):
                while True:
                    latest = store.keys("log", reverse=True, limit=1)
                    n = int(latest[0]) + 1 if latest else 0
                    key = f"{n:04d}"
                    since = [Empty("log", key)]
                    append = Transaction(conditions=since, sets=[("log", key, worker)])
                    try:
                        store.write(append)
                        break
                    except swarmstate.ConflictError:
                        continue
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.keys("log") == [f"{n:04d}" for n in range(per_worker * workers)]
    assert sorted(store.get_many([("log", k) for k in store.keys("log")])) == sorted(
        w for w in range(workers) for _ in range(per_worker)
    )


def _holds(condition: Any, model: dict[tuple[str, str], bytes]) -> bool:
    if isinstance(condition, Empty):
        return not any(
            ns == condition.namespace
            and (condition.start is None or key >= condition.start)
            and (condition.stop is None or key < condition.stop)
            for ns, key in model
        )
    found = model.get((condition.namespace, condition.key))
    if isinstance(condition, Absent):
        return found is None
    if isinstance(condition, Present):
        return found is not None
    assert isinstance(condition, Holds)
    return found == condition.data


@pytest.mark.parametrize("seed", range(6))
def test_many_conditions_on_one_namespace_agree_with_each_checked_alone(
    store: swarmstate.BaseStore, seed: int
) -> None:
    # Dozens of conditions on one namespace (a copied thread kept as read: one
    # per entry and one per gap) may be answered together; they must give what
    # each gives alone, the first that fails named, whether or not the range
    # they span holds keys no condition names.
    rnd = random.Random(seed)
    names = ["", "a", "a\x00", "b", "ba", "c", "d\x01", "é", "z", "\U0001f600"]
    rows = {("ns", key): swarmstate.dumps(i) for i, key in enumerate(names) if rnd.random() < 0.6}
    rows[("other", "a")] = swarmstate.dumps(0)
    store.set_many([(ns, key, data) for (ns, key), data in rows.items()], raw=True)
    for _ in range(12):
        conditions: list[Any] = []
        for _ in range(rnd.randrange(16, 40)):
            key = rnd.choice(names)
            kind = rnd.randrange(6)
            if kind == 0:
                conditions.append(Absent("ns", key))
            elif kind == 1:
                conditions.append(Present("ns", key))
            elif kind == 2:
                conditions.append(Holds("ns", key, rows.get(("ns", key), swarmstate.dumps(-1))))
            else:
                bounds = sorted([rnd.choice([*names, None]), rnd.choice([*names, None])], key=str)
                start = None if kind == 3 else bounds[0]
                stop = None if kind == 4 else bounds[1]
                conditions.append(Empty("ns", start, stop))
        # Mostly conditions that hold, so that a late one is the first to fail.
        conditions = [c for c in conditions if _holds(c, rows) or rnd.random() < 0.1]
        failing = [c for c in conditions if not _holds(c, rows)]
        transaction = Transaction(conditions=conditions, sets=[("log", "k", 1)])
        if failing:
            with pytest.raises(swarmstate.ConflictError) as raised:
                store.write(transaction)
            assert str(raised.value).startswith(f"write required {failing[0]!r}")
        else:
            assert store.write(transaction) == WriteResult(written=1, deleted=0)

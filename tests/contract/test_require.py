"""``set_many(require=...)``: conditions checked atomically with the write, on every backend."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import swarmstate


def everything(store: swarmstate.BaseStore) -> dict[tuple[str, str], bytes]:
    return {(ns, k): v for ns in store.namespaces() for k, v in store.items(ns, raw=True)}


def test_absent_present_and_equal_bytes(store: swarmstate.BaseStore) -> None:
    store.set_many([("ns", "k", 1)], require=[("ns", "k", swarmstate.ABSENT)])
    stored = store.items("ns", raw=True)[0][1]
    store.set_many([("ns", "k", 2)], require=[("ns", "k", swarmstate.PRESENT)])
    after = store.items("ns", raw=True)[0][1]
    assert after != stored
    store.set_many([("ns", "k", 3)], require=[("ns", "k", after)])
    assert store.get("ns", "k") == 3


@pytest.mark.parametrize(
    "condition",
    [
        ("ns", "k", swarmstate.ABSENT),  # k holds a value
        ("ns", "missing", swarmstate.PRESENT),
        ("ns", "k", swarmstate.dumps(99)),  # other bytes
        ("ns", "missing", swarmstate.dumps(1)),
    ],
)
def test_a_broken_condition_writes_nothing(store: swarmstate.BaseStore, condition: Any) -> None:
    store.set("ns", "k", 1)
    before = everything(store)
    with pytest.raises(swarmstate.ConflictError, match=repr(condition[1])):
        store.set_many(
            [("ns", "k", 2), ("other", "x", 3)],
            ensure=[("idx", "y", 4)],
            require=[("ns", "k", swarmstate.PRESENT), condition],
        )
    assert everything(store) == before


def test_one_row_on_the_condition_that_another_key_is_absent(store: swarmstate.BaseStore) -> None:
    """The shape of every unclaimed checkpoint write (DiskStore runs it as one statement)."""
    store.set("guard", "taken", 1)
    before = everything(store)
    with pytest.raises(swarmstate.ConflictError, match="'taken'"):
        store.set_many([("ns", "k", 1)], require=[("guard", "taken", swarmstate.ABSENT)])
    assert everything(store) == before
    assert store.set_many([("ns", "k", 1)], require=[("guard", "free", swarmstate.ABSENT)]) == 1
    snap = store.snapshot()
    # The current row is one the snapshot needs: it is kept for it, not overwritten.
    assert store.set_many([("ns", "k", 2)], require=[("guard", "free", swarmstate.ABSENT)]) == 1
    assert store.set_many([("ns", "k", 3)], require=[("guard", "free", swarmstate.ABSENT)]) == 1
    assert store.get("ns", "k") == 3
    store.restore(snap)
    assert store.get("ns", "k") == 1
    assert store.get("guard", "free") is None


@pytest.mark.parametrize("rows", [2, 3, 8, 9])  # 9: more than DiskStore's one statement takes
def test_write_rows_on_the_condition_that_another_key_is_absent(
    store: swarmstate.BaseStore, rows: int
) -> None:
    """The shape of an unclaimed checkpoint with new list segments (one statement on DiskStore)."""
    free, taken = [("guard", "free", swarmstate.ABSENT)], [("guard", "taken", swarmstate.ABSENT)]
    batch = [("ns", f"k{i}", i) for i in range(rows)]
    store.set("guard", "taken", 1)
    before = everything(store)
    with pytest.raises(swarmstate.ConflictError, match="'taken'"):
        store.set_many(batch, require=taken)
    assert everything(store) == before
    assert store.set_many(batch, require=free) == rows
    assert [store.get("ns", key) for _, key, _ in batch] == list(range(rows))
    # Keys written since the latest snapshot are overwritten; a key repeated
    # in one batch ends with its last value.
    again = [("ns", "k0", "first"), *batch[1 : rows - 1], ("ns", "k0", "last")]
    assert store.set_many(again, require=free) == rows
    assert store.get("ns", "k0") == "last"
    snap = store.snapshot()
    seen = everything(store)
    # Every current row is one the snapshot needs: each is kept for it.
    changed = [("ns", key, f"after {key}") for _, key, _ in batch[: rows - 1]] + [("ns", "new", 1)]
    assert store.set_many(changed, require=free) == rows
    assert [store.get(ns, key) for ns, key, _ in changed] == [value for _, _, value in changed]
    assert snap.get("ns", "k1") == 1
    assert snap.get("ns", "new") is None
    store.restore(snap)
    assert everything(store) == seen
    assert store.get("guard", "free") is None


@pytest.mark.parametrize("rows", [1, 3, 8, 9])
@pytest.mark.parametrize("lenders", [1, 2, 9])  # 9: more conditions than one DiskStore statement
def test_write_rows_on_conditions_that_keys_are_absent_and_others_present(
    store: swarmstate.BaseStore, rows: int, lenders: int
) -> None:
    """The shape of a checkpoint that takes stored bytes from others (one statement on DiskStore):
    every condition is checked before any row is written, whatever broke."""
    for i in range(lenders):
        store.set("lent", f"p{i}", i)
    store.set("guard", "taken", 1)
    present = [("lent", f"p{i}", swarmstate.PRESENT) for i in range(lenders)]
    batch = [("ns", f"k{i}", i) for i in range(rows)]
    before = everything(store)
    for broken in (
        [("guard", "taken", swarmstate.ABSENT), *present],
        [("guard", "free", swarmstate.ABSENT), *present, ("lent", "gone", swarmstate.PRESENT)],
        [("guard", "free", swarmstate.ABSENT), ("lent", "gone", swarmstate.PRESENT), *present],
    ):
        with pytest.raises(swarmstate.ConflictError):
            store.set_many(batch, require=broken)
        assert everything(store) == before
    assert store.set_many(batch, require=[("guard", "free", swarmstate.ABSENT), *present]) == rows
    assert [store.get("ns", key) for _, key, _ in batch] == list(range(rows))
    snap = store.snapshot()
    # Rows the snapshot needs are kept for it, and the write goes through.
    changed = [("ns", key, f"after {key}") for _, key, _ in batch]
    assert store.set_many(changed, require=[("guard", "free", swarmstate.ABSENT), *present]) == rows
    assert snap.get("ns", "k0") == 0
    assert store.get("ns", "k0") == "after k0"


@pytest.mark.parametrize("rows", [1, 3, 40])  # 40: more than DiskStore's one statement takes
def test_insert_or_ignore_rows_on_the_condition_that_another_key_is_absent(
    store: swarmstate.BaseStore, rows: int
) -> None:
    """The shape of every unclaimed write of pending writes (one statement on DiskStore)."""
    batch = [("ns", f"k{i:02d}", i) for i in range(rows)]
    store.set("ns", "k00", "kept")
    store.set("guard", "taken", 1)
    before = everything(store)
    with pytest.raises(swarmstate.ConflictError, match="'taken'"):
        store.set_many(batch, if_absent=True, require=[("guard", "taken", swarmstate.ABSENT)])
    assert everything(store) == before
    free = [("guard", "free", swarmstate.ABSENT)]
    assert store.set_many(batch, if_absent=True, require=free) == rows - 1
    assert store.get("ns", "k00") == "kept"
    assert [store.get("ns", key) for _, key, _ in batch[1:]] == list(range(1, rows))
    expected = {**before, **{("ns", key): swarmstate.dumps(value) for _, key, value in batch[1:]}}
    assert everything(store) == expected
    again = [(ns, key, "again") for ns, key, _ in batch]
    # Every key holds a value: nothing is written, and no condition is broken.
    assert store.set_many(again, if_absent=True, require=free) == 0
    assert everything(store) == expected
    snap = store.snapshot()
    assert store.set_many([*again, ("ns", "new", 1)], if_absent=True, require=free) == 1
    assert (snap.get("ns", "new"), store.get("ns", "new")) == (None, 1)
    store.restore(snap)
    assert everything(store) == expected


def test_a_condition_alone_is_a_consistent_check(store: swarmstate.BaseStore) -> None:
    store.set("ns", "k", 1)
    assert store.set_many([], require=[("ns", "k", swarmstate.PRESENT)]) == 0
    with pytest.raises(swarmstate.ConflictError):
        store.set_many([], require=[("ns", "gone", swarmstate.PRESENT)])


def test_bad_conditions_are_refused_before_anything(store: swarmstate.BaseStore) -> None:
    with pytest.raises(
        swarmstate.InvalidArgumentError, match="ABSENT, PRESENT or the stored bytes"
    ):
        store.set_many([("ns", "k", 1)], require=[("ns", "k", "not bytes")])
    with pytest.raises(swarmstate.InvalidArgumentError, match="require takes"):
        store.set_many([("ns", "k", 1)], require=[("ns", "k")])  # type: ignore[list-item]
    with pytest.raises(swarmstate.InvalidKeyError):
        store.set_many([("ns", "k", 1)], require=[(3, "k", swarmstate.ABSENT)])  # type: ignore[list-item]
    assert everything(store) == {}


def test_compare_and_set_from_many_threads_loses_no_update(store: swarmstate.BaseStore) -> None:
    # Each worker reads the counter and writes counter + 1 only if it is unchanged:
    # conflicts retry, and every increment lands exactly once.
    store.set("c", "n", 0)
    per_worker, workers = 25, 4
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(per_worker):
                while True:
                    [(_, raw)] = store.items("c", raw=True)
                    try:
                        store.set_many(
                            [("c", "n", swarmstate.loads(raw) + 1)], require=[("c", "n", raw)]
                        )
                        break
                    except swarmstate.ConflictError:
                        continue
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.get("c", "n") == per_worker * workers

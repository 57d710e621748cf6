"""The in-memory store under threads: nothing lost, snapshots stay consistent."""

from __future__ import annotations

import threading

import swarmstate


def run_threads(count: int, target: object) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]  # type: ignore[arg-type]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_writers_lose_nothing() -> None:
    store = swarmstate.Store()
    threads, writes = 8, 2_000

    def writer(i: int) -> None:
        for j in range(writes):
            # Half the threads share namespaces, so shards and leaves collide.
            store.set(f"ns{i % 4}", f"t{i}-k{j}", {"i": i, "j": j})

    run_threads(threads, writer)
    assert len(store) == threads * writes
    for i in range(threads):
        assert store.get(f"ns{i % 4}", f"t{i}-k{writes - 1}") == {"i": i, "j": writes - 1}
        assert sum(k.startswith(f"t{i}-") for k in store.keys(f"ns{i % 4}")) == writes


def test_concurrent_increments_of_one_counter_are_serializable_via_set_many() -> None:
    # An increment claims the counter's next value with an insert-or-ignore:
    # set_many(if_absent=True) returns 1 for exactly one of the racing writers.
    store = swarmstate.Store()
    threads, increments = 4, 500
    claimed: list[list[int]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads)

    def writer(i: int) -> None:
        barrier.wait()
        for _ in range(increments):
            while True:
                last = store.keys("counter", reverse=True, limit=1)
                value = int(last[0]) + 1 if last else 1
                if store.set_many([("counter", f"{value:08d}", i)], if_absent=True) == 1:
                    claimed[i].append(value)
                    break

    run_threads(threads, writer)
    total = threads * increments
    # Every increment got its own value, none was lost or counted twice.
    assert sorted(v for mine in claimed for v in mine) == list(range(1, total + 1))
    assert store.count("counter") == total
    for i, mine in enumerate(claimed):
        assert store.get_many([("counter", f"{v:08d}") for v in mine]) == [i] * len(mine)


def test_snapshots_taken_during_writes_stay_frozen() -> None:
    store = swarmstate.Store()
    stop = threading.Event()

    def writer(i: int) -> None:
        j = 0
        while not stop.is_set():
            store.set(f"ns{i}", f"k{j % 50}", j)
            j += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        taken = []
        for _ in range(50):
            snap = store.snapshot()
            taken.append((snap, {k: snap.get(*k) for k in snap.keys}))
    finally:
        stop.set()
        for t in threads:
            t.join()
    for snap, seen in taken:
        assert {k: snap.get(*k) for k in snap.keys} == seen
        assert snap.count == len(seen)
        assert snap.size_bytes == sum(len(swarmstate.dumps(v)) for v in seen.values())


def test_lock_free_writers_racing_folds_leave_every_view_consistent() -> None:
    store = swarmstate.Store()
    stop = threading.Event()

    def writer(i: int) -> None:
        j = 0
        while not stop.is_set() and j < 20_000:
            key = f"k{j % 97}"
            if j % 5 == 4:
                store.delete(f"ns{i}", key)
            else:
                store.set(f"ns{i}", key, [i, j])
            j += 1

    def folder() -> None:
        # Every call below folds the dirty keys while the writers keep going.
        while not stop.is_set():
            store.snapshot()
            store.keys("ns0", reverse=True, limit=3)
            len(store)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=folder))
    for t in threads:
        t.start()
    for t in threads[:3]:
        t.join()
    stop.set()
    threads[3].join()

    final = store.snapshot()
    current = {(ns, key): value for ns in store.namespaces() for key, value in store.items(ns)}
    assert sorted(current) == final.keys
    assert len(store) == len(current) == final.count
    assert final.size_bytes == sum(len(swarmstate.dumps(v)) for v in current.values())
    for (ns, key), value in current.items():
        assert store.get(ns, key) == value == final.get(ns, key)
    # Each writer's last operation on each key is what is stored.
    for i in range(3):
        for k in range(97):
            last = max(j for j in range(20_000) if j % 97 == k)
            expected = None if last % 5 == 4 else [i, last]
            assert store.get(f"ns{i}", f"k{k}") == expected

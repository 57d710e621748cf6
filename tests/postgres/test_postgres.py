"""PostgresStore on a real PostgreSQL server: what the shared contract does not cover.

Connection handling (from_conn_string, pools, closing), schemas per tenant,
setup() racing and inside a transaction, schema versions, secrets, and
several processes writing at once. The store contract itself runs against
PostgresStore through ``store_factory`` in ``tests/contract``.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

import swarmstate
from swarmstate._transfer import transfer
from swarmstate.backends.disk import DiskStore
from swarmstate.backends.postgres import PostgresStore
from swarmstate.backends.postgres import schema as _pg_schema
from tests.support.pgserver import create_schema_at_version

pytestmark = pytest.mark.postgres

SECRET = "s3cr3t-Pa55word"


def _with_password(conninfo: str) -> str:
    return f"{conninfo} password={SECRET}"


def _count_rows(conninfo: str, schema: str, table: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.{}").format(
            sql.Identifier(schema), sql.Identifier(table)
        )
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


# -- connections, pools, lifecycle ---------------------------------------------


def test_from_conn_string_opens_and_closes_its_pool(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    schema = pg_store_factory().schema  # set up by the factory
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as store:
        store.set("ns", "k", {"v": 1})
        assert store.get("ns", "k") == {"v": 1}
        pool = store._session._pool
    assert pool is not None
    assert pool.closed
    with pytest.raises(swarmstate.StoreClosedError):
        store.get("ns", "k")
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as again:
        assert again.get("ns", "k") == {"v": 1}


def test_a_pool_passed_in_is_used_and_left_open(pg_conninfo: str, pg_store_factory: Any) -> None:
    with ConnectionPool(
        pg_conninfo, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
    ) as pool:
        store = pg_store_factory(pool=pool)
        store.set_many([("ns", "a", 1), ("ns", "b", 2)])
        assert store.items("ns") == [("a", 1), ("b", 2)]
        store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_pool_of_non_autocommit_dict_row_connections_still_works(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    with ConnectionPool(
        pg_conninfo, min_size=1, max_size=2, kwargs={"row_factory": dict_row}, open=True
    ) as pool:
        store = pg_store_factory(pool=pool)
        store.set("ns", "k", [1, 2])
        snap = store.snapshot()
        store.delete("ns", "k")
        assert store.keys("ns") == []
        store.restore(snap)
        assert store.get("ns", "k") == [1, 2]
        assert len(store) == 1


def test_conninfo_or_pool_but_not_both_nor_neither(pg_conninfo: str) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError, match="either conninfo or pool"):
        PostgresStore()
    with (
        ConnectionPool(pg_conninfo, min_size=1, open=False) as pool,
        pytest.raises(swarmstate.InvalidArgumentError, match="either conninfo or pool"),
    ):
        PostgresStore(pg_conninfo, pool=pool)


def test_using_a_schema_that_was_never_set_up_says_to_call_setup(pg_conninfo: str) -> None:
    with (
        PostgresStore.from_conn_string(pg_conninfo, schema="never_set_up") as store,
        pytest.raises(swarmstate.StorageError, match=r"setup\(\)"),
    ):
        store.set("ns", "k", 1)


# -- schemas per tenant ----------------------------------------------------------


def test_tenants_in_separate_schemas_do_not_see_each_other(pg_store_factory: Any) -> None:
    alice = pg_store_factory(schema="tenant alice")  # quoted identifier: spaces are fine
    bob = pg_store_factory(schema='tenant "bob"')
    alice.set("ns", "k", "alice")
    bob.set("ns", "k", "bob")
    snap = alice.snapshot()
    bob.clear()
    assert alice.get("ns", "k") == "alice"
    assert bob.get("ns", "k") is None
    assert len(alice) == 1
    assert len(bob) == 0
    assert bob.snapshots() == []
    with pytest.raises(swarmstate.SnapshotError, match="another store"):
        bob.restore(snap)


def test_two_handles_on_one_schema_are_one_store(pg_store_factory: Any) -> None:
    first = pg_store_factory()
    second = pg_store_factory(schema=first.schema)
    first.set("ns", "k", 1)
    snap = first.snapshot()
    second.set("ns", "k", 2)
    assert first.get("ns", "k") == 2
    assert second.snapshots() == [snap]
    second.restore(snap)
    assert first.get("ns", "k") == 1
    assert first.snapshot().parent == snap.id


# -- setup and migrations -----------------------------------------------------------


def _setup_worker(conninfo: str, schema: str, barrier: Any) -> None:
    store = PostgresStore(conninfo, schema=schema)
    try:
        barrier.wait(timeout=60)
        store.setup()
        store.set("ns", f"from-{multiprocessing.current_process().name}", 1)
    finally:
        store.close()


@pytest.mark.slow
def test_setup_raced_by_several_processes_runs_each_migration_once(pg_conninfo: str) -> None:
    schema = "raced_setup"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [
        ctx.Process(target=_setup_worker, args=(pg_conninfo, schema, barrier), name=f"p{i}")
        for i in range(4)
    ]
    try:
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(120)
        assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
        assert _count_rows(pg_conninfo, schema, "migrations") == _pg_schema.SCHEMA_VERSION
        assert _count_rows(pg_conninfo, schema, "meta") == 1
        with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as store:
            assert store.keys("ns") == ["from-p0", "from-p1", "from-p2", "from-p3"]
    finally:
        with psycopg.connect(pg_conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_setup_inside_a_caller_transaction_commits_or_rolls_back_with_it(
    pg_conninfo: str,
) -> None:
    schema = "setup_in_tx"
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as store:
        with psycopg.connect(pg_conninfo) as conn:  # not autocommit: a transaction is open
            conn.execute("SELECT 1")
            store.setup(conn)
            store.setup(conn)  # idempotent within the same transaction too
            conn.rollback()
        with pytest.raises(swarmstate.StorageError, match=r"setup\(\)"):
            store.get("ns", "k")
        try:
            with psycopg.connect(pg_conninfo, autocommit=True) as conn, conn.transaction():
                store.setup(conn)
            store.set("ns", "k", 1)
            assert store.get("ns", "k") == 1
        finally:
            with psycopg.connect(pg_conninfo, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


def test_a_schema_from_a_newer_version_is_refused_and_left_alone(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    store = pg_store_factory()
    store.set("ns", "k", 1)
    newer = _pg_schema.SCHEMA_VERSION + 1
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.migrations (v) VALUES (%s)").format(
                sql.Identifier(store.schema)
            ),
            (newer,),
        )
    with PostgresStore.from_conn_string(pg_conninfo, schema=store.schema) as other:
        with pytest.raises(swarmstate.IncompatibleStoreError, match=f"version {newer}"):
            other.setup()
        with pytest.raises(swarmstate.IncompatibleStoreError, match="upgrade swarmstate"):
            other.get("ns", "k")
    assert _count_rows(pg_conninfo, store.schema, "migrations") == newer
    assert _count_rows(pg_conninfo, store.schema, "entries") == 1


def test_a_schema_at_version_1_is_migrated_in_place_and_keeps_its_data(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    schema = "at_version_1"
    create_schema_at_version(pg_conninfo, schema, 1)
    # Without setup() the store writes through version 1's functions.
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as v1:
        v1.set_many([("ns", "a", 1), ("ns", "b", "two")])
        snap_id = v1.snapshot().id
        v1.set_many([("ns", "a", 10), ("ns", "c", [3])])
        # ensure= (put_ensure comes with version 5) works before the migration too.
        assert v1.set_many([("ix", "x", 0)], ensure=[("ix", "i", 1), ("ns", "a", 0)]) == 2
        assert v1.get_many([("ix", "i"), ("ns", "a")]) == [1, 10]
        v1.delete_many([("ix", "x"), ("ix", "i")])
    store = pg_store_factory(schema=schema)  # setup() migrates to the latest version
    assert _count_rows(pg_conninfo, schema, "migrations") == _pg_schema.SCHEMA_VERSION
    assert store.items("ns") == [("a", 10), ("b", "two"), ("c", [3])]
    assert len(store) == 3
    [snap] = store.snapshots()
    assert snap.id == snap_id
    assert (snap.get("ns", "a"), snap.get("ns", "c")) == (1, None)
    # The current functions on the migrated data: new, replaced and kept keys.
    assert store.set_many([("ns", "a", 11), ("ns", "d", 4)]) == 2
    assert store.set_many([("ns", "b", "kept"), ("ns", "e", 5)], if_absent=True) == 1
    assert store.items("ns") == [("a", 11), ("b", "two"), ("c", [3]), ("d", 4), ("e", 5)]
    assert len(store) == 5
    values = (11, "two", [3], 4, 5)
    assert store.snapshot().size_bytes == sum(len(swarmstate.dumps(v)) for v in values)
    assert snap.get("ns", "a") == 1


@pytest.mark.parametrize("version", [1, 2])
def test_ordered_reads_work_on_a_schema_before_version_3_and_a_graph_once_it_is_set_up(
    pg_conninfo: str, pg_store_factory: Any, version: int
) -> None:
    # read_range, which serves ordered reads from version 3 on, is not there
    # yet: items() and keys() use plain statements. A checkpoint carries tags,
    # which a schema holds from version 10: the saver says to run setup().
    from langgraph.graph import START, StateGraph

    from swarmstate.integrations.langgraph import SwarmStateSaver

    schema = f"ranges_at_version_{version}"
    create_schema_at_version(pg_conninfo, schema, version)
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old:
        old.set_many([("ns", "b", 2), ("ns", "a", 1), ("ns", "c", 3), ("other", "x", 0)])
        assert old.items("ns") == [("a", 1), ("b", 2), ("c", 3)]
        assert old.keys("ns", start="b") == ["b", "c"]
        assert old.keys("ns", reverse=True, limit=2) == ["c", "b"]
        assert old.items("ns", stop="b", raw=True) == [("a", swarmstate.dumps(1))]

        builder = StateGraph(dict)
        builder.add_node("double", lambda state: {"n": state["n"] * 2})
        builder.add_edge(START, "double")
        config: Any = {"configurable": {"thread_id": "t"}}
        with pytest.raises(swarmstate.IncompatibleStoreError, match="setup"):
            builder.compile(checkpointer=SwarmStateSaver(old)).invoke({"n": 21}, config)
        # Another process migrates; this handle keeps reading the same answers.
        migrated = pg_store_factory(schema=schema)
        assert old.items("ns") == [("a", 1), ("b", 2), ("c", 3)]
        graph = builder.compile(checkpointer=SwarmStateSaver(migrated))
        assert graph.invoke({"n": 21}, config) == {"n": 42}
        assert graph.get_state(config).values == {"n": 42}
        assert graph.invoke({"n": 2}, config) == {"n": 4}


def test_large_values_are_compressed_with_lz4_where_the_server_has_it(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    store = pg_store_factory()
    value = "swarm state " * 4_000  # compressible, well past the out-of-line threshold
    store.set("ns", "big", value)
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        try:
            conn.execute("SET default_toast_compression = lz4")
            has_lz4 = True
        except psycopg.Error:  # before 14, or built without lz4: pglz stays
            has_lz4 = False
        query = sql.SQL("SELECT pg_column_compression(value) FROM {}.entries").format(
            sql.Identifier(store.schema)
        )
        row = conn.execute(query).fetchone()
    assert row == ("lz4" if has_lz4 else "pglz",)
    assert store.get("ns", "big") == value


# -- secrets ------------------------------------------------------------------------------


def test_the_password_never_appears_in_repr_logs_or_errors(
    pg_conninfo: str, pg_store_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    schema = pg_store_factory().schema
    # The test server trusts local connections, so the password is accepted and unused.
    store = PostgresStore(_with_password(pg_conninfo), schema=schema)
    try:
        store.set("ns", "k", 1)
        assert store.get("ns", "k") == 1
        assert SECRET not in repr(store)
        assert SECRET not in str(store)
        assert "password" not in repr(store)
    finally:
        store.close()
    bad = f"host=/nonexistent-socket-dir port=5432 dbname=x user=y password={SECRET}"
    with ConnectionPool(bad, min_size=1, open=True, timeout=0.5, reconnect_timeout=1) as pool:
        broken = PostgresStore(pool=pool, schema=schema)
        with pytest.raises(swarmstate.StorageError) as info:
            broken.get("ns", "k")
        chain = [str(info.value), repr(info.value)]
        cause = info.value.__cause__
        while cause is not None:
            chain.append(str(cause))
            cause = cause.__cause__
        assert not [text for text in chain if SECRET in text]
    assert caplog.records, "expected psycopg_pool to log the failed connection"
    assert SECRET not in caplog.text


# -- snapshots' storage cost ---------------------------------------------------------------


def test_without_snapshots_overwrites_do_not_grow_the_table(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    store = pg_store_factory()
    for i in range(50):
        store.set_many([("ns", "a", i), ("ns", "b", i)])
    store.delete("ns", "b")
    assert _count_rows(pg_conninfo, store.schema, "entries") == 1


def test_evicted_snapshots_have_their_rows_collected(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    store = pg_store_factory(max_history=2)
    for i in range(30):
        store.set_many([("ns", "a", i), ("ns", f"k{i}", i)])
        store.delete("ns", f"k{i}")
        store.snapshot()
    # live "a" plus at most one retired version of it per retained snapshot
    assert _count_rows(pg_conninfo, store.schema, "entries") <= 3
    assert [s.id for s in store.snapshots()] == [29, 30]
    assert store.snapshots()[0].get("ns", "a") == 28


# -- values, keys, order ------------------------------------------------------------------------


def test_keys_with_nul_and_edge_code_points_round_trip_in_code_point_order(
    pg_store_factory: Any,
) -> None:
    store = pg_store_factory()
    names = ["", "\x00", "a\x00b", "\ud7ff", "\ue000", "\uffff", "\U0001f600", "\x7f"]
    store.set_many([(name, name, i) for i, name in enumerate(names)])
    assert store.namespaces() == sorted(names)
    assert store.namespaces(prefix="a") == ["a\x00b"]
    for i, name in enumerate(names):
        assert store.keys(name) == [name]
        assert store.get(name, name) == i


def test_a_bad_value_in_a_batch_stores_nothing(pg_store_factory: Any) -> None:
    store = pg_store_factory()
    store.set("ns", "keep", 1)
    with pytest.raises(swarmstate.UnsupportedTypeError):
        store.set_many([("ns", "a", 1), ("ns", "b", object())])
    assert store.items("ns") == [("keep", 1)]


def test_missing_psycopg_names_the_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "try:\n"
        "    import swarmstate.backends.postgres\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingDependencyError")
    assert 'pip install "pyswarmstate[postgres]"' in out.stdout


# -- concurrency -------------------------------------------------------------------------------


def test_threads_sharing_a_store_lose_no_writes(pg_store_factory: Any) -> None:
    store = pg_store_factory()
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(40):
                store.set_many([(f"own/{t}", f"{i:04d}", i), ("shared", f"{t}/{i:04d}", i)])
                store.set("hot", "k", t)  # every thread overwrites one key
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [store.count(f"own/{t}") for t in range(6)] == [40] * 6
    assert store.count("shared") == 240
    assert len(store) == 6 * 40 + 240 + 1
    assert store.snapshot().count == len(store)


def test_snapshots_taken_during_concurrent_writes_are_exact(pg_store_factory: Any) -> None:
    store = pg_store_factory()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            i = 0
            while not stop.is_set():
                store.set_many([("w", f"{t}/{i:05d}", i), ("hot", "k", [t, i])])
                i += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    try:
        snaps = [store.snapshot() for _ in range(25)]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    for snap in snaps:
        # The running totals recorded at the snapshot match the rows it sees:
        # no write stamped before the snapshot committed after it.
        assert len(snap.keys) == snap.count
    for base, later in itertools.pairwise(snaps):
        diff = later.diff(base)
        assert diff["removed"] == []
        assert later.count - base.count == len(diff["added"])


ROUNDS = 15
WORKERS = 4


def _checkpoint_worker(conninfo: str, schema: str, me: int, barrier: Any, failures: Any) -> None:
    """Write this round's checkpoint, wait for everyone, read everyone's latest."""
    store = PostgresStore(conninfo, schema=schema)  # its own pool
    try:
        for r in range(ROUNDS):
            cid = f"{r:06d}"
            store.set_many(
                [
                    (f"thread/{me}", cid, {"round": r, "by": me}),
                    (f"blobs/{me}", cid, b"x" * 2000),
                    ("thread/shared", f"{cid}.{me}", {"round": r, "by": me}),
                    ("hot", "latest-writer", me),
                ]
            )
            barrier.wait(timeout=60)
            for other in range(WORKERS):
                latest = store.items(f"thread/{other}", reverse=True, limit=1)
                if latest != [(cid, {"round": r, "by": other})]:
                    failures.put(f"worker {me} round {r}: latest of {other} is {latest}")
            shared = store.keys("thread/shared", start=cid, stop=f"{r + 1:06d}")
            if shared != [f"{cid}.{w}" for w in range(WORKERS)]:
                failures.put(f"worker {me} round {r}: shared thread has {shared}")
            barrier.wait(timeout=60)
    finally:
        store.close()


@pytest.mark.slow
def test_four_processes_with_their_own_pools_lose_nothing_and_read_each_other(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    schema = pg_store_factory().schema
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    failures = ctx.Queue()
    procs = [
        ctx.Process(target=_checkpoint_worker, args=(pg_conninfo, schema, me, barrier, failures))
        for me in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(300)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == []
    assert [proc.exitcode for proc in procs] == [0] * WORKERS
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as store:
        for me in range(WORKERS):
            assert store.count(f"thread/{me}") == ROUNDS
            assert store.count(f"blobs/{me}") == ROUNDS
        assert store.count("thread/shared") == ROUNDS * WORKERS
        assert store.get("hot", "latest-writer") in range(WORKERS)
        assert len(store) == 3 * ROUNDS * WORKERS + 1
        assert store.snapshot().size_bytes == sum(
            len(swarmstate.dumps(value))
            for ns in store.namespaces()
            for _, value in store.items(ns)
        )


# -- transfer ----------------------------------------------------------------------------------


def _fill(store: swarmstate.BaseStore) -> dict[tuple[str, str], Any]:
    data: dict[tuple[str, str], Any] = {}
    for t in range(5):
        for i in range(23):
            data[(f"thread\x00{t}", f"{i:05d}")] = {"t": t, "i": i, "blob": b"\x00" * i}
    data[("", "")] = None
    data[("\U0001f600", "k\x00")] = [1, "two"]
    store.set_many([(ns, key, value) for (ns, key), value in data.items()])
    return data


def _dump(store: swarmstate.BaseStore) -> dict[tuple[str, str], Any]:
    return {(ns, key): value for ns in store.namespaces() for key, value in store.items(ns)}


def test_transfer_memory_to_postgres_and_back(pg_store_factory: Any) -> None:
    source = swarmstate.Store()
    data = _fill(source)
    pg = pg_store_factory()
    assert transfer(source, pg, batch_size=7) == len(data)
    assert _dump(pg) == data
    back = swarmstate.Store()
    assert transfer(pg, back, batch_size=1) == len(data)
    assert _dump(back) == data


def test_transfer_disk_file_to_postgres_and_back(pg_store_factory: Any, tmp_path: Path) -> None:
    with DiskStore(tmp_path / "state.db") as disk:
        data = _fill(disk)
        pg = pg_store_factory()
        assert transfer(disk, pg) == len(data)
    assert _dump(pg) == data
    with DiskStore(tmp_path / "back.db") as again:
        assert transfer(pg, again, batch_size=10) == len(data)
        assert _dump(again) == data


def test_transfer_refuses_a_bad_batch_size_or_the_same_store() -> None:
    store = swarmstate.Store()
    with pytest.raises(swarmstate.InvalidArgumentError, match="batch_size"):
        transfer(store, swarmstate.Store(), batch_size=0)
    with pytest.raises(swarmstate.InvalidArgumentError, match="same store"):
        transfer(store, store)


# -- closing while in use ------------------------------------------------------------------


def _backends(conn: psycopg.Connection[Any]) -> set[int]:
    """Server processes serving clients of this database, this connection's excepted."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchall()
    return {int(pid) for (pid,) in rows}


@pytest.mark.parametrize("trial", range(20))
def test_close_while_another_thread_writes_leaves_no_connection_open(
    pg_conninfo: str, pg_store_factory: Any, trial: int
) -> None:
    schema = pg_store_factory().schema
    with psycopg.connect(pg_conninfo, autocommit=True) as monitor:
        before = _backends(monitor)
        store = PostgresStore(pg_conninfo, schema=schema)
        started, ended = threading.Event(), []

        def write_until_refused() -> None:
            try:
                i = 0
                while True:
                    store.set("ns", f"k{i % 50}", b"x" * 20_000)
                    i += 1
                    if i == 5:
                        started.set()
            except BaseException as exc:  # checked by the main thread
                ended.append(exc)
            finally:
                started.set()

        writer = threading.Thread(target=write_until_refused)
        writer.start()
        assert started.wait(timeout=60)
        store.close()  # raises nothing, with the writer inside a call
        writer.join(timeout=60)
        assert not writer.is_alive()
        assert len(ended) == 1
        assert isinstance(ended[0], swarmstate.StoreClosedError), repr(ended[0])
        assert store._session._pool is not None
        assert store._session._pool.closed
        # A server process leaves pg_stat_activity once it has exited: wait for it.
        for _ in range(200):
            if _backends(monitor) <= before:
                break
            threading.Event().wait(0.05)
        assert _backends(monitor) <= before
        store.close()


def test_require_works_before_setup_brings_the_schema_to_version_7(
    pg_conninfo: str, pg_store_factory: Any
) -> None:
    # Before version 7 there is no put_checked: the check and the write run in
    # one transaction of several round trips, with the same answers.
    schema = "at_version_6"
    create_schema_at_version(pg_conninfo, schema, 6)
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as v6:
        v6.set_many([("ns", "a", 1)], require=[("ns", "a", swarmstate.ABSENT)])
        raw = v6.items("ns", raw=True)[0][1]
        v6.set_many([("ns", "a", 2)], ensure=[("ix", "i", 0)], require=[("ns", "a", raw)])
        with pytest.raises(swarmstate.ConflictError, match="'a'"):
            v6.set_many([("ns", "b", 3)], require=[("ns", "a", raw)])
        assert v6.get_many([("ns", "a"), ("ns", "b"), ("ix", "i")]) == [2, None, 0]
    store = pg_store_factory(schema=schema)
    assert _count_rows(pg_conninfo, schema, "migrations") == _pg_schema.SCHEMA_VERSION
    with pytest.raises(swarmstate.ConflictError, match="'a'"):
        store.set_many([("ns", "b", 3)], require=[("ns", "a", raw)])
    store.set_many(
        [("ns", "b", 3)], require=[("ns", "a", swarmstate.PRESENT), ("ns", "b", swarmstate.ABSENT)]
    )
    assert store.get("ns", "b") == 3
    # A batch with a long name takes the transaction path on version 7 too.
    long = "k" * 3000
    store.set_many([("ns", long, 4)], require=[("ns", long, swarmstate.ABSENT)])
    with pytest.raises(swarmstate.ConflictError):
        store.set_many([("ns", long, 5)], require=[("ns", long, swarmstate.ABSENT)])
    assert store.get("ns", long) == 4


@pytest.mark.parametrize("version", [6, 8])
def test_write_works_before_setup_brings_the_schema_to_version_9(
    pg_conninfo: str, pg_store_factory: Any, version: int
) -> None:
    # Before version 9 there is no write_all: the conditions are read under
    # the store's lock and the writes follow in the same transaction.
    schema = f"write_at_version_{version}"
    create_schema_at_version(pg_conninfo, schema, version)
    long = "k" * 3000
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old:
        old.set_many([("t/a", "k", 1), ("t/b", "k", 2), ("log", "b", 3), ("ns", long, 4)])
        before = old.snapshot()
        for broken in (
            swarmstate.Absent("t/a", "k"),
            swarmstate.Present("t/a", "x"),
            swarmstate.Holds("log", "b", swarmstate.dumps(4)),
            swarmstate.Empty("log", "a", "c"),
            swarmstate.Absent("ns", long),
        ):
            with pytest.raises(swarmstate.ConflictError, match=type(broken).__name__):
                old.write(swarmstate.Transaction(conditions=[broken], prefix_deletes=["t/"]))
        got = old.write(
            swarmstate.Transaction(
                conditions=[
                    swarmstate.Present("ns", long),
                    swarmstate.Holds("log", "b", swarmstate.dumps(3)),
                    swarmstate.Empty("log", "c"),
                    swarmstate.Empty("log", None, "b"),
                ],
                prefix_deletes=["t/"],
                deletes=[("log", "b"), ("log", "b")],
                sets=[("t/a", "k", 10), ("ns", long, 11)],
            )
        )
        assert got == swarmstate.WriteResult(written=2, deleted=3)
        assert (
            old.write(swarmstate.Transaction(sets=[("t/a", "k", 12)], if_absent=True)).written == 0
        )
        assert old.snapshot().diff(before) == {
            "added": [],
            "removed": [("log", "b"), ("t/b", "k")],
            "changed": [("ns", long), ("t/a", "k")],
        }
        assert len(old) == 2
    store = pg_store_factory(schema=schema)  # setup() brings it to the schema in force
    store.restore(before)
    assert store.get_many([("t/a", "k"), ("t/b", "k"), ("log", "b"), ("ns", long)]) == [1, 2, 3, 4]
    with pytest.raises(swarmstate.ConflictError, match="Empty"):
        store.write(
            swarmstate.Transaction(
                conditions=[swarmstate.Empty("log", "a", "c")], sets=[("x", "y", 1)]
            )
        )
    assert store.write(swarmstate.Transaction(prefix_deletes=["t/"])) == swarmstate.WriteResult(
        0, 2
    )


@pytest.mark.parametrize("version", [6, 9])
def test_tags_wait_for_setup_to_bring_the_schema_to_version_10(
    pg_conninfo: str, pg_store_factory: Any, version: int
) -> None:
    # Before version 10 the entries have no tag columns: tagged() finds none,
    # a write with tags is refused naming setup(), and writes without go on.
    schema = f"tags_at_version_{version}"
    create_schema_at_version(pg_conninfo, schema, version)
    long = "k" * 3000
    with PostgresStore.from_conn_string(pg_conninfo, schema=schema) as old:
        old.set_many([("t/a", "k", 1), ("ns", long, 2)])
        before = old.snapshot()
        assert old.tagged("order") == []
        assert old.tagged("group", reverse=True, limit=1) == []
        for refused in (
            swarmstate.Transaction(sets=[("t/a", "k", 3, swarmstate.Tags(order="o"))]),
            swarmstate.Transaction(tag_deletes=[("order", None, None)]),
        ):
            with pytest.raises(
                swarmstate.IncompatibleStoreError, match=r"PostgresStore\.setup\(\)"
            ):
                old.write(refused)
        assert old.get("t/a", "k") == 1
        # A set whose Tags are empty carries none: a plain write.
        assert (
            old.write(swarmstate.Transaction(sets=[("t/b", "k", 3, swarmstate.Tags())])).written
            == 1
        )
    store = pg_store_factory(schema=schema)  # setup() brings it to the schema in force
    assert store.get_many([("t/a", "k"), ("t/b", "k"), ("ns", long)]) == [1, 3, 2]
    assert store.tagged("order") == []
    store.write(
        swarmstate.Transaction(
            sets=[
                ("t/a", "k", 4, swarmstate.Tags(order="o1")),
                ("ns", long, 5, swarmstate.Tags(order="o2")),
            ]
        )
    )
    assert store.tagged("order") == [("o1", "t/a", "k"), ("o2", "ns", long)]
    store.restore(before)  # a snapshot taken before the migration
    assert store.get_many([("t/a", "k"), ("t/b", "k"), ("ns", long)]) == [1, None, 2]
    assert store.tagged("order") == []


def test_a_bad_conninfo_fails_at_once_with_its_cause(pg_conninfo: str) -> None:
    from swarmstate.integrations.langgraph import SwarmStateSaver

    started = time.monotonic()
    with pytest.raises(swarmstate.InvalidArgumentError, match='missing "=" after "dbname"'):
        PostgresStore("host=localhost dbname")
    missing = psycopg.conninfo.make_conninfo(pg_conninfo, dbname="no_such_database")
    with pytest.raises(swarmstate.StorageError, match='database "no_such_database" does not exist'):
        PostgresStore(missing)
    with pytest.raises(swarmstate.StorageError, match="does not exist"):
        SwarmStateSaver.from_conn_string(missing)
    assert time.monotonic() - started < 10  # not the pool's 30-second timeout

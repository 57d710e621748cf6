"""PostgresStore's async methods on a real server: the blocking methods' answers, awaited.

Every async method against its blocking twin (random operations on two
schemas, results and errors compared, on the schema in force and on schemas
earlier releases left, whose writes take other paths); cancelled writes
under load (each batch whole or absent, no connection left out, no
transaction left open); 64 awaits on a pool of 4; opening and closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import swarmstate
from swarmstate import ABSENT, PRESENT, Absent, Empty, Holds, Present, Tags, Transaction
from swarmstate.backends.postgres import PostgresStore
from tests.support.pgserver import PgStoreFactory, create_schema_at_version

pytestmark = pytest.mark.postgres

# From none at all to enough for a call queued behind the others: some
# calls are cancelled waiting for a connection, some mid-write, some finish.
TIMEOUTS = [0.0, 0.0005, 0.001, 0.002, 0.004, 0.01, 0.05, 2.0]
LONG = "L" * 1100  # longer than the index keeps (HEAD_BYTES): stored with its long form
NAMESPACES = ["a", "ab", "b", "é", "t/1", LONG]
KEYS = ["", "k1", "k2", "k10", "z", "ß", LONG + "k"]


@asynccontextmanager
async def opened(
    factory: PgStoreFactory, version: int | None = None, **kwargs: Any
) -> AsyncIterator[PostgresStore]:
    """A set-up store on a fresh schema (or at an earlier release's ``version``), aclosed after."""
    if version is None:
        store = factory(**kwargs)
    else:
        schema = f"v{version}_{random.getrandbits(48):012x}"
        create_schema_at_version(factory.conninfo, schema, version)
        store = PostgresStore(factory.conninfo, schema=schema, **kwargs)
        factory.stores.append(store)
        factory.schemas.add(schema)
    try:
        yield store
    finally:
        await store.aclose()


# -- the same answers --------------------------------------------------------------


def _value(rng: random.Random) -> Any:
    return rng.choice([None, 0, -7, 2**40, 1.5, "", "text", b"\x00\xff", [1, "x"], {"m": [1]}])


def _name(rng: random.Random, names: list[str]) -> str:
    return rng.choice(names[:-1]) if rng.random() < 0.9 else names[-1]


def _bound(rng: random.Random) -> str | None:
    return rng.choice([None, None, "", "k1", "k2", "z", "é"])


def _tags(rng: random.Random) -> Tags | None:
    if rng.random() < 0.5:
        return None
    return Tags(order=rng.choice([None, "o1", "o2", "o3"]), group=rng.choice([None, "g1", "g2"]))


def _entry(rng: random.Random, raw: bool, tags: bool = False) -> tuple[Any, ...]:
    value = _value(rng)
    entry: tuple[Any, ...] = (_name(rng, NAMESPACES), _name(rng, KEYS))
    entry += (swarmstate.dumps(value) if raw else value,)
    tag = _tags(rng) if tags else None
    return entry if tag is None else (*entry, tag)


def _condition(rng: random.Random, known: dict[tuple[str, str], bytes]) -> Any:
    ns, key = _name(rng, NAMESPACES), _name(rng, KEYS)
    kind = rng.randrange(4)
    if kind == 0:
        return Absent(ns, key)
    if kind == 1:
        return Present(ns, key)
    if kind == 2:
        data = known.get((ns, key)) if rng.random() < 0.7 else None
        return Holds(ns, key, data if data is not None else swarmstate.dumps(1))
    return Empty(ns, _bound(rng), _bound(rng))


def _operation(
    rng: random.Random, known: dict[tuple[str, str], bytes]
) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """One call: ``(method of the blocking store, args, kwargs)``; its twin is ``"a" + method``."""
    kind = rng.randrange(12)
    if kind < 3:
        raw = rng.random() < 0.3
        kwargs: dict[str, Any] = {"if_absent": rng.random() < 0.3, "raw": raw}
        if rng.random() < 0.3:
            kwargs["ensure"] = [_entry(rng, raw) for _ in range(rng.randrange(1, 3))]
        if rng.random() < 0.3:
            pairs = [(_name(rng, NAMESPACES), _name(rng, KEYS)) for _ in range(2)]
            kwargs["require"] = [
                (ns, key, rng.choice([ABSENT, PRESENT, known.get((ns, key), b"\x01")]))
                for ns, key in pairs
            ]
        items = [_entry(rng, raw) for _ in range(rng.randrange(0, 12))]
        return "set_many", (items,), kwargs
    if kind < 5:
        raw = rng.random() < 0.3
        txn = Transaction(
            conditions=[_condition(rng, known) for _ in range(rng.randrange(3))],
            sets=[_entry(rng, raw, tags=True) for _ in range(rng.randrange(6))],
            deletes=[(_name(rng, NAMESPACES), _name(rng, KEYS)) for _ in range(rng.randrange(3))],
            prefix_deletes=[rng.choice(["t/", "ab", "zz"])] if rng.random() < 0.2 else [],
            tag_deletes=[("order", "o1", "o2")] if rng.random() < 0.2 else [],
            if_absent=rng.random() < 0.2,
            raw=raw,
        )
        return "write", (txn,), {}
    if kind == 5:
        pairs = [(_name(rng, NAMESPACES), _name(rng, KEYS)) for _ in range(rng.randrange(4))]
        return "get_many", (pairs,), {"raw": rng.random() < 0.5}
    if kind == 6:
        return "get", (_name(rng, NAMESPACES), _name(rng, KEYS)), {"default": "none"}
    if kind in (7, 8):
        kwargs = {"start": _bound(rng), "stop": _bound(rng), "reverse": rng.random() < 0.5}
        kwargs["limit"] = rng.choice([None, 0, 1, 3])
        if kind == 7:
            return "keys", (_name(rng, NAMESPACES),), kwargs
        return "items", (_name(rng, NAMESPACES),), {**kwargs, "raw": rng.random() < 0.5}
    if kind == 9:
        kwargs = {"start": rng.choice([None, "o1", "o2", "g1"]), "stop": rng.choice([None, "o3"])}
        kwargs |= {"reverse": rng.random() < 0.5, "limit": rng.choice([None, 0, 2])}
        return "tagged", (rng.choice(["order", "group"]),), kwargs
    if kind == 10:
        return "namespaces", (), {"prefix": rng.choice([None, "", "a", "t/", "L"])}
    # Arguments every store refuses, each its own way.
    return rng.choice(
        [
            ("items", ("a",), {"limit": -1}),
            ("items", ("a",), {"raw": "yes"}),
            ("keys", (5,), {}),
            ("keys", ("a",), {"reverse": 1}),
            ("get", ("\ud800", "k"), {}),
            ("get_many", ([("a",)],), {}),
            ("tagged", ("colour",), {}),
            ("tagged", ("order",), {"start": "x" * 600}),
            ("set_many", ([("a", "k", object())],), {}),
            ("set_many", ([("a", "k", "not bytes")],), {"raw": True}),
            ("set_many", ([],), {"if_absent": "no"}),
            ("write", ("not a transaction",), {}),
            ("write", (Transaction(conditions=["no"]),), {}),
            ("namespaces", (), {"prefix": 3}),
        ]
    )


def _outcome(call: Callable[..., Any], args: Any, kwargs: Any, schema: str) -> Any:
    try:
        return ("ok", call(*args, **kwargs))
    except swarmstate.SwarmStateError as exc:
        return ("error", type(exc), str(exc).replace(schema, "<schema>"))


async def _aoutcome(call: Callable[..., Any], args: Any, kwargs: Any, schema: str) -> Any:
    try:
        return ("ok", await call(*args, **kwargs))
    except swarmstate.SwarmStateError as exc:
        return ("error", type(exc), str(exc).replace(schema, "<schema>"))


@pytest.mark.parametrize("version", [None, 2, 4, 6, 8, 9], ids=lambda v: f"v{v or 'now'}")
async def test_every_async_method_answers_as_its_blocking_twin(
    pg_store_factory: PgStoreFactory, version: int | None
) -> None:
    # Before version 6 a long name is refused, before 10 a tag; before 9 a
    # write takes several round trips in one transaction, before 7 a
    # condition is read under the lock, before 5 ensure is two statements,
    # before 3 a range is a plain statement: every path the plans take.
    rng = random.Random(version or 0)
    async with (
        opened(pg_store_factory, version) as blocking,
        opened(pg_store_factory, version) as awaited,
    ):
        known: dict[tuple[str, str], bytes] = {}
        kinds: set[str] = set()
        for _ in range(160):
            method, args, kwargs = _operation(rng, known)
            ours = _outcome(getattr(blocking, method), args, kwargs, blocking.schema)
            theirs = await _aoutcome(getattr(awaited, "a" + method), args, kwargs, awaited.schema)
            assert theirs == ours, (method, args, kwargs)
            kinds.add(f"{method}:{ours[0]}")
            for ns in blocking.namespaces():
                known.update(((ns, k), v) for k, v in blocking.items(ns, raw=True))
        # Both stores hold the same; each read the same blocking and awaited.
        for store in (blocking, awaited):
            names = store.namespaces()
            assert await store.anamespaces() == names
            for ns in names:
                assert await store.aitems(ns, raw=True) == blocking.items(ns, raw=True)
        assert {"set_many:ok", "write:ok", "items:ok", "write:error"} <= kinds


async def test_a_schema_without_tables_fails_awaited_as_it_does_blocking(
    pg_store_factory: PgStoreFactory, pg_conninfo: str
) -> None:
    store = PostgresStore(pg_conninfo, schema="never_set_up")
    pg_store_factory.stores.append(store)
    try:
        with pytest.raises(swarmstate.StorageError, match=r"setup\(\)") as blocking:
            store.items("ns")
        with pytest.raises(swarmstate.StorageError, match=r"setup\(\)") as awaited:
            await store.aitems("ns")
        assert str(awaited.value) == str(blocking.value)
        assert type(awaited.value.__cause__) is type(blocking.value.__cause__)
    finally:
        await store.aclose()


# -- cancellation ----------------------------------------------------------------


async def _settled(store: PostgresStore, conninfo: str, application: str) -> None:
    """No connection of ``store``'s async pool out, no transaction of its connections open."""
    pool = store._async.pool
    assert pool is not None
    size = pool.max_size
    async with AsyncExitStack() as stack:
        # Every connection can be taken at once: none was left checked out.
        held = [await stack.enter_async_context(pool.connection(timeout=10)) for _ in range(size)]
        assert len(held) == size
    stats = pool.get_stats()
    assert stats["pool_available"] == stats["pool_size"]
    open_transactions = -1
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for _ in range(50):  # a closed connection's server process may take a moment to exit
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                "AND state LIKE 'idle in transaction%%'",
                (application,),
            ).fetchone()
            assert row is not None
            open_transactions = row[0]
            if open_transactions == 0:
                break
            await asyncio.sleep(0.1)
    assert open_transactions == 0


@pytest.mark.parametrize("version", [None, 8], ids=["one-statement", "in-steps-v8"])
async def test_a_cancelled_write_wrote_its_whole_batch_or_nothing_and_left_nothing_open(
    pg_store_factory: PgStoreFactory, pg_conninfo: str, version: int | None
) -> None:
    application = f"ss_cancel_{random.getrandbits(32):08x}"
    conninfo = f"{pg_conninfo} application_name={application}"
    factory = PgStoreFactory(conninfo)
    rng = random.Random(7)
    outcomes: dict[str, int] = {"done": 0, "cancelled": 0}
    try:
        async with opened(factory, version, min_size=4, max_size=4) as store:

            async def batch(n: int) -> None:
                sets = [(f"batch/{n}", f"k{j:02d}", {"j": j, "pad": "x" * 200}) for j in range(24)]
                txn = Transaction(
                    conditions=[Absent("index", f"{n}")], sets=[*sets, ("index", f"{n}", n)]
                )
                try:
                    await asyncio.wait_for(store.awrite(txn), timeout=rng.choice(TIMEOUTS))
                    outcomes["done"] += 1
                except TimeoutError:
                    outcomes["cancelled"] += 1

            for wave in range(8):
                await asyncio.gather(*(batch(wave * 48 + i) for i in range(48)))
            await _settled(store, conninfo, application)
            for n in range(8 * 48):
                count = len(await store.aitems(f"batch/{n}"))
                indexed = await store.aget("index", f"{n}")
                assert (count, indexed) in ((0, None), (24, n)), n
            # The store still serves writes on the same pool.
            assert (await store.awrite(Transaction(sets=[("after", "k", 1)]))).written == 1
    finally:
        factory.cleanup()
    assert outcomes["cancelled"] > 0
    assert outcomes["done"] > 0


async def test_a_cancelled_conditional_set_many_leaves_nothing_open(
    pg_store_factory: PgStoreFactory, pg_conninfo: str
) -> None:
    application = f"ss_cancel_{random.getrandbits(32):08x}"
    conninfo = f"{pg_conninfo} application_name={application}"
    factory = PgStoreFactory(conninfo)
    rng = random.Random(3)
    try:
        async with opened(factory, 6, min_size=2, max_size=4) as store:  # v6: required() path

            async def put(n: int) -> None:
                items = [(f"s/{n}", f"k{j}", j) for j in range(10)]
                require = [(f"s/{n}", "k0", ABSENT)]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        store.aset_many(items, require=require), timeout=rng.choice(TIMEOUTS)
                    )

            await asyncio.gather(*(put(n) for n in range(96)))
            await _settled(store, conninfo, application)
            for n in range(96):
                assert len(await store.akeys(f"s/{n}")) in (0, 10)
    finally:
        factory.cleanup()


# -- concurrency -------------------------------------------------------------------


async def test_64_awaits_share_a_pool_of_4_and_hold_no_thread(
    pg_store_factory: PgStoreFactory,
) -> None:
    async with opened(pg_store_factory, min_size=4, max_size=4) as store:
        await store.aopen()
        threads = threading.active_count()
        seen: list[int] = []

        async def user(n: int) -> None:
            for turn in range(5):
                await store.aset_many([(f"user/{n}", f"t{turn}", {"n": n, "turn": turn})])
                seen.append(threading.active_count())
                latest = await store.aitems(f"user/{n}", reverse=True, limit=1)
                assert latest == [(f"t{turn}", {"n": n, "turn": turn})]
                result = await store.awrite(
                    Transaction(
                        conditions=[Present(f"user/{n}", f"t{turn}")], sets=[("seen", f"{n}", turn)]
                    )
                )
                assert result.written == 1

        await asyncio.gather(*(user(n) for n in range(64)))
        assert max(seen) == threads  # an awaited call runs on no worker thread
        assert store._async.pool is not None
        assert store._async.pool.max_size == 4
        assert await store.aget_many([("seen", f"{n}") for n in range(64)]) == [4] * 64
        assert len(await store.anamespaces("user/")) == 64


# -- opening and closing -------------------------------------------------------------


async def test_aclose_closes_both_pools_and_every_later_call_refuses(
    pg_store_factory: PgStoreFactory,
) -> None:
    store = pg_store_factory(min_size=1, max_size=3, timeout=5)
    await store.aset_many([("ns", "k", 1)])
    pool, sync_pool = store._async.pool, store._session._pool
    assert pool is not None
    assert sync_pool is not None
    assert (pool.max_size, sync_pool.max_size, pool.timeout, sync_pool.timeout) == (3, 3, 5, 5)
    await store.aclose()
    await store.aclose()  # idempotent
    assert pool.closed
    assert sync_pool.closed
    with pytest.raises(swarmstate.StoreClosedError):
        await store.aitems("ns")
    with pytest.raises(swarmstate.StoreClosedError):
        store.items("ns")


async def test_async_with_and_afrom_conn_string_close_with_aclose(
    pg_store_factory: PgStoreFactory, pg_conninfo: str
) -> None:
    schema = pg_store_factory().schema
    async with PostgresStore.afrom_conn_string(pg_conninfo, schema=schema, max_size=2) as store:
        pool = store._async.pool
        assert pool is not None
        assert not pool.closed
        await store.awrite(Transaction(sets=[("ns", "k", {"v": 1})]))
    assert pool.closed
    async with PostgresStore(pg_conninfo, schema=schema) as again:
        assert await again.aget("ns", "k") == {"v": 1}
        pool = again._async.pool
    assert pool is not None
    assert pool.closed


async def test_pools_passed_in_are_used_and_left_open(
    pg_store_factory: PgStoreFactory, pg_conninfo: str
) -> None:
    schema = pg_store_factory().schema
    async with AsyncConnectionPool(
        pg_conninfo, min_size=1, max_size=2, kwargs={"autocommit": True}, open=False
    ) as pool:
        store = PostgresStore(async_pool=pool, schema=schema)
        await store.aset_many([("ns", "a", 1)])
        assert await store.aitems("ns") == [("a", 1)]
        with pytest.raises(swarmstate.InvalidArgumentError, match="async_pool= alone"):
            store.items("ns")
        await store.aclose()
        assert not pool.closed
    with ConnectionPool(pg_conninfo, min_size=1, max_size=2, kwargs={"autocommit": True}) as sync:
        store = PostgresStore(pool=sync, schema=schema)
        assert store.items("ns") == [("a", 1)]
        with pytest.raises(swarmstate.InvalidArgumentError, match="async_pool="):
            await store.aitems("ns")
        await store.aclose()
        assert not sync.closed


def test_pool_settings_are_checked(pg_conninfo: str) -> None:
    for bad in ({"min_size": -1}, {"max_size": 0}, {"min_size": 3, "max_size": 2}):
        with pytest.raises(swarmstate.InvalidArgumentError, match="size"):
            PostgresStore(pg_conninfo, **bad)
    for timeout in (0, -1.0, float("nan"), "5"):
        with pytest.raises(swarmstate.InvalidArgumentError, match="timeout"):
            PostgresStore(pg_conninfo, timeout=timeout)  # type: ignore[arg-type]
    pool: ConnectionPool[Any] = ConnectionPool(pg_conninfo, min_size=0, max_size=1, open=False)
    with pytest.raises(swarmstate.InvalidArgumentError, match="on the pool you pass"):
        PostgresStore(pool=pool, max_size=4)
    with pytest.raises(swarmstate.InvalidArgumentError, match="none given"):
        PostgresStore()


async def test_close_from_the_loop_closes_the_async_pool_on_it(
    pg_store_factory: PgStoreFactory,
) -> None:
    store = pg_store_factory()
    await store.aopen()
    pool = store._async.pool
    assert pool is not None
    store.close()  # a blocking close called on the loop: the pool closes in a task of it
    closing = store._async._closing
    assert closing is not None
    await closing
    assert pool.closed


def test_close_while_its_loop_does_not_run_warns_and_a_second_loop_is_refused(
    pg_store_factory: PgStoreFactory,
) -> None:
    # Not asyncio.run(): ending a loop with the pool open can hang there, as
    # psycopg_pool's workers swallow the cancellation (close the pool first).
    store = pg_store_factory()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(store.aset_many([("ns", "k", 1)]))
        with pytest.raises(swarmstate.StorageError, match="another event loop"):
            asyncio.run(store.aitems("ns"))
        with pytest.warns(ResourceWarning, match="aclose"):
            store.close()
        store.close()  # warned once
        pool = store._async.pool
        assert pool is not None
        assert not pool.closed
        loop.run_until_complete(pool.close())
    finally:
        loop.close()

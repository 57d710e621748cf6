"""Reads are bounded by what a writer can write: planted rows cannot make a reader grow.

Each test runs a real graph, then overwrites some of its rows through the
store's own API with what no writer makes (a compressed row claiming more
than a store holds in one value, a value naming far more parts than a writer
stores, parts joining to more than one value), and reads the thread back
with a fresh saver and the command line: the read is ``CorruptDataError``
(``check`` lists it) and its peak memory stays small.
"""

from __future__ import annotations

import contextlib
import functools
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_sharing import chat_graph, talk

import swarmstate
from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver, sharing
from swarmstate.integrations.langgraph.format import entry, keys
from swarmstate.integrations.langgraph.values import CHUNKS

MakeStore = Callable[[], swarmstate.BaseStore]
PEAK_LIMIT = 50 * 2**20
"""A read of planted rows may allocate at most this much (the rows themselves are small)."""
TOO_LARGE = 2 * 10**9
"""A claimed size past the most a store holds in one value."""


@functools.cache
def zeros(size: int) -> bytes:
    """``size`` zero bytes deflated (about a thousandth of ``size``), made a megabyte at a time."""
    deflate = zlib.compressobj(9)
    block = bytes(2**20)
    out = [deflate.compress(block) for _ in range(size // len(block))]
    out.append(deflate.compress(bytes(size % len(block))))
    out.append(deflate.flush())
    return b"".join(out)


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def peak_of(read: Callable[[], object]) -> int:
    """The most memory ``read`` had allocated at once, in bytes (it may raise)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with contextlib.suppress(swarmstate.CorruptDataError):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def filled(store: swarmstate.BaseStore) -> SwarmStateSaver:
    """``store`` after two turns of a real chat graph on thread ``t``."""
    saver = SwarmStateSaver(store)
    talk(chat_graph(saver), "t", 2)
    return saver


def latest_entry(store: swarmstate.BaseStore) -> tuple[str, str]:
    """``(namespace, key)`` of thread ``t``'s newest checkpoint entry."""
    namespace = keys.scope("t", "")
    key_names = [key for key in store.keys(namespace) if keys.parse_entry_key(key)[1]]
    return namespace, key_names[-1]


def chunk_keys(store: swarmstate.BaseStore) -> list[str]:
    return store.keys(keys.chunks("t"))


def assert_bounded(store: swarmstate.BaseStore) -> None:
    """A fresh saver's reads of thread ``t`` are CorruptDataError, each with a small peak."""
    fresh = SwarmStateSaver(store)
    with pytest.raises(swarmstate.CorruptDataError):
        fresh.get_tuple(cfg("t"))
    reads: list[Callable[[], object]] = [
        lambda: SwarmStateSaver(store).get_tuple(cfg("t")),
        lambda: list(SwarmStateSaver(store).list(cfg("t"))),
        lambda: SwarmStateSaver(store).copy_thread("t", "copy"),
        lambda: SwarmStateSaver(store).get_delta_channel_history(
            config=cfg("t"), channels=["messages"]
        ),
    ]
    for read in reads:
        assert peak_of(read) < PEAK_LIMIT


def test_a_chunk_claiming_more_than_a_store_holds_is_refused_before_it_inflates(
    make_store: MakeStore,
) -> None:
    store = make_store()
    filled(store)
    bomb = [1, zeros(200 * 2**20), TOO_LARGE]
    store.set_many([(keys.chunks("t"), key, bomb) for key in chunk_keys(store)])
    assert_bounded(store)


def test_a_checkpoint_entry_claiming_more_than_a_store_holds_is_refused_before_it_inflates(
    make_store: MakeStore,
) -> None:
    store = make_store()
    filled(store)
    namespace, key = latest_entry(store)
    # 0x93, [1, deflated entry, its size]: the compressed entry layout.
    store.set(namespace, key, [1, zeros(200 * 2**20), TOO_LARGE])
    with pytest.raises(swarmstate.CorruptDataError):
        entry.inflated(_raw(store, namespace, key))
    assert_bounded(store)


def _raw(store: swarmstate.BaseStore, namespace: str, key: str) -> bytes:
    found = store.get_many([(namespace, key)], raw=True)[0]
    assert type(found) is bytes
    return found


def _plant_parts(store: swarmstate.BaseStore, count: int, chunk_size: int) -> None:
    """Every chunked value of the newest entry names ``count`` parts: all of one chunk of
    ``chunk_size`` zero bytes, stored compressed (a few hundred bytes)."""
    serde = SwarmStateSaver(store).serde
    namespace, key = latest_entry(store)
    decoded = entry.decode(serde, _raw(store, namespace, key))
    assert decoded.forms
    store.set(keys.chunks("t"), "planted", [1, zeros(chunk_size), chunk_size])
    planted = 0
    for form in decoded.forms.values():
        if form[0] == CHUNKS:  # [CHUNKS, type, id, parts]
            form[2] = f"planted-{planted}"  # a version id no cache holds
            form[3] = [["planted", 0, chunk_size]] * count
            planted += 1
    assert planted
    data = entry.encode(
        serde,
        decoded.checkpoint,
        decoded.metadata,
        decoded.parent_id,
        None,
        decoded.forms,
    ) or entry.encode(
        serde,
        decoded.checkpoint,
        decoded.metadata,
        decoded.parent_id,
        None,
        decoded.forms,
        typed=True,
    )
    assert data is not None
    store.set_many([(namespace, key, data)], raw=True)


def test_a_value_naming_more_parts_than_a_writer_stores_is_refused(
    make_store: MakeStore,
) -> None:
    # About 12 planted bytes a part, each naming the whole 100 kB chunk: 1,000
    # of them joined to 100 MB.
    store = make_store()
    filled(store)
    _plant_parts(store, 1000, 100_000)
    assert_bounded(store)


def test_parts_joining_to_more_than_a_store_holds_are_refused_before_joining(
    make_store: MakeStore,
) -> None:
    # As many parts as a writer stores, each naming a 21 MB chunk: 1 GB in all.
    store = make_store()
    filled(store)
    _plant_parts(store, sharing.MAX_PARTS, 21_000_000)
    fresh = SwarmStateSaver(store)
    with pytest.raises(swarmstate.CorruptDataError, match="more than the 1000000000"):
        fresh.get_tuple(cfg("t"))
    assert peak_of(lambda: SwarmStateSaver(store).get_tuple(cfg("t"))) < PEAK_LIMIT


@pytest.mark.parametrize("command", ["check", "show", "history", "threads"])
def test_the_command_line_reads_planted_rows_in_bounded_memory(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    disk_path = tmp_path / "planted.db"
    with DiskStore(disk_path) as store:
        filled(store)
        bomb = [1, zeros(200 * 2**20), TOO_LARGE]
        store.set_many([(keys.chunks("t"), key, bomb) for key in chunk_keys(store)])
    args = {
        "check": ["check", str(disk_path)],
        "show": ["show", str(disk_path), "t"],
        "history": ["history", str(disk_path), "t"],
        "threads": ["threads", str(disk_path)],
    }[command]
    codes: list[int] = []
    assert peak_of(lambda: codes.append(main(args))) < PEAK_LIMIT
    out = capsys.readouterr()
    if command == "check":
        assert codes != [0]
        assert "t" in out.out + out.err

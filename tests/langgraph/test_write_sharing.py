"""Pending writes as large as a stored value share its bytes, and read back whole.

A write of at least ``SHARE_AT`` bytes that mostly repeats a value its
checkpoint (or, for a subgraph, the enclosing checkpoint) stores as chunks
is stored as ranges of those chunks, borrowing from that checkpoint. Checked
on every store through the saver's own calls: reads (warm and from a new
saver, sync and async, after a copy), the sweep keeping what only a write
names, a write whose lender is gone stored inline, and planted forms
refused. A write that repeats nothing stored is one new chunk, and the
child checkpoint's value with the same bytes (a node's output replacing
the value whole) is that chunk, whichever of the two is saved first.
"""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import swarmstate
from swarmstate._codec import dumps, loads
from swarmstate.integrations.langgraph import SwarmStateSaver, sharing, threads
from swarmstate.integrations.langgraph.format import keys
from swarmstate.integrations.langgraph.values import CHUNKS, SHARE_AT
from tests.support.checkpoints import put_value


def _big(rnd: random.Random, items: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "".join(rnd.choices(string.ascii_letters, k=700))}
        for _ in range(items)
    ]


def _put(saver: SwarmStateSaver, thread_id: str, value: Any, **given: Any) -> str:
    return put_value(saver, thread_id, value, channel="messages", **given)


def _writes(
    saver: SwarmStateSaver,
    thread_id: str,
    checkpoint_id: str,
    value: Any,
    *,
    checkpoint_ns: str = "",
    outer: dict[str, str] | None = None,
) -> None:
    conf: dict[str, Any] = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
    }
    if outer is not None:
        conf["checkpoint_map"] = outer
    saver.put_writes({"configurable": conf}, [("messages", value)], "task-1")


def _stored_write(
    store: swarmstate.BaseStore, thread_id: str, checkpoint_ns: str, checkpoint_id: str
) -> list[Any]:
    key = keys.write_key(checkpoint_id, "task-1", 0)
    raw = store.get_many([(keys.scope(thread_id, checkpoint_ns), key)], raw=True)[0]
    assert raw is not None
    found = loads(raw)
    assert isinstance(found, list)
    return found


def _pending(saver: SwarmStateSaver, thread_id: str, checkpoint_ns: str = "") -> list[Any]:
    found = saver.get_tuple(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
    )
    assert found is not None
    return [value for _, _, value in found.pending_writes or []]


def test_a_write_repeating_its_checkpoints_value_is_stored_as_its_chunks_and_reads_back(
    make_store: Any,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(5)
    state = _big(rnd, 30)
    assert len(saver.serde.dumps_typed(state)[1]) >= SHARE_AT
    checkpoint = _put(saver, "t", state)
    written = [*state, *_big(rnd, 1)]
    _writes(saver, "t", checkpoint, written)
    stored = _stored_write(store, "t", "", checkpoint)
    assert type(stored[5]) is list  # a form, not the bytes
    assert stored[5][0] == CHUNKS
    assert len(dumps(stored)) < 2000  # the state's 21 kB are ranges of its chunks
    assert _pending(saver, "t") == [written]
    # A new saver has nothing cached: it reads the chunks.
    assert _pending(SwarmStateSaver(store), "t") == [written]
    assert [t.pending_writes for t in SwarmStateSaver(store).list(None)] == [
        [("task-1", "messages", written)]
    ]
    saver.copy_thread("t", "copy")
    saver.delete_thread("t")
    assert _pending(SwarmStateSaver(store), "copy") == [written]


async def test_an_awaited_read_of_a_write_stored_as_chunks_reads_them(make_store: Any) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(6)
    state = _big(rnd, 30)
    checkpoint = _put(saver, "t", state)
    written = [*state, *_big(rnd, 2)]
    _writes(saver, "t", checkpoint, written)
    fresh = SwarmStateSaver(store)
    found = await fresh.aget_tuple({"configurable": {"thread_id": "t"}})
    assert found is not None
    assert found.pending_writes == [("task-1", "messages", written)]


def test_a_subgraphs_write_borrows_from_the_enclosing_checkpoint_and_the_sweep_keeps_it(
    make_store: Any,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(7)
    state = _big(rnd, 30)
    outer_first = _put(saver, "t", state)
    # The subgraph's writes come before its first checkpoint is written.
    sub_ns = "agent:" + "1" * 8
    outer = {"": outer_first}
    sub_first = empty_checkpoint()["id"]
    _writes(saver, "t", sub_first, state, checkpoint_ns=sub_ns, outer=outer)
    stored = _stored_write(store, "t", sub_ns, sub_first)
    assert type(stored[5]) is list
    _put(saver, "t", "small", checkpoint_ns=sub_ns, outer=outer, checkpoint_id=sub_first)
    # The enclosing graph moves on to a value that shares nothing with the first,
    # and pruning keeps each namespace's newest: the first enclosing checkpoint goes.
    _put(saver, "t", _big(rnd, 30), parent=outer_first)
    saver.prune(["t"], strategy="keep_latest")
    assert len(list(saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}))) == 1
    # Only the write names the first checkpoint's chunks now: they were kept.
    assert _pending(SwarmStateSaver(store), "t", sub_ns) == [state]


def test_a_write_whose_lender_is_gone_is_stored_inline(make_store: Any) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(8)
    state = _big(rnd, 30)
    checkpoint = _put(saver, "t", state)
    # Another process deletes the checkpoint this saver still has cached.
    store.delete_many([(keys.scope("t", ""), keys.checkpoint_key(checkpoint))])
    _writes(saver, "t", checkpoint, state)
    stored = _stored_write(store, "t", "", checkpoint)
    assert type(stored[5]) is bytes  # inline (deflated where the store compresses)


def test_a_small_write_stays_inline_and_a_large_one_sharing_little_is_one_new_chunk(
    make_store: Any,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(9)
    checkpoint = _put(saver, "t", _big(rnd, 30))
    chunks_before = store.count(keys.chunks("t"))
    other = _big(rnd, 30)
    _writes(saver, "t", checkpoint, other)
    form = _stored_write(store, "t", "", checkpoint)[5]
    # Its bytes whole in one chunk of its own, borrowed from nothing.
    assert form[0] == CHUNKS
    assert len(form[3]) == 1
    assert store.count(keys.chunks("t")) == chunks_before + 1
    assert _pending(SwarmStateSaver(store), "t", "") == [other]
    second = _put(saver, "t", _big(rnd, 30), parent=checkpoint)
    _writes(saver, "t", second, [{"role": "user", "content": "hi"}])
    assert type(_stored_write(store, "t", "", second)[5]) is bytes


@pytest.mark.parametrize(
    "planted",
    [
        ["not-chunks", "msgpack", "id", []],
        [CHUNKS, "json", "id", []],  # its type is not the write's
        [CHUNKS, "msgpack", "id", "parts"],
        [CHUNKS, "msgpack", "id", [["missing-chunk", 0, 10]]],
        [CHUNKS, "msgpack", "id", [["k", 0, 1]] * (sharing.MAX_PARTS + 1)],
        [CHUNKS, "msgpack", "id", [[]]],
        [CHUNKS, "msgpack", "id", [[7, 0, 1]]],
    ],
)
def test_a_planted_write_form_is_refused_as_damaged(make_store: Any, planted: list[Any]) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    checkpoint = _put(saver, "t", "small")
    key = keys.write_key(checkpoint, "task-1", 0)
    row = ["task-1", 0, "", "messages", "msgpack", planted]
    store.set_many([(keys.scope("t", ""), key, dumps(row))], raw=True)
    with pytest.raises(swarmstate.CorruptDataError):
        SwarmStateSaver(store).get_tuple({"configurable": {"thread_id": "t"}})
    # What collects the thread's chunks reads every write: a damaged one names none.
    saver.retain(keep_last=1, thread_ids=["t"], dry_run=True)
    saver.prune(["t"])
    saver.delete_for_runs(["no-such-run"])


def test_a_delta_history_walk_reads_a_write_stored_as_chunks(make_store: Any) -> None:
    from swarmstate.integrations.langgraph import history

    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(10)
    state = _big(rnd, 30)
    first = _put(saver, "t", state)
    written = [*state, *_big(rnd, 1)]
    _writes(saver, "t", first, written)
    assert type(_stored_write(store, "t", "", first)[5]) is list
    child = _put(saver, "t", "small", parent=first)
    fresh = SwarmStateSaver(store)  # nothing cached: the chunks are read
    walked = history.delta_history(store, fresh._values, fresh.serde, "t", "", child, ["messages"])
    assert walked["messages"]["writes"] == [("task-1", "messages", written)]


def test_a_write_whose_checkpoint_never_landed_keeps_what_it_names_and_the_dry_run_says_so(
    make_store: Any,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(11)
    state = _big(rnd, 30)
    outer_first = _put(saver, "t", state)
    sub_ns = "agent:" + "2" * 8
    never = empty_checkpoint()["id"]  # the subgraph's checkpoint is never written
    _writes(saver, "t", never, state, checkpoint_ns=sub_ns, outer={"": outer_first})
    assert type(_stored_write(store, "t", sub_ns, never)[5]) is list
    _put(saver, "t", _big(rnd, 30), parent=outer_first)
    dry = saver.retain(keep_last=1, thread_ids=["t"], dry_run=True)
    real = saver.retain(keep_last=1, thread_ids=["t"])
    assert (dry.checkpoints_deleted, dry.bytes_freed) == (
        real.checkpoints_deleted,
        real.bytes_freed,
    )
    assert real.checkpoints_deleted == 1
    # The write stays (retention deletes a checkpoint's writes with it), and reads whole.
    found = SwarmStateSaver(store)._values.write_values(
        [(("t", sub_ns, never), _stored_write(store, "t", sub_ns, never)[5])]
    )
    assert found[0] is not None
    assert loads(found[0][1]) == state


def _entry_form(store: swarmstate.BaseStore, thread_id: str, checkpoint_id: str) -> list[Any]:
    """The stored form of the channel "messages" in a checkpoint's record."""
    found = SwarmStateSaver(store)._values.parent_head(
        SwarmStateSaver(store).serde, thread_id, "", checkpoint_id
    )
    assert found is not None
    return found.forms["messages"]


def _config(thread_id: str, checkpoint_id: str) -> Any:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def test_a_put_whose_value_is_its_parents_pending_write_takes_that_writes_chunk(
    make_store: Any,
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(21)
    parent = _put(saver, "t", _big(rnd, 2))
    output = _big(rnd, 30)  # a node's output, replacing the value whole
    _writes(saver, "t", parent, output)
    written = _stored_write(store, "t", "", parent)[5]
    chunks = store.count(keys.chunks("t"))
    child = _put(saver, "t", output, parent=parent)
    assert store.count(keys.chunks("t")) == chunks  # no byte of it stored again
    assert _entry_form(store, "t", child)[3] == written[3]  # the write's chunk
    for reader in (saver, SwarmStateSaver(store)):
        got = reader.get_tuple(_config("t", child))
        assert got is not None
        assert got.checkpoint["channel_values"] == {"messages": output}
    # The parent and its writes gone, the chunk stays: the child names it.
    saver.prune(["t"], strategy="keep_latest")
    got = SwarmStateSaver(store).get_tuple(_config("t", child))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"messages": output}


@pytest.mark.parametrize("change", ["deleted", "rewritten"])
def test_a_put_taking_a_write_no_longer_stored_as_written_stores_its_value_anew(
    make_store: Any, change: str
) -> None:
    # The put requires the write's row as written: with it gone (its checkpoint
    # deleted by another process) or holding other bytes, nothing keeps the
    # chunk from a sweep, so the put is refused and stores its value anew.
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(22)
    parent = _put(saver, "t", _big(rnd, 2))
    output = _big(rnd, 30)
    _writes(saver, "t", parent, output)
    taken = _stored_write(store, "t", "", parent)[5][3]
    pair = (keys.scope("t", ""), keys.write_key(parent, "task-1", 0))
    if change == "deleted":
        store.delete_many([pair])
    else:
        store.set_many([(*pair, ["task-1", 0, "", "messages", "msgpack", b"\xc0"])])
    chunks = store.count(keys.chunks("t"))
    child = _put(saver, "t", output, parent=parent)
    assert store.count(keys.chunks("t")) == chunks + 1  # stored anew
    assert _entry_form(store, "t", child)[3] != taken
    saver.prune(["t"], strategy="keep_latest")  # sweeps what nothing names
    got = SwarmStateSaver(store).get_tuple(_config("t", child))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"messages": output}


def test_a_write_saved_after_its_childs_put_takes_the_childs_chunks(make_store: Any) -> None:
    # The runtime saves writes in the background: the child may land first.
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(23)
    parent = _put(saver, "t", _big(rnd, 2))
    output = _big(rnd, 30)
    child = _put(saver, "t", output, parent=parent)
    chunks = store.count(keys.chunks("t"))
    _writes(saver, "t", parent, output)
    assert store.count(keys.chunks("t")) == chunks  # no byte of it stored again
    assert _stored_write(store, "t", "", parent)[5][3] == _entry_form(store, "t", child)[3]
    got = SwarmStateSaver(store).get_tuple(_config("t", parent))
    assert got is not None
    assert got.pending_writes == [("task-1", "messages", output)]
    # The write requires the child's record as it was put: with the child deleted
    # first (another process), the write stores its bytes itself.
    other = _put(saver, "u", _big(rnd, 2))
    again = _put(saver, "u", output, parent=other)
    form = _entry_form(store, "u", again)
    store.delete_many([(keys.scope("u", ""), keys.checkpoint_key(again))])
    chunks = store.count(keys.chunks("u"))
    _writes(saver, "u", other, output)
    assert _stored_write(store, "u", "", other)[5][3] != form[3]
    assert store.count(keys.chunks("u")) == chunks + 1
    got = SwarmStateSaver(store).get_tuple(_config("u", other))
    assert got is not None
    assert got.pending_writes == [("task-1", "messages", output)]


def test_a_write_does_not_take_the_chunks_of_a_checkpoint_put_again_since(
    make_store: Any,
) -> None:
    # A checkpoint put again under its id (another attempt of the same step)
    # names other chunks: a write holding the first attempt's bytes must not
    # take chunks nothing names any more (a sweep would delete them).
    store = make_store()
    saver = SwarmStateSaver(store)
    saver.setup()
    rnd = random.Random(24)
    parent = _put(saver, "t", _big(rnd, 2))
    output = _big(rnd, 30)
    child = _put(saver, "t", output, parent=parent)
    first = _entry_form(store, "t", child)[3]
    _put(SwarmStateSaver(store), "t", output, parent=parent, checkpoint_id=child)
    assert _entry_form(store, "t", child)[3] != first
    _writes(saver, "t", parent, output)
    assert _stored_write(store, "t", "", parent)[5][3] != first
    assert threads.sweep(store, saver.serde, "t")  # the first attempt's chunk
    got = SwarmStateSaver(store).get_tuple(_config("t", parent))
    assert got is not None
    assert got.pending_writes == [("task-1", "messages", output)]

"""The latest read starts from the newest checkpoint the saver knows of a namespace.

A saver remembers the checkpoint it last wrote or read as the latest of each
namespace, and reads from there to the namespace's end: that checkpoint's
group (its record and pending writes) in one store read when nothing came
after it. What another saver wrote meanwhile (newer checkpoints, writes
with no checkpoint yet, a deleted thread, more rows than one read takes) is
found as a saver that knows nothing finds it: each case is compared with a
new saver's read of the same store, on every store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.checkpoints import put_value, store_calls

MakeStore = Callable[[], swarmstate.BaseStore]
LATEST = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _writes(saver: SwarmStateSaver, checkpoint_id: str, task: str, *values: Any) -> None:
    config = {
        "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
    }
    saver.put_writes(config, [("x", value) for value in values], task, "")  # type: ignore[arg-type]


def _seen(found: CheckpointTuple | None) -> tuple[Any, ...] | None:
    if found is None:
        return None
    return (
        found.config["configurable"]["checkpoint_id"],
        found.checkpoint["channel_values"],
        sorted(found.pending_writes or []),
        None
        if found.parent_config is None
        else found.parent_config["configurable"]["checkpoint_id"],
    )


def test_the_latest_checkpoint_and_its_writes_are_one_read_after_the_savers_own_put(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = SwarmStateSaver(make_store())
    first = put_value(saver, "t", 1)
    second = put_value(saver, "t", 2, parent=first)
    _writes(saver, second, "task-a", 3, 4)
    calls = store_calls(saver.store, monkeypatch)
    found = saver.get_tuple(LATEST)
    assert calls == ["items"]
    assert _seen(found) == (second, {"x": 2}, [("task-a", "x", 3), ("task-a", "x", 4)], first)
    calls.clear()
    assert _seen(saver.get_tuple(LATEST)) == _seen(found)  # read again: the same one read
    assert _seen(asyncio.run(saver.aget_tuple(LATEST))) == _seen(found)  # awaited: the same
    assert calls == ["items", "items"]


def _newer_with_writes(other: SwarmStateSaver, known: str) -> None:
    newer = put_value(other, "t", "newer", parent=known)
    _writes(other, newer, "task-b", "w")


def _writes_on_the_known_one(other: SwarmStateSaver, known: str) -> None:
    _writes(other, known, "task-c", "late")


def _deleted(other: SwarmStateSaver, known: str) -> None:
    other.delete_thread("t")


def _deleted_and_written_again(other: SwarmStateSaver, known: str) -> None:
    other.delete_thread("t")
    put_value(other, "t", "again")


def _more_than_one_read_takes(other: SwarmStateSaver, known: str) -> None:
    parent = known
    for i in range(40):  # 80 rows after the known checkpoint's group
        parent = put_value(other, "t", i, parent=parent)
        _writes(other, parent, f"task-{i}", i)


def _writes_with_no_checkpoint_after_it(other: SwarmStateSaver, known: str) -> None:
    later = empty_checkpoint()["id"]  # newer than every checkpoint put: never put
    _writes(other, later, "task-d", "orphan")


@pytest.mark.parametrize(
    "meanwhile",
    [
        _newer_with_writes,
        _writes_on_the_known_one,
        _deleted,
        _deleted_and_written_again,
        _more_than_one_read_takes,
        _writes_with_no_checkpoint_after_it,
    ],
)
def test_the_latest_read_finds_what_another_saver_wrote_after_the_one_it_knows(
    make_store: MakeStore, meanwhile: Callable[[SwarmStateSaver, str], None]
) -> None:
    store = make_store()
    saver = SwarmStateSaver(store)
    first = put_value(saver, "t", 1)
    known = put_value(saver, "t", 2, parent=first)
    _writes(saver, known, "task-a", 3)
    assert _seen(saver.get_tuple(LATEST)) is not None  # the saver knows ``known`` as the latest
    meanwhile(SwarmStateSaver(store), known)
    fresh = _seen(SwarmStateSaver(store).get_tuple(LATEST))  # a saver that knows nothing
    assert _seen(saver.get_tuple(LATEST)) == fresh
    if meanwhile is _deleted:
        assert fresh is None
    elif meanwhile is _writes_on_the_known_one:
        assert fresh == (known, {"x": 2}, [("task-a", "x", 3), ("task-c", "x", "late")], first)
    elif meanwhile is _writes_with_no_checkpoint_after_it:
        assert fresh == (known, {"x": 2}, [("task-a", "x", 3)], first)
    else:
        assert fresh is not None
        assert fresh[0] != known  # a newer checkpoint

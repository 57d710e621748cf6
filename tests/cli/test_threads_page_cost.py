"""A page of `swarmstate threads` costs its threads' newest checkpoints, not their histories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from swarmstate._cli.threads import threads_view
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver


class CountingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, counting the values it decodes."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        return super().loads_typed(data)


def _chain(saver: SwarmStateSaver, thread_id: str, checkpoint_ns: str, count: int) -> str:
    parent = None
    for step in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"notes": f"{thread_id} step {step}"}
        checkpoint["channel_versions"] = {"notes": step + 1}
        conf = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        if parent is not None:
            conf["checkpoint_id"] = parent
        saver.put({"configurable": conf}, checkpoint, {"step": step}, {"notes": step + 1})
        parent = checkpoint["id"]
    assert parent is not None
    return parent


def test_a_page_counts_a_long_threads_checkpoints_without_reading_them(tmp_path: Path) -> None:
    serde = CountingSerializer()
    with DiskStore(tmp_path / "threads.db") as store:
        saver = SwarmStateSaver(store, serde=serde)
        _chain(saver, "long", "", 150)
        _chain(saver, "long", "inner:1", 30)
        newest = _chain(saver, "short", "", 3)
        reader = SwarmStateSaver(store, serde=serde)  # nothing cached
        serde.loads = 0
        page = threads_view(reader, limit=20, offset=0, count=True)
        # Each thread's newest checkpoint is read (its ts); before, every one of the
        # 183 checkpoints was read to be counted.
        assert serde.loads <= 2 * 2 * len(page["threads"]), serde.loads
    rows = {row["thread_id"]: row for row in page["threads"]}
    assert rows["long"]["checkpoints"] == 180
    assert rows["long"]["namespaces"] == ["", "inner:1"]
    assert rows["short"]["checkpoints"] == 3
    assert rows["short"]["last_checkpoint_id"] == newest
    assert page["total"] == 2

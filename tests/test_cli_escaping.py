"""Every stored text the command line prints is escaped: no control character reaches a terminal.

A real graph whose node name, channel name and thread id carry C0 and C1
control characters (an ANSI colour, a CSI, a carriage return, a bell, a line
separator), then a checkpoint put with such a metadata ``source`` and pending
writes with such a task id and channel: each command's output holds no
character a terminal acts on but the newline that ends its lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver

HOSTILE = "x\x1b[31mred\x9b2J\r\u2028\x07\x85\t"
"""An ANSI colour, a CSI (C1), a carriage return, a line separator, a bell, NEL, a tab."""
THREAD = "t" + HOSTILE
CHANNEL = "c" + HOSTILE
NODE = "n" + HOSTILE

State = TypedDict("State", {CHANNEL: str, "plain": int})  # type: ignore[misc]


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def fill(path: Path) -> list[str]:
    """The store at ``path`` filled as the module says; the thread's checkpoints, oldest first."""
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        builder = StateGraph(State)
        builder.add_node(NODE, lambda s: {CHANNEL: s[CHANNEL] + HOSTILE, "plain": 1})
        builder.add_edge(START, NODE)
        builder.add_edge(NODE, END)
        graph = builder.compile(checkpointer=saver)
        graph.invoke({CHANNEL: HOSTILE, "plain": 0}, cfg(THREAD), durability="sync")
        latest = saver.get_tuple(cfg(THREAD))
        assert latest is not None
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {CHANNEL: HOSTILE}
        checkpoint["channel_versions"] = {CHANNEL: "9"}
        written = saver.put(
            latest.config,
            checkpoint,
            {"source": "src" + HOSTILE, "step": 9, "parents": {}, "writes": {NODE: 1}},
            {CHANNEL: "9"},
        )
        saver.put_writes(written, [(CHANNEL, HOSTILE), ("w" + HOSTILE, 1)], "task" + HOSTILE)
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg(THREAD))]
    return ids[::-1]


COMMANDS = ["threads", "history", "show", "diff", "inspect", "check", "prune"]


@pytest.mark.parametrize("command", COMMANDS)
def test_no_stored_control_character_reaches_the_output(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.db"
    ids = fill(path)
    argv = {
        "threads": ["threads", str(path)],
        "history": ["history", str(path), THREAD],
        "show": ["show", str(path), THREAD],
        "diff": ["diff", str(path), THREAD, ids[0], ids[-1]],
        "inspect": ["inspect", str(path)],
        "check": ["check", str(path)],
        "prune": ["prune", str(path), "--keep-last", "1", "--dry-run"],
    }[command]
    main(argv)
    out = capsys.readouterr()
    assert out.out.strip()
    for stream in (out.out, out.err):
        raw = sorted({c for c in stream if not c.isprintable() and c != "\n"})
        assert raw == [], f"{command}: {raw!r} in {stream!r}"

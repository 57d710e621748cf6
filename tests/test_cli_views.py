"""``threads`` pages, newest activity first; the views read what ``graph.get_state`` reads.

Real graphs (see ``cli_graphs``): a DeltaChannel conversation stopped at an
interrupt whose question is longer than a table cell, plain dict messages
under ``operator.add`` with a fork, a fan-out with a join and ``Send``s,
and the graphs of ``fill_with_graphs``; checkpointed into a DiskStore file
and a PostgreSQL schema. Each command's JSON is compared with LangGraph's
own reading of the same checkpoint (``get_state``, ``get_state_history``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_graphs import THREADS, cfg, chat_graph, fill_with_graphs
from cli_graphs import fill_with_view_graphs as fill_views

import swarmstate as ss
from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver


@dataclass
class Filled:
    """A store filled by real graphs: the saver, each thread's graph, how the command names it."""

    saver: SwarmStateSaver
    graphs: dict[str, Any]
    target: list[str]  # PATH, plus --schema on PostgreSQL

    def argv(self, command: str, *args: str) -> list[str]:
        return [command, self.target[0], *args, *self.target[1:]]


@pytest.fixture(params=["disk", "postgres"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Filled]:
    if request.param == "disk":
        path = tmp_path / "views.db"
        store: ss.BaseStore = DiskStore(path)
        target = [str(path)]
    else:
        store = request.getfixturevalue("pg_store_factory")()
        target = [request.getfixturevalue("pg_conninfo"), "--schema", store.schema]  # type: ignore[attr-defined]
    saver = fill_with_graphs(store)
    graphs = {"chat": chat_graph(saver), "sub": chat_graph(saver, subgraph=True)}
    graphs["paused"] = chat_graph(saver, ask=True)
    graphs.update(fill_views(store)[1])
    yield Filled(saver, graphs, target)
    store.close()


def run(filled: Filled, capsys: Any, command: str, *args: str) -> tuple[int, str, str]:
    code = main(filled.argv(command, *args))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_json(filled: Filled, capsys: Any, command: str, *args: str) -> Any:
    code, out, err = run(filled, capsys, command, *args, "--json")
    assert (code, err) == (0, ""), err
    return json.loads(out)


def states(filled: Filled, thread: str) -> list[Any]:
    """LangGraph's own reading of every checkpoint of the thread's root graph, newest first."""
    return list(filled.graphs[thread].get_state_history(cfg(thread)))


def ident(state: Any) -> str:
    return str(state.config["configurable"]["checkpoint_id"])


# -- threads: pages, newest first --------------------------------------------------------------


def test_threads_come_newest_activity_first_a_page_at_a_time_with_the_total(
    filled: Filled, capsys: Any
) -> None:
    everything = [*THREADS, "delta", "dicts", "fan"]
    newest_first = sorted(
        everything,
        key=lambda t: next(iter(filled.saver.list(cfg(t), limit=1))).checkpoint["ts"],
        reverse=True,
    )
    doc = cli_json(filled, capsys, "threads")
    assert (doc["total"], doc["offset"], doc["limit"]) == (len(everything), 0, 20)
    assert [t["thread_id"] for t in doc["threads"]] == newest_first
    pages = [
        cli_json(filled, capsys, "threads", "--limit", "3", "--offset", str(start))
        for start in range(0, len(everything) + 3, 3)
    ]
    assert [t["thread_id"] for p in pages for t in p["threads"]] == newest_first
    assert {p["total"] for p in pages} == {len(everything)}
    assert pages[-1]["threads"] == []
    code, out, _ = run(filled, capsys, "threads", "--limit", "3")
    assert code == 0
    assert f"threads 1-3 of {len(everything)}, newest activity first" in out
    assert "--offset 3" in out
    code, out, _ = run(filled, capsys, "threads", "--offset", "100")
    assert f"the store has {len(everything)} threads" in out
    for row in doc["threads"]:
        assert row["value_bytes"] == filled.saver.thread_size(row["thread_id"])

"""``show``/``diff``/``history``/``threads`` read what ``graph.get_state`` reads, and page.

Real graphs (see ``tests.support.graphs``): a DeltaChannel conversation stopped at an
interrupt whose question is longer than a table cell, plain dict messages
under ``operator.add`` with a fork, a fan-out with a join and ``Send``s,
and the graphs of ``fill_with_graphs``; checkpointed into a DiskStore file
and a PostgreSQL schema. Each command's JSON is compared with LangGraph's
own reading of the same checkpoint (``get_state``, ``get_state_history``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import swarmstate
from swarmstate._cli.values import plain
from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.graphs import LONG_QUESTION, THREADS, cfg, chat_graph, fill_with_graphs
from tests.support.graphs import fill_with_view_graphs as fill_views


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
        store: swarmstate.BaseStore = DiskStore(path)
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


# -- DeltaChannel ---------------------------------------------------------------------


def test_show_lists_delta_channels_with_the_values_get_state_returns(
    filled: Filled, capsys: Any
) -> None:
    seen_rebuilt = seen_snapshot = False
    for state in states(filled, "delta"):
        doc = cli_json(filled, capsys, "show", "delta", ident(state), "--messages", "1000")
        channels = {c["name"]: c for c in doc["channels"]}
        for name in ("messages", "notes"):
            value = state.values.get(name)
            if not value:  # a channel never written: LangGraph shows it empty, the checkpoint not
                assert name not in channels or channels[name]["items"] == 0
                continue
            row = channels[name]
            assert row["delta"] is not None, name
            assert row["items"] == len(value), (name, doc["step"])
            seen_rebuilt |= row["delta"]["writes"] > 0
            seen_snapshot |= row["delta"]["snapshot"]
        if state.values.get("messages"):
            shown = channels["messages"]["last_messages"]
            assert [m["id"] for m in shown] == [m.id for m in state.values["messages"]]
            assert [m["content"] for m in shown] == [m.content for m in state.values["messages"]]
    # Both ways LangGraph reads a delta were met: a snapshot, and writes folded.
    assert seen_rebuilt
    assert seen_snapshot


def test_diff_sees_delta_channel_values(filled: Filled, capsys: Any) -> None:
    history = states(filled, "delta")
    newest, oldest_turn = history[0], history[-3]  # the first turn's agent step
    doc = cli_json(filled, capsys, "diff", "delta", ident(oldest_turn), ident(newest))
    assert "notes" in doc["channels"]["changed"]
    assert doc["values"]["notes"] == {
        "old": plain(oldest_turn.values["notes"]),
        "new": plain(newest.values["notes"]),
    }
    old_ids = {m.id for m in oldest_turn.values["messages"]}
    added = [m.id for m in newest.values["messages"] if m.id not in old_ids]
    assert [m["id"] for m in doc["messages"]["messages"]["added"]] == added
    assert added  # the diff saw the messages the channel's writes added


# -- next, nodes, interrupts --------------------------------------------------------------


@pytest.mark.parametrize("thread", ["chat", "paused", "delta", "dicts", "fan"])
def test_show_prints_the_next_nodes_of_every_checkpoint_as_get_state_does(
    filled: Filled, thread: str, capsys: Any
) -> None:
    history = states(filled, thread)
    for state in history:
        doc = cli_json(filled, capsys, "show", thread, ident(state))
        assert doc["next"] == sorted(state.next), (thread, doc["step"])
    assert any(len(s.next) > 1 for s in history) or thread != "fan"  # the join and the Sends
    code, out, _ = run(filled, capsys, "show", thread)
    assert code == 0
    latest = filled.graphs[thread].get_state(cfg(thread))
    assert f"next {', '.join(sorted(latest.next)) or '-'}" in out


def test_history_nodes_leave_out_langgraph_interrupt_bookkeeping(
    filled: Filled, capsys: Any
) -> None:
    for thread in ("paused", "delta"):
        rows = cli_json(filled, capsys, "history", thread)["checkpoints"]
        assert all("__interrupt__" not in r["nodes"] for r in rows)
        assert any("review" in r["nodes"] for r in rows) or thread == "paused"
    code, out, _ = run(filled, capsys, "history", "delta")
    assert code == 0
    assert "__interrupt__" not in out


def test_interrupt_values_are_whole_in_json_and_cut_with_a_mark_in_tables(
    filled: Filled, capsys: Any
) -> None:
    doc = cli_json(filled, capsys, "show", "delta")
    [asked] = doc["interrupts"]
    assert asked["value"] == {"question": LONG_QUESTION, "turn": 4}
    writes = [w for w in doc["pending_writes"] if w["channel"] == "__interrupt__"]
    assert writes[0]["value"][0]["value"]["question"] == LONG_QUESTION
    assert "…" in writes[0]["summary"]  # the summary is cut, and says so
    code, out, _ = run(filled, capsys, "show", "delta")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("interrupt"))
    assert "Should this go out?" in line
    assert LONG_QUESTION.strip() not in line
    assert "…" in line
    assert "--json prints every value whole" in out


# -- dict messages, changed values -------------------------------------------------------------


def test_dict_messages_are_shown_and_diffed_as_messages(filled: Filled, capsys: Any) -> None:
    latest = filled.graphs["dicts"].get_state(cfg("dicts"))
    doc = cli_json(filled, capsys, "show", "dicts", "--messages", "2")
    messages = next(c for c in doc["channels"] if c["name"] == "messages")
    assert messages["messages"] == len(latest.values["messages"])
    assert messages["summary"] == f"{len(latest.values['messages'])} messages"
    assert [(m["type"], m["content"]) for m in messages["last_messages"]] == [
        (m["role"], m["content"]) for m in latest.values["messages"][-2:]
    ]
    history = states(filled, "dicts")
    one_turn = cli_json(filled, capsys, "diff", "dicts", ident(history[2]), ident(history[0]))
    change = one_turn["messages"]["messages"]
    assert [(m["type"], m["content"]) for m in change["added"]] == [
        ("user", "again"),
        ("assistant", "you said again"),
    ]
    assert change["removed"] == change["changed"] == []
    code, out, _ = run(filled, capsys, "diff", "dicts", ident(history[2]), ident(history[0]))
    assert code == 0
    assert "  + user: again" in out
    assert "  + assistant: you said again" in out


def test_diff_shows_the_old_and_new_value_of_each_changed_channel(
    filled: Filled, capsys: Any
) -> None:
    found = list(filled.saver.list(cfg("chat")))
    older, newer = found[-1], found[0]
    a, b = (t.config["configurable"]["checkpoint_id"] for t in (older, newer))
    doc = cli_json(filled, capsys, "diff", "chat", a, b)
    va, vb = older.checkpoint["channel_values"], newer.checkpoint["channel_values"]
    assert doc["values"]["turns"] == {"old": None, "new": vb["turns"]}  # added
    assert "messages" not in doc["values"]  # messages are diffed as messages
    middle = found[5].config["configurable"]["checkpoint_id"]
    doc = cli_json(filled, capsys, "diff", "chat", middle, b)
    assert doc["values"]["turns"] == {
        "old": found[5].checkpoint["channel_values"]["turns"],
        "new": vb["turns"],
    }
    assert "turns" in doc["channels"]["changed"]
    assert va.get("turns") is None
    code, out, _ = run(filled, capsys, "diff", "chat", middle, b)
    assert code == 0
    assert f"  turns: {found[5].checkpoint['channel_values']['turns']} -> {vb['turns']}" in out


# -- checkpoint ids by prefix ------------------------------------------------------------------


def test_a_unique_prefix_or_the_shown_end_of_an_id_names_a_checkpoint(
    filled: Filled, capsys: Any
) -> None:
    ids = [ident(s) for s in states(filled, "chat")]
    for target in (ids[0], ids[3]):
        prefix = next(
            target[:n]
            for n in range(1, len(target))
            if sum(i.startswith(target[:n]) for i in ids) == 1
        )
        assert cli_json(filled, capsys, "show", "chat", prefix)["checkpoint_id"] == target
        assert (
            cli_json(filled, capsys, "show", "chat", "…" + target[-12:])["checkpoint_id"] == target
        )
    doc = cli_json(filled, capsys, "diff", "chat", ids[3][:30], ids[0][:30])
    assert (doc["a"]["checkpoint_id"], doc["b"]["checkpoint_id"]) == (ids[3], ids[0])


def test_an_ambiguous_prefix_exits_1_listing_the_candidates(filled: Filled, capsys: Any) -> None:
    ids = [ident(s) for s in states(filled, "chat")]
    shared = ids[0][:4]
    matching = [i for i in ids if i.startswith(shared)]
    assert len(matching) > 1
    code, out, err = run(filled, capsys, "show", "chat", shared)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "ambiguous" in err
    assert f"{len(matching)} checkpoints match" in err
    assert matching[0] in err
    code, _, err = run(filled, capsys, "diff", "chat", "zz", ids[0])
    assert code == 1
    assert "no checkpoint 'zz'" in err


# -- history branches ---------------------------------------------------------------------------


def test_history_numbers_the_branches_of_a_forked_thread(filled: Filled, capsys: Any) -> None:
    rows = cli_json(filled, capsys, "history", "dicts")["checkpoints"]
    by_id = {r["checkpoint_id"]: r for r in rows}
    assert {r["branch"] for r in rows} == {0, 1}
    for number in (0, 1):
        line = [r for r in rows if r["branch"] == number]
        # Each branch is a chain of parents; branch 0 ends at the newest checkpoint.
        for child, parent in itertools.pairwise(line):
            assert child["parent_id"] == parent["checkpoint_id"]
        if number == 1:
            assert by_id[line[-1]["parent_id"]]["branch"] == 0  # where the fork left the line
    assert rows[0]["branch"] == 0
    # The rows stay in LangGraph's order (get_state_history), the forks marked, not moved.
    assert [r["checkpoint_id"] for r in rows] == [ident(s) for s in states(filled, "dicts")]
    code, out, _ = run(filled, capsys, "history", "dicts")
    assert code == 0
    assert "BRANCH" in out.splitlines()[1]
    code, out, _ = run(filled, capsys, "history", "chat")
    assert "BRANCH" not in out  # one line: no column


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
    # The total walks every thread: only with --count.
    assert (doc["total"], doc["more"], doc["offset"], doc["limit"]) == (None, False, 0, 20)
    assert [t["thread_id"] for t in doc["threads"]] == newest_first
    starts = range(0, len(everything) + 3, 3)
    pages = [
        cli_json(filled, capsys, "threads", "--limit", "3", "--offset", str(start), "--count")
        for start in starts
    ]
    assert [t["thread_id"] for p in pages for t in p["threads"]] == newest_first
    assert {p["total"] for p in pages} == {len(everything)}
    assert [p["more"] for p in pages] == [start + 3 < len(everything) for start in starts]
    assert pages[-1]["threads"] == []
    code, out, _ = run(filled, capsys, "threads", "--limit", "3")
    assert code == 0
    assert "threads 1-3, newest activity first (next page: --offset 3)" in out
    code, out, _ = run(filled, capsys, "threads", "--limit", "3", "--count")
    assert f"threads 1-3 of {len(everything)}, newest activity first" in out
    code, out, _ = run(filled, capsys, "threads", "--offset", "100")
    assert "no threads at --offset 100 (--count says how many there are)" in out
    code, out, _ = run(filled, capsys, "threads", "--offset", "100", "--count")
    assert f"the store has {len(everything)} threads" in out
    for row in doc["threads"]:
        assert row["value_bytes"] == filled.saver.thread_size(row["thread_id"])

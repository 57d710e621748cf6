"""``threads``/``history``/``show``/``diff --json`` agree with the saver's own reads.

Real graphs (plain Python nodes, ``add_messages``, a tool call, a subgraph,
an interrupt) are checkpointed into a DiskStore file and a PostgreSQL schema;
each command's JSON is compared with ``SwarmStateSaver.list``/``get_tuple``
on the same data: counts, ids, order, namespaces, channels, messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

import swarmstate
from swarmstate._cli.source import open_store
from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys
from tests.support.cli import ROOT, run_cli
from tests.support.graphs import ODD_THREAD, THREADS, cfg, chat_graph, fill_with_graphs


@dataclass
class Filled:
    """A store filled by real graphs: the saver over it and how the command names it."""

    saver: SwarmStateSaver
    target: list[str]  # PATH, plus --schema on PostgreSQL


@pytest.fixture(params=["disk", "postgres"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Filled]:
    if request.param == "disk":
        path = tmp_path / "graphs.db"
        store: swarmstate.BaseStore = DiskStore(path)
        target = [str(path)]
    else:
        store = request.getfixturevalue("pg_store_factory")()
        target = [request.getfixturevalue("pg_conninfo"), "--schema", store.schema]  # type: ignore[attr-defined]
    saver = fill_with_graphs(store)
    yield Filled(saver, target)
    store.close()


def cli_json(filled: Filled, command: str, *args: str, capsys: Any) -> Any:
    code = main([command, filled.target[0], *args, *filled.target[1:], "--json"])
    out = capsys.readouterr()
    assert (code, out.err) == (0, ""), out.err
    return json.loads(out.out)


def ids(tuples: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def test_threads_lists_every_thread_with_the_saver_counts_and_latest(
    filled: Filled, capsys: Any
) -> None:
    doc = cli_json(filled, "threads", "--count", capsys=capsys)
    assert sorted(t["thread_id"] for t in doc["threads"]) == sorted(THREADS)
    assert doc["total"] == len(THREADS)
    assert doc["more"] is False
    store = filled.saver.store
    for row in doc["threads"]:
        found = list(filled.saver.list(cfg(row["thread_id"])))
        assert row["checkpoints"] == len(found)
        assert row["namespaces"] == sorted(
            {t.config["configurable"]["checkpoint_ns"] for t in found}
        )
        assert row["last_checkpoint_id"] == ids(found)[0]
        assert row["last_activity"] == found[0].checkpoint["ts"]
        # Every namespace of the thread: checkpoints, writes, values, list segments.
        namespaces = store.namespaces(keys.thread_prefix(row["thread_id"]))
        assert row["value_bytes"] == sum(
            len(v) for ns in namespaces for _, v in store.items(ns, raw=True)
        )
    sub = next(t for t in doc["threads"] if t["thread_id"] == "sub")
    assert len(sub["namespaces"]) == 2


@pytest.mark.parametrize("thread", ["chat", ODD_THREAD, "sub"])
def test_history_is_the_saver_list_newest_first(filled: Filled, thread: str, capsys: Any) -> None:
    found = list(filled.saver.list(cfg(thread)))
    doc = cli_json(filled, "history", thread, capsys=capsys)
    rows = doc["checkpoints"]
    assert [r["checkpoint_id"] for r in rows] == ids(found)
    for row, t in zip(rows, found, strict=True):
        assert row["checkpoint_ns"] == t.config["configurable"]["checkpoint_ns"]
        assert row["step"] == t.metadata["step"]
        assert row["source"] == t.metadata["source"]
        assert row["ts"] == t.checkpoint["ts"]
        assert row["pending_write_count"] == len(t.pending_writes or [])
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        assert row["parent_id"] == parent
        assert row["bytes"] > 0
    limited = cli_json(filled, "history", thread, "--limit", "3", capsys=capsys)
    assert [r["checkpoint_id"] for r in limited["checkpoints"]] == ids(found)[:3]


def test_history_names_the_node_that_wrote_each_checkpoint(filled: Filled, capsys: Any) -> None:
    rows = cli_json(filled, "history", "chat", capsys=capsys)["checkpoints"]
    one_turn = [(r["source"], r["nodes"]) for r in reversed(rows[-5:])]
    assert one_turn == [
        ("input", []),
        ("loop", ["__start__"]),
        ("loop", ["agent"]),
        ("loop", ["tool"]),
        ("loop", ["answer"]),
    ]
    # The parent of the last row shown lies past --limit: it is read to name the node.
    limited = cli_json(filled, "history", "chat", "--limit", "2", capsys=capsys)["checkpoints"]
    assert [r["nodes"] for r in limited] == [["answer"], ["tool"]]
    assert cli_json(filled, "show", "chat", capsys=capsys)["nodes"] == ["answer"]


def test_history_of_one_namespace_is_the_saver_list_of_it(filled: Filled, capsys: Any) -> None:
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in filled.saver.list(cfg("sub"))}
    nested = next(ns for ns in namespaces if ns)
    for ns in ("", nested):
        doc = cli_json(filled, "history", "sub", "--ns", ns, capsys=capsys)
        expected = ids(filled.saver.list(cfg("sub", checkpoint_ns=ns)))
        assert [r["checkpoint_id"] for r in doc["checkpoints"]] == expected
        assert {r["checkpoint_ns"] for r in doc["checkpoints"]} == {ns}


@pytest.mark.parametrize("thread", ["chat", "paused", ODD_THREAD])
def test_show_summarizes_the_checkpoint_get_tuple_returns(
    filled: Filled, thread: str, capsys: Any
) -> None:
    latest = filled.saver.get_tuple(cfg(thread))
    assert latest is not None
    doc = cli_json(filled, "show", thread, "--messages", "2", capsys=capsys)
    assert doc["thread_id"] == thread
    assert doc["checkpoint_id"] == latest.config["configurable"]["checkpoint_id"]
    assert doc["metadata"] == json.loads(json.dumps(latest.metadata, default=str))
    values = latest.checkpoint["channel_values"]
    assert [c["name"] for c in doc["channels"]] == sorted(values)
    messages = next(c for c in doc["channels"] if c["name"] == "messages")
    assert messages["messages"] == len(values["messages"])
    assert [m["id"] for m in messages["last_messages"]] == [m.id for m in values["messages"][-2:]]
    assert [m["type"] for m in messages["last_messages"]] == [
        m.type for m in values["messages"][-2:]
    ]
    writes = [(w["task_id"], w["channel"]) for w in doc["pending_writes"]]
    assert writes == [(task, channel) for task, channel, _ in latest.pending_writes or []]
    if thread == "paused":
        assert "__interrupt__" in {channel for _, channel in writes}


def test_show_finds_an_older_checkpoint_in_any_namespace(filled: Filled, capsys: Any) -> None:
    for t in filled.saver.list(cfg("sub")):
        checkpoint_id = t.config["configurable"]["checkpoint_id"]
        doc = cli_json(filled, "show", "sub", checkpoint_id, capsys=capsys)
        assert doc["checkpoint_id"] == checkpoint_id
        assert doc["checkpoint_ns"] == t.config["configurable"]["checkpoint_ns"]
        assert [c["name"] for c in doc["channels"]] == sorted(t.checkpoint["channel_values"])


def test_diff_reports_the_channels_and_messages_that_changed(filled: Filled, capsys: Any) -> None:
    found = list(filled.saver.list(cfg("chat")))
    for newer, older in [(found[0], found[-1]), (found[0], found[5]), (found[1], found[2])]:
        a, b = older.checkpoint["channel_values"], newer.checkpoint["channel_values"]
        a_id = older.config["configurable"]["checkpoint_id"]
        b_id = newer.config["configurable"]["checkpoint_id"]
        doc = cli_json(filled, "diff", "chat", a_id, b_id, capsys=capsys)
        assert (doc["a"]["checkpoint_id"], doc["b"]["checkpoint_id"]) == (a_id, b_id)
        assert doc["channels"] == {
            "added": sorted(set(b) - set(a)),
            "removed": sorted(set(a) - set(b)),
            "changed": sorted(n for n in set(a) & set(b) if a[n] != b[n]),
        }
        old_ids = [m.id for m in a.get("messages", [])]
        new_ids = [m.id for m in b.get("messages", [])]
        change = doc["messages"].get("messages", {"added": [], "removed": [], "changed": []})
        assert [m["id"] for m in change["added"]] == [i for i in new_ids if i not in old_ids]
        assert [m["id"] for m in change["removed"]] == [i for i in old_ids if i not in new_ids]
        assert change["changed"] == []
    same = found[0].config["configurable"]["checkpoint_id"]
    doc = cli_json(filled, "diff", "chat", same, same, capsys=capsys)
    assert doc["channels"] == {"added": [], "removed": [], "changed": []}
    assert doc["messages"] == {}


def test_tables_show_the_same_ids_as_the_json(filled: Filled, capsys: Any) -> None:
    found = ids(filled.saver.list(cfg("chat")))
    assert main(["history", filled.target[0], "chat", *filled.target[1:]]) == 0
    text = capsys.readouterr().out
    assert [line.split()[0] for line in text.splitlines()[2:]] == found
    assert main(["threads", *filled.target]) == 0
    text = capsys.readouterr().out
    assert repr(ODD_THREAD) in text  # a control character is escaped, not printed raw


def test_the_command_cannot_write_to_postgresql(pg_store_factory: Any, pg_conninfo: str) -> None:
    store = pg_store_factory()
    store.set("ns", "k", 1)
    with open_store(pg_conninfo, schema=store.schema) as readonly:
        assert readonly.get("ns", "k") == 1
        with pytest.raises(swarmstate.StorageError, match="read-only transaction"):
            readonly.set("ns", "k", 2)
        with pytest.raises(swarmstate.StorageError, match="read-only transaction"):
            readonly.snapshot()
    assert store.get("ns", "k") == 1
    assert store.snapshots() == []


def test_a_schema_without_a_store_exits_1_with_one_line(pg_conninfo: str, capsys: Any) -> None:
    assert main(["threads", pg_conninfo, "--schema", "no_such_schema"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no swarmstate store in schema 'no_such_schema'" in err


def test_check_decodes_every_entry_of_either_backend(filled: Filled, capsys: Any) -> None:
    code = main(["check", filled.target[0], *filled.target[1:], "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["ok"] is True
    assert doc["entries"] == sum(
        len(filled.saver.store.keys(ns)) for ns in filled.saver.store.namespaces()
    )
    assert doc["bad_entries"] == []
    assert (doc["integrity_check"] is None) == (len(filled.target) > 1)  # None on PostgreSQL


def keys_of(doc: Any) -> set[str]:
    """Every key the command chose in a JSON document, at any depth.

    Not the keys of ``metadata`` (LangGraph's), of diff's ``messages`` and
    ``values`` (channel names), nor any inside a value the graph wrote.
    """
    if isinstance(doc, list):
        return set().union(*(keys_of(item) for item in doc))
    if not isinstance(doc, dict):
        return set()
    found = set(doc)
    for key, value in doc.items():
        if key in GRAPH_DATA:
            continue
        if key in ("messages", "values") and isinstance(value, dict):
            value = list(value.values())
        found |= keys_of(value)
    return found


GRAPH_DATA = {"metadata", "value", "old", "new", "content", "tool_calls"}
"""Keys whose value is what the graph wrote, printed whole: its keys are the graph's."""


def test_docs_list_every_json_key_the_commands_print(filled: Filled, capsys: Any) -> None:
    docs = (ROOT / "docs" / "cli.md").read_text()
    found = list(filled.saver.list(cfg("chat")))
    a, b = (t.config["configurable"]["checkpoint_id"] for t in (found[-1], found[0]))
    printed: set[str] = set()
    for argv in (
        ["threads"],
        ["history", "chat"],
        ["show", "paused"],
        ["diff", "chat", a, b],
        ["inspect"],
        ["check"],
        ["prune", "--keep-last", "1", "--dry-run"],
    ):
        printed |= keys_of(cli_json(filled, argv[0], *argv[1:], capsys=capsys))
    undocumented = {k for k in printed if f"`{k}`" not in docs and f"{k}`" not in docs}
    assert not undocumented, f"keys printed but not in docs/cli.md: {sorted(undocumented)}"


class _Reverse:
    """A stand-in cipher for LangGraph's EncryptedSerializer: enough to write another format."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "rev", plaintext[::-1]

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "rev"
        return ciphertext[::-1]


def test_check_tells_values_of_another_serializer_from_damage(tmp_path: Path) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from swarmstate.integrations.langgraph import SwarmStateSaver

    path = tmp_path / "secret.db"
    serde = EncryptedSerializer(_Reverse(), JsonPlusSerializer())
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store, serde=serde)
        graph = chat_graph(saver)
        graph.invoke({"messages": [HumanMessage("secret")]}, cfg("s"))
        assert saver.verify() == []  # its own serializer reads everything
        problems = SwarmStateSaver(store).verify()
        assert problems
        assert {p["kind"] for p in problems} == {"serializer"}
        assert "msgpack+rev" in problems[0]["error"]
    done = run_cli("check", str(path), "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert doc["ok"] is True
    assert doc["bad_checkpoints"] == []
    assert doc["other_serializer_checkpoints"]

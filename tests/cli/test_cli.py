"""The ``swarmstate`` command: exit codes, one-line errors, help, and inspecting without changing.

Commands run in-process through ``main()`` where only their output matters,
and as subprocesses where the process itself is the point (a bound on its
run time, no traceback, privileges dropped).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys
from tests.support.cli import (
    directory_state,
    leave_log_behind,
    make_store,
    run_cli,
    unprivileged,
    writer_holding_transaction,
)
from tests.support.graphs import THREADS, cfg, chat_graph, fill_with_graphs

PATH_COMMANDS = ["threads", "history", "show", "diff", "inspect", "check", "prune"]
"""Commands that must leave PATH as it was (prune: its dry run)."""
REFUSING = [*PATH_COMMANDS, "prune --yes"]
"""Commands that must refuse a path that holds no store, and leave it as it was."""


def argv_for(command: str, target: str, saver: Any = None) -> list[str]:
    """Arguments that make ``command`` do real work on ``target`` (ids from ``saver``)."""
    if command in ("threads", "inspect", "check"):
        return [command, target]
    if command.startswith("prune"):
        return ["prune", target, "--keep-last", "1", "--yes" if "yes" in command else "--dry-run"]
    if saver is None:
        ids = ["1", "2"]
    else:
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("chat"))][:2]
    return {
        "history": ["history", target, "chat"],
        "show": ["show", target, "chat", ids[1]],
        "diff": ["diff", target, "chat", ids[1], ids[0]],
    }[command]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(text: str) -> str:
    assert text.endswith("\n")
    assert text.count("\n") == 1, text
    assert "Traceback" not in text
    return text


@pytest.fixture
def graphs_db(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A closed DiskStore file filled by real graphs, and a saver to read it with."""
    path = tmp_path / "graphs.db"
    with DiskStore(path) as store:
        fill_with_graphs(store)
    reader = DiskStore(path, readonly=True)
    yield path, SwarmStateSaver(reader)
    reader.close()


# -- version, help, usage -----------------------------------------------------------


def test_version_prints_the_installed_package_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout == f"swarmstate {importlib.metadata.version('pyswarmstate')}\n"


@pytest.mark.parametrize("command", [None, *PATH_COMMANDS, "benchmark"])
def test_help_is_plain_text_and_documents_the_exit_codes(
    command: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"] if command else ["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text
    assert ":class:" not in text
    assert ":mod:" not in text
    assert "docs/" not in text  # an installed wheel has no docs folder: help says it all
    if command is not None:
        assert "--json" in text  # every command takes it, as the README says
    for line in ("0  success", "1  the command could not do its work", "2  usage error"):
        assert line in text


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nonsense"],
        ["history", "x.db"],
        ["history", "x.db", "t", "--limit", "-1"],
        ["history", "x.db", "t", "--limit", "0"],
        ["inspect", "x.db", "--limit", "many"],
        ["show", "x.db", "t", "--messages", "-2"],
        ["benchmark", "--progress", "--no-progress"],
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = one_line(capsys.readouterr().err)
    assert "--help" in err


# -- refusing what is not a store, untouched ---------------------------------------


@pytest.mark.parametrize("command", REFUSING)
def test_a_missing_file_exits_1_with_one_line_and_is_not_created(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    code, out, err = run(argv_for(command, str(missing)), capsys)
    assert (code, out) == (1, "")
    assert "does not exist" in one_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["empty", "text", "foreign sqlite"])
@pytest.mark.parametrize("command", REFUSING)
def test_empty_and_foreign_files_are_refused_and_left_untouched(
    tmp_path: Path, kind: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.db"
    if kind == "empty":
        path.touch()
    elif kind == "text":
        path.write_text("not a database\n")
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE notes (body TEXT)")
        conn.close()
    before = directory_state(tmp_path)
    code, out, err = run(argv_for(command, str(path)), capsys)
    assert (code, out) == (1, "")
    message = one_line(err)
    assert "left untouched" in message
    assert "point it at a new path" not in message
    assert directory_state(tmp_path) == before


def test_a_foreign_file_is_refused_without_a_traceback_in_a_real_process(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.db"
    foreign.write_text("not a database\n")
    out = run_cli("inspect", str(foreign))
    assert out.returncode == 1
    assert "is damaged or not a SQLite database" in one_line(out.stderr)


def test_an_unknown_thread_or_checkpoint_exits_1_with_one_line(
    graphs_db: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(graphs_db[0])
    for argv in (
        ["history", path, "no-such-thread"],
        ["show", path, "no-such-thread"],
        ["show", path, "chat", "no-such-checkpoint"],
        ["diff", path, "chat", "no-such-checkpoint", "neither"],
    ):
        code, out, err = run(argv, capsys)
        assert (code, out) == (1, ""), argv
        assert "no checkpoint" in one_line(err)


# -- inspecting changes nothing -----------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_every_command_leaves_the_file_its_mtime_and_the_files_beside_it_unchanged(
    graphs_db: tuple[Path, Any], as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path, saver = graphs_db
    before = directory_state(path.parent)
    assert list(before) == ["graphs.db"]
    for command in PATH_COMMANDS:
        argv = argv_for(command, str(path), saver) + (["--json"] if as_json else [])
        code, out, err = run(argv, capsys)
        assert (code, err) == (0, ""), (command, err)
        assert out.strip(), command
        if as_json:
            json.loads(out)
        assert directory_state(path.parent) == before, command


def test_commands_on_a_store_a_killed_writer_left_keep_its_file_and_log(
    graphs_db: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path, saver = graphs_db
    leave_log_behind(path)
    before = directory_state(path.parent)
    for command in PATH_COMMANDS:
        code, _, err = run(argv_for(command, str(path), saver), capsys)
        assert (code, err) == (0, ""), (command, err)
        after = directory_state(path.parent)
        assert after.keys() == before.keys(), command
        for name in ("graphs.db", "graphs.db-wal"):  # -shm is shared memory: readers write it
            assert after[name] == before[name], (command, name)


def test_a_command_returns_the_committed_data_while_another_process_writes(
    graphs_db: tuple[Path, Any],
) -> None:
    path = graphs_db[0]
    for argv in (["threads", str(path), "--json"], ["inspect", str(path), "--json"]):
        started = time.monotonic()
        alone = run_cli(*argv)
        peer = time.monotonic() - started
        assert alone.returncode == 0, alone.stderr
        with writer_holding_transaction(path):
            # The bound: as long as the same command alone took, plus 2 s.
            during = run_cli(*argv, timeout=peer + 2)
        assert during.returncode == 0, during.stderr
        assert json.loads(during.stdout) == json.loads(alone.stdout)


def test_commands_work_on_a_read_only_file_in_a_read_only_directory(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "graphs.db"
    with DiskStore(path) as store:
        saver = fill_with_graphs(store)
        expected = [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("chat"))]
    path.chmod(0o400)
    directory.chmod(0o500)
    try:
        before = directory_state(directory)
        threads = run_cli("threads", str(path), "--json", prefix=unprivileged())
        assert threads.returncode == 0, threads.stderr
        listed = [t["thread_id"] for t in json.loads(threads.stdout)["threads"]]
        assert sorted(listed) == sorted(THREADS)
        history = run_cli("history", str(path), "chat", "--json", prefix=unprivileged())
        assert history.returncode == 0, history.stderr
        got = [c["checkpoint_id"] for c in json.loads(history.stdout)["checkpoints"]]
        assert got == expected
        assert directory_state(directory) == before
    finally:
        directory.chmod(0o700)
        path.chmod(0o600)


# -- check ---------------------------------------------------------------------------


def test_check_passes_a_sound_store_and_lists_entries_that_do_not_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.db"
    make_store(path)
    code, out, _ = run(["check", str(path), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0
    assert doc == {
        "ok": True,
        "integrity_check": ["ok"],
        "entries": 30,
        "bad_entries": [],
        "threads_checked": 0,
        "bad_checkpoints": [],
        "other_serializer_checkpoints": [],
    }
    with DiskStore(path) as store:
        store.set_many([("ns1", "bad", b"\xc1"), ("zz", "torn", b"\x94\x01")], raw=True)
    code, out, _ = run(["check", str(path), "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    assert doc["ok"] is False
    assert doc["integrity_check"] == ["ok"]
    assert [(b["namespace"], b["key"]) for b in doc["bad_entries"]] == [
        ("ns1", "bad"),
        ("zz", "torn"),
    ]
    assert doc["entries"] == 32
    code, out, _ = run(["check", str(path)], capsys)
    assert code == 1
    assert "'ns1' 'bad'" in out
    assert "PROBLEMS FOUND" in out


def test_check_reads_back_every_checkpoint_and_names_a_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.db"
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        chat_graph(saver).invoke({"messages": [("user", "hello")]}, cfg("chat"))
        latest = saver.get_tuple(cfg("chat"))
        assert latest is not None
        checkpoint_id = latest.checkpoint["id"]
    code, out, _ = run(["check", str(path), "--json"], capsys)
    doc = json.loads(out)
    assert (code, doc["threads_checked"], doc["bad_checkpoints"]) == (0, 1, [])
    with DiskStore(path) as store:
        # Valid msgpack (so every entry still decodes), but not a checkpoint.
        store.set_many(
            [(keys.scope("chat", ""), keys.checkpoint_key(checkpoint_id), b"\x94\x01\x02\x03\x04")],
            raw=True,
        )
    code, out, _ = run(["check", str(path), "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    assert doc["bad_entries"] == []
    assert [(b["thread_id"], b["checkpoint_id"]) for b in doc["bad_checkpoints"]] == [
        ("chat", checkpoint_id)
    ]
    assert checkpoint_id in doc["bad_checkpoints"][0]["error"]


# -- inspect ---------------------------------------------------------------------


def test_inspect_lists_namespaces_counts_and_snapshots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.db"
    with DiskStore(path) as store:
        store.set_many([("a", "x", 1), ("a", "y", 2), ("b", "z", 3)])
        store.snapshot()
    code, out, _ = run(["inspect", str(path)], capsys)
    assert code == 0
    assert "3 entries in 2 namespaces" in out
    assert "'a': 2" in out
    assert "\n1 snapshot\n" in out
    code, out, _ = run(["inspect", str(path), "--json", "--limit", "1"], capsys)
    doc = json.loads(out)
    assert doc["entries"] == 3
    assert doc["namespace_count"] == 2
    assert doc["namespaces"] == [{"namespace": "a", "entries": 2}]
    assert [s["id"] for s in doc["snapshots"]] == [1]
    # ISO 8601 in UTC, as every other command prints a time.
    with DiskStore(path, readonly=True) as store:
        taken = store.snapshots()[0].timestamp
    when = datetime.datetime.fromisoformat(doc["snapshots"][0]["timestamp"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert when.timestamp() == pytest.approx(taken, abs=1e-6)
    assert when.strftime("%Y-%m-%d %H:%M:%S") in run(["inspect", str(path)], capsys)[1]


def test_inspect_counts_in_words_a_reader_expects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.db"
    with DiskStore(path) as store:
        store.set("a", "x", 1)
    code, out, _ = run(["inspect", str(path)], capsys)
    assert code == 0
    assert f"{path}: 1 entry in 1 namespace\n" in out
    assert "\n0 snapshots" in out


# -- benchmark ---------------------------------------------------------------------


@pytest.mark.parametrize("out", ["no/such/dir/x.json", "."])
def test_benchmark_refuses_an_out_it_cannot_write_at_once_with_one_line(
    tmp_path: Path, out: str
) -> None:
    started = time.monotonic()
    assert run_cli("--version").returncode == 0
    peer = time.monotonic() - started
    started = time.monotonic()
    proc = run_cli("benchmark", "--out", out, cwd=tmp_path, timeout=peer + 2)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "--out" in one_line(proc.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_benchmark_writes_its_result_and_draws_progress_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("benchmark", "--tiny", "--out", str(out), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # stderr is a pipe here: no progress frames in logs
    assert 'pip install "pyswarmstate[bench,disk,langgraph,postgres]"' in proc.stdout
    doc = json.loads(out.read_text())
    env = doc["environment"]
    for field in ("python", "platform", "cpu_count", "packages", "settings"):
        assert env[field], field
    assert env["packages"]["pyswarmstate"]
    assert set(doc["stores"]) == {"Store", "DiskStore NORMAL", "DiskStore FULL"}
    for row in doc["stores"].values():
        assert row["set"]["p50"] > 0
        assert row["get"]["n"] > 0
    assert [w["processes"] for w in doc["writers"]] == [1, 2]
    assert all(w["errors"] == 0 and not w["failures"] for w in doc["writers"]), doc["writers"]
    # Checkpointers on LangGraph's recorded calls, ours beside LangGraph's, in the table too.
    assert set(doc["savers"]) == {
        "memory/SwarmStateSaver(Store)",
        "memory/InMemorySaver",
        "durable/SwarmStateSaver(DiskStore NORMAL)",
        "durable/SqliteSaver NORMAL",
    }
    for row in doc["savers"].values():
        assert set(row) == {"put", "put_writes", "latest_5", "latest_50", "list10"}
        assert all(op["p50"] > 0 and op["n"] > 0 for op in row.values()), row
        assert row["put"]["n"] == row["put_writes"]["n"] == row["latest_50"]["n"] == 8
    assert "durable/SqliteSaver NORMAL" in proc.stdout
    assert "latest@50" in proc.stdout
    assert doc["footprint"]["max_rss_mb"] > 0
    assert doc["skipped"] == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no probe or temp file
    shown = run_cli("benchmark", "--tiny", "--progress", cwd=tmp_path, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "DiskStore NORMAL: set/get" in shown.stderr


@pytest.mark.slow
def test_benchmark_json_prints_the_result_document_alone_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("benchmark", "--tiny", "--json", "--out", str(out), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)  # the document and nothing else
    assert printed == json.loads(out.read_text())
    assert printed["kind"] == "swarmstate benchmark"
    assert proc.stderr == f"wrote {out} (attach it to a bug report)\n"


def test_benchmark_without_langgraph_measures_the_stores_and_names_the_extra(
    tmp_path: Path,
) -> None:
    code = (
        "import sys; sys.modules['langgraph'] = None; "  # as if the extra were not installed
        "from swarmstate.cli import main; raise SystemExit(main(['benchmark', '--tiny']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "DiskStore NORMAL" in proc.stdout
    assert "checkpointers on LangGraph" not in proc.stdout
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("skipped savers")]
    assert len(skipped) == 1
    assert 'pip install "pyswarmstate[langgraph]"' in skipped[0]


def test_the_command_module_does_not_import_langgraph_or_matplotlib() -> None:
    code = (
        "import sys, swarmstate.cli; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('langgraph', 'langchain_core', 'matplotlib', 'psycopg')]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr

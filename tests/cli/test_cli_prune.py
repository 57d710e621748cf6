"""``swarmstate prune``: the dry run and the real run agree, JSON, only ``--yes`` deletes.

Real graphs (tool calls, a subgraph, an interrupt; see ``tests.support.graphs``) are
checkpointed into a DiskStore file and a PostgreSQL schema; what the command
reports is checked against the saver's own ``list`` before and after. That a
dry run changes nothing, and that a path holding no store is refused as it
is, ``test_cli.py`` checks for every command.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import swarmstate
from swarmstate._cli import prune as prune_module
from swarmstate.backends.disk import DiskStore
from swarmstate.cli import main
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.cli import directory_state
from tests.support.graphs import THREADS, cfg, fill_with_graphs

COUNTS = ("threads_examined", "threads_deleted", "checkpoints_deleted", "writes_deleted")


@dataclass
class Filled:
    """A store filled by real graphs, and how the command names it."""

    store: swarmstate.BaseStore
    target: list[str]  # PATH, plus --schema on PostgreSQL
    path: Path | None  # the file, on DiskStore

    def argv(self, *args: str) -> list[str]:
        return ["prune", self.target[0], *args, *self.target[1:]]

    def checkpoints(self) -> dict[str, Counter[str]]:
        """Per thread, how many checkpoints each namespace has (a fresh saver: no cache)."""
        saver = SwarmStateSaver(self.store)
        return {
            thread: Counter(
                t.config["configurable"]["checkpoint_ns"] for t in saver.list(cfg(thread))
            )
            for thread in saver.list_threads()
        }


@pytest.fixture(params=["disk", "postgres"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Filled]:
    if request.param == "disk":
        path: Path | None = tmp_path / "graphs.db"
        store: swarmstate.BaseStore = DiskStore(path)
        target = [str(path)]
    else:
        path = None
        store = request.getfixturevalue("pg_store_factory")()
        target = [request.getfixturevalue("pg_conninfo"), "--schema", store.schema]  # type: ignore[attr-defined]
    fill_with_graphs(store)
    yield Filled(store, target, path)
    store.close()


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def counts_of(table: str) -> dict[str, int]:
    """The rows of the readable summary (its first line names the mode, the second heads it)."""
    rows = {}
    for line in table.splitlines()[2:]:
        label, _, number = line.rpartition(" ")
        rows[label.strip()] = int(number.replace(",", ""))
    return rows


def test_the_dry_run_and_the_real_run_print_the_same_counts(
    filled: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    before = filled.checkpoints()
    files = directory_state(filled.path.parent) if filled.path else None
    code, dry, err = run(filled.argv("--keep-last", "1", "--dry-run"), capsys)
    assert (code, err) == (0, "")
    assert "dry run: nothing was changed" in dry.splitlines()[0]
    if filled.path:
        assert directory_state(filled.path.parent) == files  # not a byte, not an mtime
    assert filled.checkpoints() == before
    code, real, err = run(filled.argv("--keep-last", "1", "--yes"), capsys)
    assert (code, err) == (0, "")
    assert real.splitlines()[0].endswith(": deleted")
    assert counts_of(real) == counts_of(dry)
    after = filled.checkpoints()
    assert set(after) == set(before) == set(THREADS)
    assert all(set(n.values()) == {1} for n in after.values()), after  # the newest, per namespace
    gone = sum(sum(n.values()) for n in before.values()) - sum(len(n) for n in after.values())
    assert gone > 0
    assert counts_of(real)["checkpoints deleted"] == gone
    assert counts_of(real)["threads examined"] == len(THREADS)


def test_json_has_the_retention_counts_of_both_runs_and_the_reclaim_report(
    filled: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    before = filled.checkpoints()
    code, out, _ = run(filled.argv("--keep-last", "2", "--dry-run", "--reclaim", "--json"), capsys)
    assert code == 0
    dry = json.loads(out)
    assert set(dry) == {*COUNTS, "bytes_freed", "dry_run", "reclaim"}
    assert (dry["dry_run"], dry["reclaim"]) == (True, None)  # a dry run reclaims nothing
    code, out, _ = run(filled.argv("--keep-last", "2", "--yes", "--reclaim", "--json"), capsys)
    assert code == 0
    real = json.loads(out)
    assert real["dry_run"] is False
    for key in (*COUNTS, "bytes_freed"):
        assert real[key] == dry[key], key
    after = filled.checkpoints()
    total = sum(sum(n.values()) for n in before.values())
    assert real["checkpoints_deleted"] == total - sum(sum(n.values()) for n in after.values())
    assert real["checkpoints_deleted"] > 0
    assert real["threads_examined"] == len(THREADS)
    reclaimed = real["reclaim"]
    assert reclaimed["backend"] == type(filled.store).__name__
    assert reclaimed["bytes_freed"] == reclaimed["bytes_before"] - reclaimed["bytes_after"]
    if filled.path:
        assert reclaimed["bytes_after"] < reclaimed["bytes_before"]
        assert reclaimed["complete"], reclaimed["note"]


def test_older_than_deletes_only_threads_idle_that_long(
    filled: Filled, capsys: pytest.CaptureFixture[str]
) -> None:
    before = filled.checkpoints()
    code, out, _ = run(filled.argv("--older-than", "1h", "--yes", "--json"), capsys)
    assert code == 0
    assert json.loads(out)["threads_deleted"] == 0  # every thread was written just now
    assert filled.checkpoints() == before
    code, out, _ = run(
        filled.argv("--older-than", "0s", "--thread", "chat", "--thread", "sub", "--yes", "--json"),
        capsys,
    )
    doc = json.loads(out)
    assert (doc["threads_examined"], doc["threads_deleted"]) == (2, 2)
    assert doc["checkpoints_deleted"] == sum(before["chat"].values()) + sum(before["sub"].values())
    assert set(filled.checkpoints()) == set(THREADS) - {"chat", "sub"}


@pytest.mark.parametrize(
    "bad",
    [
        ["--older-than", "3x"],
        ["--older-than", "-5"],
        ["--older-than", ""],
        ["--older-than", "d"],
        ["--older-than", "1e3"],
        ["--older-than", "999999999d"],
        ["--keep-last", "0"],
        ["--keep-last", "1", "--dry-run", "--yes"],
        [],  # neither --keep-last nor --older-than
    ],
)
def test_bad_arguments_are_usage_errors_and_touch_nothing(
    tmp_path: Path, bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.db"
    with DiskStore(path) as store:
        fill_with_graphs(store)
    files = directory_state(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["prune", str(path), *bad])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--help" in err
    assert directory_state(tmp_path) == files


def _graphs_file(tmp_path: Path) -> Path:
    path = tmp_path / "graphs.db"
    with DiskStore(path) as store:
        fill_with_graphs(store)
    return path


def _checkpoint_count(path: Path) -> int:
    with DiskStore(path, readonly=True) as store:
        saver = SwarmStateSaver(store)
        return sum(len(list(saver.list(cfg(t)))) for t in saver.list_threads())


HINT = "this was a dry run, nothing was deleted; add --yes to delete"


def test_off_a_terminal_without_yes_it_is_a_dry_run_that_says_how_to_delete(
    tmp_path: Path,
) -> None:
    path = _graphs_file(tmp_path)
    before = _checkpoint_count(path)
    files = directory_state(tmp_path)
    argv = [sys.executable, "-m", "swarmstate", "prune", str(path), "--keep-last", "1"]
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [*argv, *extra],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == f"swarmstate prune: {HINT}\n"  # one line, on stderr only
        if extra:
            doc = json.loads(proc.stdout)  # stdout stays the document alone
            assert doc["dry_run"] is True
            assert doc["checkpoints_deleted"] > 0  # what --yes would delete
        else:
            assert "dry run: nothing was changed" in proc.stdout.splitlines()[0]
        assert directory_state(tmp_path) == files
        assert _checkpoint_count(path) == before
    real = subprocess.run(
        [*argv, "--yes", "--json"], capture_output=True, text=True, check=False, timeout=120
    )
    assert (real.returncode, real.stderr) == (0, "")
    assert json.loads(real.stdout)["dry_run"] is False
    assert _checkpoint_count(path) < before


def _read_all(fd: int) -> str:
    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_on_a_terminal_without_yes_it_is_the_same_dry_run(tmp_path: Path) -> None:
    path = _graphs_file(tmp_path)
    before = _checkpoint_count(path)
    files = directory_state(tmp_path)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "swarmstate", "prune", str(path), "--keep-last", "1"],
            stdin=follower,
            stderr=follower,
            stdout=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
        shown = _read_all(leader)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, shown
    assert "dry run" in proc.stdout.splitlines()[0]
    assert HINT in shown
    assert directory_state(tmp_path) == files
    assert _checkpoint_count(path) == before


def test_a_progress_line_is_drawn_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _graphs_file(tmp_path)
    monkeypatch.setattr(prune_module, "PROGRESS_AFTER", 0.0)  # every run counts as long
    code, _, err = run(["prune", str(path), "--keep-last", "3", "--yes"], capsys)
    assert (code, err) == (0, "")  # stderr is not a terminal here: no progress
    leader, follower = pty.openpty()
    terminal = io.TextIOWrapper(io.FileIO(follower, "w", closefd=False), write_through=True)
    try:
        monkeypatch.setattr(sys, "stderr", terminal)
        code = main(["prune", str(path), "--keep-last", "2", "--yes"])
        monkeypatch.undo()
        shown = _read_all(leader)
    finally:
        os.close(follower)
        os.close(leader)
    assert code == 0
    assert f"prune: {len(THREADS)}/{len(THREADS)} threads" in shown
    assert shown.endswith("\r\x1b[K")  # the line is cleared before the summary

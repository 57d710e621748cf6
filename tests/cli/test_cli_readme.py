"""The README says what the code does: its quick start runs, its value rules are the codec's."""

from __future__ import annotations

import builtins
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import swarmstate
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.cli import ROOT, directory_state
from tests.support.graphs import THREADS, fill_with_graphs

README = (ROOT / "README.md").read_text()


def quick_start_commands() -> list[list[str]]:
    """The commands of the README's first quick-start block, after the install step."""
    section = README.split("## Quick start", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        for part in line.split("&&"):
            words = shlex.split(part)
            if words[:3] != ["python", "-m", "pip"]:
                commands.append(words)
    return commands


def test_the_quick_start_demo_leaves_a_file_the_next_command_shows(tmp_path: Path) -> None:
    commands = quick_start_commands()
    assert [c[0] for c in commands] == ["python", "swarmstate", "swarmstate"]
    outputs = []
    for words in commands:
        if words[0] == "python":
            argv = [sys.executable, str(ROOT / words[1]), *words[2:]]
        else:
            argv = [sys.executable, "-m", "swarmstate", *words[1:]]
        proc = subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path
        )
        assert proc.returncode == 0, (words, proc.stderr)
        outputs.append(proc.stdout)
        if words[0] == "python":
            db = tmp_path / "langgraph_demo.db"
            assert db.is_file()
            # The demo ends by printing exactly the README's next commands.
            for shown in commands[1:]:
                assert " ".join(shown) in proc.stdout
    threads, history = outputs[1], outputs[2]
    assert threads.splitlines()[1].split()[0] == "article-1"
    assert "article-1" in history.splitlines()[0]
    assert len(history.splitlines()) > 2  # a header and at least one checkpoint


def test_the_demo_starts_afresh_unless_kept(tmp_path: Path) -> None:
    demo = [sys.executable, str(ROOT / "examples" / "langgraph_demo.py"), "--db", "d.db"]
    for extra in ([], [], ["--keep"]):
        subprocess.run([*demo, *extra], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    listed = subprocess.run(
        [sys.executable, "-m", "swarmstate", "threads", "d.db", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    threads = [t["thread_id"] for t in json.loads(listed.stdout)["threads"]]
    assert threads == ["article-2", "article-1"]  # the second run replaced the first


def test_the_demo_refuses_to_replace_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    precious = tmp_path / "notes.db"
    precious.write_text("my notes\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_demo.py"), "--db", str(precious)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 1
    assert precious.read_text() == "my notes\n"


def test_the_demo_replaces_only_a_store_it_made_itself(tmp_path: Path) -> None:
    mine = tmp_path / "mine.db"
    with DiskStore(mine) as store:
        fill_with_graphs(store)  # a store of the user's, with threads of its own
    before = directory_state(tmp_path)
    demo = [sys.executable, str(ROOT / "examples" / "langgraph_demo.py")]
    for argv in (["--db", str(mine)], [str(mine)]):  # --db and the older spelling
        proc = subprocess.run(
            [*demo, *argv], capture_output=True, text=True, check=False, timeout=300
        )
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1
        assert "this demo did not make; refusing to replace it" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert directory_state(tmp_path) == before  # not a byte, not an mtime
    # --keep adds a thread to it (and leaves it unmarked: the next plain run still refuses).
    subprocess.run([*demo, "--db", str(mine), "--keep"], check=True, capture_output=True,
                   timeout=300)  # fmt: skip
    again = subprocess.run([*demo, "--db", str(mine)], capture_output=True, check=False,
                           timeout=300)  # fmt: skip
    assert again.returncode == 1
    with DiskStore(mine, readonly=True) as store:
        threads = SwarmStateSaver(store).list_threads()
    assert sorted(threads) == sorted([*THREADS, "article-1"])


# -- the value rules paragraph ---------------------------------------------------

RULES = re.search(r"^Values are .*?\n\n", README, re.M | re.S)
assert RULES is not None, "README lost its 'Values are ...' paragraph"
RULES_TEXT = " ".join(RULES.group(0).split())

SAMPLES: dict[str, Any] = {
    "None": None,
    "bool": True,
    "float": 1.5,
    "str": "text",
    "bytes": b"\x00\xff",
    "bytearray": bytearray(b"\x01"),
    "memoryview": memoryview(b"\x02"),
    "list": [1, "a"],
    "tuple": (1, "a"),
    "dict with str keys": {"k": [1]},
}


SAMPLES_BACK = {"bytearray": b"\x01", "memoryview": b"\x02", "tuple": [1, "a"]}


def listed_types() -> dict[str, str | None]:
    """Each type the paragraph names, with the type it says comes back (None: the same)."""
    sentence = RULES_TEXT.split("Values are ", 1)[1].split(", nested.", 1)[0]
    found: dict[str, str | None] = {}
    for item in re.split(r", (?:and )?| and ", sentence):
        match = re.fullmatch(r"(.+?)(?: \((?:returned as (\w+)|(.+))\))?", item.strip())
        assert match is not None, item
        found[match.group(1)] = match.group(2)
    return found


def test_readme_names_exactly_the_types_the_codec_accepts() -> None:
    named = listed_types()
    assert set(named) == {*SAMPLES, "int"}
    for name, sample in SAMPLES.items():
        back = swarmstate.loads(swarmstate.dumps(sample))
        expected = named[name] or type(sample).__name__
        assert type(back).__name__ == expected, name
        assert back == SAMPLES_BACK.get(name, sample), name
    for other in ({1, 2}, 1j, object(), {1: "int key"}, [frozenset()]):
        with pytest.raises(swarmstate.UnsupportedTypeError):
            swarmstate.dumps(other)


def test_readme_int_range_is_the_codec_range() -> None:
    match = re.search(r"int \((-?2\*\*\d+) to (2\*\*\d+-1)\)", RULES_TEXT)
    assert match is not None, RULES_TEXT
    low, high = (eval(bound, {"__builtins__": {}}) for bound in match.groups())
    assert swarmstate.loads(swarmstate.dumps(low)) == low
    assert swarmstate.loads(swarmstate.dumps(high)) == high
    for outside in (low - 1, high + 1):
        with pytest.raises(swarmstate.ValueOutOfRangeError):
            swarmstate.dumps(outside)


def test_readme_error_classes_are_the_ones_raised_with_their_builtins() -> None:
    pairs = re.findall(r"`(\w+Error)`, a `(\w+Error)`", RULES_TEXT)
    assert [name for name, _ in pairs] == ["UnsupportedTypeError", "ValueOutOfRangeError"]
    for name, builtin in pairs:
        cls = getattr(swarmstate, name)
        assert issubclass(cls, swarmstate.SwarmStateError)
        assert issubclass(cls, getattr(builtins, builtin))
    with pytest.raises(swarmstate.UnsupportedTypeError, match=r"value\['a'\]\[3\]"):
        swarmstate.dumps({"a": [0, 1, 2, object()]})
    with pytest.raises(swarmstate.ValueOutOfRangeError):
        swarmstate.dumps(2**70)
    assert not issubclass(swarmstate.ValueOutOfRangeError, TypeError)

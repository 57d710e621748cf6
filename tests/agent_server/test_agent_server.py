"""The Agent Server (``langgraph dev``) with SwarmStateSaver as its checkpointer, against its own.

One script, through ``langgraph_sdk``, runs on the server of
``examples/agent_server`` twice: with ``SwarmStateSaver`` (the example's
``checkpointer`` entry, on a DiskStore file and on PostgreSQL) and with the
server's built-in checkpointer (the same ``langgraph.json`` without that
entry). The script creates a thread, streams a run, is interrupted and
resumed, reads state and history (with metadata filters), forks with
``update_state``, copies a thread, rolls a run back with
``multitask_strategy="rollback"`` (on a thread copied while that run was
going), deletes a thread, then restarts the server on the same files and
reads everything back. Each step's result, with ids and times replaced by
names in order of appearance, must equal the built-in checkpointer's.

Needs ``langgraph-cli[inmem]`` and ``langgraph-sdk``: run with ``nox -s agent_server``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import devserver
import pytest

pytestmark = pytest.mark.agent_server

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent_server"
GRAPH = "chat"
Steps = dict[str, Any]


# -- the script ---------------------------------------------------------------


def _say(text: str, message_id: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text, "id": message_id}]}


async def _status_of(call: Coroutine[Any, Any, Any]) -> Any:
    """The result of a call, or the HTTP status it failed with."""
    import httpx

    try:
        return await call
    except httpx.HTTPStatusError as exc:
        return {"http_status": exc.response.status_code}


async def _stream(parts: Any) -> list[Any]:
    return [[part.event, part.data] async for part in parts]


async def _reads(client: Any, thread_id: str) -> Steps:
    """Everything the server says about one thread."""
    return {
        "thread": await _status_of(client.threads.get(thread_id)),
        "state": await _status_of(client.threads.get_state(thread_id)),
        "history": await _status_of(client.threads.get_history(thread_id, limit=100)),
    }


async def _until_checkpointed(client: Any, thread_id: str, run_id: str, node: str) -> None:
    """Wait until the run has checkpointed a state whose next node is ``node``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        history = await client.threads.get_history(thread_id, limit=10, metadata={"run_id": run_id})
        if any(node in state["next"] for state in history):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} wrote no checkpoint before {node!r} within 60 s")


async def before_restart(client: Any) -> tuple[Steps, dict[str, str]]:
    """Every step up to the restart; returns the results and the threads made."""
    steps: Steps = {}
    thread = await client.threads.create(metadata={"user": "ada"})
    a = thread["thread_id"]
    steps["create"] = thread

    steps["stream"] = await _stream(
        client.runs.stream(a, GRAPH, input=_say("hello", "h1"), stream_mode=["values", "updates"])
    )
    steps["interrupt"] = await client.runs.wait(a, GRAPH, input=_say("confirm the order", "h2"))
    steps["interrupted_state"] = await client.threads.get_state(a)
    steps["resume"] = await _stream(
        client.runs.stream(a, GRAPH, command={"resume": "yes"}, stream_mode="updates")
    )
    steps["state"] = await client.threads.get_state(a)
    history = await client.threads.get_history(a, limit=100)
    steps["history"] = history
    steps["history_of_inputs"] = await client.threads.get_history(
        a, limit=100, metadata={"source": "input"}
    )
    resumed_run = steps["state"]["metadata"]["run_id"]
    steps["history_of_the_resumed_run"] = await client.threads.get_history(
        a, limit=100, metadata={"run_id": resumed_run}
    )
    steps["history_of_user_and_step"] = await client.threads.get_history(
        a, limit=100, metadata={"user": "ada", "step": 1}
    )

    # Fork from the end of the first turn, as if "reply" had said something else.
    first_turn = next(s for s in history if s["values"].get("turns") == 1 and not s["next"])
    steps["fork"] = await client.threads.update_state(
        a,
        {"messages": [{"role": "ai", "content": "a forked reply", "id": "reply-1"}]},
        checkpoint_id=first_turn["checkpoint_id"],
        as_node="reply",
    )
    steps["fork_state"] = await client.threads.get_state(a)
    steps["after_fork"] = await client.runs.wait(a, GRAPH, input=_say("go on", "h3"))
    steps["history_after_fork"] = await client.threads.get_history(a, limit=100)
    steps["history_of_updates"] = await client.threads.get_history(
        a, limit=100, metadata={"source": "update"}
    )

    copy = await client.threads.copy(a)
    b = copy["thread_id"]
    steps["copy"] = copy
    steps["copy_reads"] = await _reads(client, b)
    steps["copy_history_by_its_thread_id"] = await client.threads.get_history(
        b, limit=100, metadata={"thread_id": b}
    )
    steps["copy_history_by_the_source_thread_id"] = await client.threads.get_history(
        b, limit=100, metadata={"thread_id": a}
    )
    steps["source_history_by_its_thread_id"] = await client.threads.get_history(
        a, limit=100, metadata={"thread_id": a}
    )
    steps["copy_turn"] = await client.runs.wait(b, GRAPH, input=_say("on the copy", "h4"))

    # A run that is rolled back, on a thread copied while it was going.
    slow = await client.runs.create(a, GRAPH, input=_say("wait for it", "h5"))
    await _until_checkpointed(client, a, slow["run_id"], "wait")
    c = (await client.threads.copy(a))["thread_id"]
    steps["copy_during_the_run"] = await client.threads.get_history(c, limit=100)
    instead = await client.runs.create(
        a, GRAPH, input=_say("instead", "h6"), multitask_strategy="rollback"
    )
    await client.runs.join(a, instead["run_id"])
    steps["rolled_back_run"] = await _status_of(client.runs.get(a, slow["run_id"]))
    steps["after_rollback"] = await _reads(client, a)
    steps["rolled_back_run_history"] = await client.threads.get_history(
        a, limit=100, metadata={"run_id": slow["run_id"]}
    )
    steps["copy_after_rollback"] = await _reads(client, c)

    await client.threads.delete(b)
    steps["deleted"] = await _reads(client, b)
    steps["others_after_delete"] = [await _reads(client, a), await _reads(client, c)]
    return steps, {"a": a, "b": b, "c": c}


async def after_restart(client: Any, threads: dict[str, str]) -> Steps:
    """Read everything back after a restart, then go on writing."""
    a, b, c = threads["a"], threads["b"], threads["c"]
    steps: Steps = {}
    found = await client.threads.search(limit=100)
    listed = {t["thread_id"] for t in found}
    steps["threads"] = sorted(name for name, thread_id in threads.items() if thread_id in listed)
    steps["source"] = await _reads(client, a)
    steps["deleted"] = await _reads(client, b)
    steps["copy"] = await _reads(client, c)
    steps["source_turn"] = await client.runs.wait(a, GRAPH, input=_say("back again", "h7"))
    steps["copy_resumed"] = await client.runs.wait(c, GRAPH, input=None)
    steps["source_after"] = await _reads(client, a)
    steps["copy_after"] = await _reads(client, c)
    return steps


# -- running it on a server ----------------------------------------------------


def run_script(directory: Path, extra_env: dict[str, str]) -> Steps:
    """The script's results on the server of ``directory``, restarted once in the middle."""
    from langgraph_sdk import get_client

    log = directory / "server.log"

    def on_server(work: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
        with devserver.running(directory, extra_env, log) as url:

            async def go() -> Any:
                async with get_client(url=url, timeout=60) as client:
                    return await work(client)

            return asyncio.run(go())

    try:
        first, threads = on_server(before_restart)
        second = on_server(lambda client: after_restart(client, threads))
    except Exception as exc:
        raise AssertionError(f"{exc}\n--- server log ---\n{devserver.tail(log)}") from exc
    return {**first, **{f"restarted: {name}": value for name, value in second.items()}}


def server_directory(tmp_path: Path, name: str, *, builtin: bool) -> Path:
    """A copy of the example; for the built-in checkpointer without its ``checkpointer`` entry."""
    directory = tmp_path / name
    shutil.copytree(EXAMPLE, directory, ignore=shutil.ignore_patterns("__pycache__", "*.db*"))
    if builtin:
        config = json.loads((directory / "langgraph.json").read_text())
        del config["checkpointer"]
        (directory / "langgraph.json").write_text(json.dumps(config, indent=2))
    return directory


# -- comparing -----------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX_ID = re.compile(r"[0-9a-f]{32}")  # interrupt ids
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
_URL = re.compile(r"https?://127\.0\.0\.1:\d+")


class Normalizer:
    """Replaces what legitimately differs between two servers by stable names.

    Ids (threads, runs, checkpoints, assistants, requests, interrupts) become
    ``<id N>`` in order of first appearance, walking lists in order and dicts
    by sorted key; times become ``<time>``; the server's own URL ``<url>``.
    """

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _id(self, text: str) -> str:
        return self.names.setdefault(text, f"<id {len(self.names) + 1}>")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self(k): self(value[k]) for k in sorted(value, key=str)}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        if isinstance(value, str):
            if _TIME.fullmatch(value):
                return "<time>"
            if _HEX_ID.fullmatch(value):
                return self._id(value)
            value = _URL.sub("<url>", value)
            return _UUID.sub(lambda m: self._id(m.group(0)), value)
        return value


def differences(ours: Steps, builtin: Steps) -> list[str]:
    """The names of the steps whose normalized results differ."""
    assert list(ours) == list(builtin)
    normalize_ours, normalize_builtin = Normalizer(), Normalizer()
    return [name for name in ours if normalize_ours(ours[name]) != normalize_builtin(builtin[name])]


def _report(ours: Steps, builtin: Steps, names: list[str], path: Path) -> str:
    n1, n2 = Normalizer(), Normalizer()
    both = {name: {"ours": n1(ours[name]), "builtin": n2(builtin[name])} for name in ours}
    path.write_text(json.dumps({name: both[name] for name in names}, indent=1, default=str))
    return f"steps that differ: {names} (both results in {path})"


def assert_the_script_did_what_it_says(steps: Steps) -> None:
    """Checks on one server's results alone, so that equal results also mean the right ones."""
    assert steps["interrupted_state"]["next"] == ["confirm"]
    assert steps["history_of_updates"][0]["metadata"]["source"] == "update"
    assert any(state["next"] == ["wait"] for state in steps["copy_during_the_run"])
    assert steps["rolled_back_run"] == {"http_status": 404}  # rolled back, not finished
    assert steps["rolled_back_run_history"] == []
    assert steps["deleted"]["state"] == {"http_status": 404}
    # The restart read back exactly what was there before it.
    assert steps["restarted: source"] == steps["others_after_delete"][0]
    assert steps["restarted: copy"] == steps["others_after_delete"][1]
    assert steps["restarted: threads"] == ["a", "c"]


@pytest.fixture(scope="module")
def builtin_results(tmp_path_factory: pytest.TempPathFactory) -> Steps:
    directory = server_directory(tmp_path_factory.mktemp("builtin"), "server", builtin=True)
    steps = run_script(directory, {})
    assert_the_script_did_what_it_says(steps)
    return steps


@pytest.mark.parametrize("backend", ["disk", "postgres"])
def test_every_step_equals_the_builtin_checkpointer(
    backend: str, builtin_results: Steps, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    directory = server_directory(tmp_path, "server", builtin=False)
    if backend == "disk":
        extra = {"SWARMSTATE_CONN": str(tmp_path / "checkpoints.db")}
    else:
        extra = {"SWARMSTATE_CONN": request.getfixturevalue("pg_conninfo")}
    ours = run_script(directory, extra)
    log = (directory / "server.log").read_text(errors="replace")
    assert "Using custom checkpointer: SwarmStateSaver" in log
    assert "Custom checkpointer missing" not in log  # every optional capability detected
    if backend == "disk":
        assert (tmp_path / "checkpoints.db").stat().st_size > 0
    assert_the_script_did_what_it_says(ours)
    differ = differences(ours, builtin_results)
    assert differ == [], _report(ours, builtin_results, differ, tmp_path / "differences.json")

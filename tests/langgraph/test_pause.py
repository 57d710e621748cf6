"""The cyclic collector held off during a DeltaChannel history read, and given back."""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver, pause
from swarmstate.integrations.langgraph.format import keys
from swarmstate.integrations.langgraph.pause import collector_held


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    return functools.reduce(add_messages, writes, state)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_fold, snapshot_frequency=4)]


class WatchedStore(swarmstate.Store):
    """A store that notes whether the collector was on at each of its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on_at_reads: list[bool] = []

    def keys(self, *args: Any, **kwargs: Any) -> list[str]:
        self.collector_on_at_reads.append(gc.isenabled())
        return super().keys(*args, **kwargs)

    def get_many(self, *args: Any, **kwargs: Any) -> list[Any]:
        self.collector_on_at_reads.append(gc.isenabled())
        return super().get_many(*args, **kwargs)


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """Every test starts with the collector on and leaves it on, whatever it did."""
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def _chat(saver: SwarmStateSaver, turns: int) -> list[Any]:
    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"a{n}", id=f"a{n}")]}

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(turns):
        graph.invoke({"messages": [HumanMessage(content=f"u{turn}", id=f"u{turn}")]}, config)
    return [found.config for found in saver.list(config)]


def test_a_delta_history_read_runs_with_the_collector_off_and_turns_it_back_on() -> None:
    store = WatchedStore()
    saver = SwarmStateSaver(store)
    configs = _chat(saver, 5)
    store.collector_on_at_reads.clear()
    history = SwarmStateSaver(store).get_delta_channel_history(
        config=configs[0], channels=["messages"]
    )
    assert history["messages"]["writes"], "the read walked the chain"
    assert store.collector_on_at_reads, "the read went to the store"
    assert not any(store.collector_on_at_reads)
    assert gc.isenabled()


def test_the_collector_is_back_on_when_a_delta_history_read_raises() -> None:
    saver = SwarmStateSaver(swarmstate.Store())
    configs = _chat(saver, 3)
    parent = saver.get_tuple(configs[0])
    assert parent is not None
    assert parent.parent_config is not None
    damaged = keys.checkpoint_key(parent.parent_config["configurable"]["checkpoint_id"])
    saver.store.set_many([(keys.scope("t", ""), damaged, b"\xc1")], raw=True)
    with pytest.raises(swarmstate.CorruptDataError):
        SwarmStateSaver(saver.store).get_delta_channel_history(
            config=configs[0], channels=["messages"]
        )
    assert gc.isenabled()


def test_the_async_read_turns_the_collector_back_on() -> None:
    saver = SwarmStateSaver(swarmstate.Store())
    configs = _chat(saver, 3)
    found = asyncio.run(saver.aget_delta_channel_history(config=configs[0], channels=["messages"]))
    assert found == saver.get_delta_channel_history(config=configs[0], channels=["messages"])
    assert gc.isenabled()


def test_a_collector_turned_off_by_its_owner_stays_off() -> None:
    saver = SwarmStateSaver(swarmstate.Store())
    configs = _chat(saver, 3)
    gc.disable()
    saver.get_delta_channel_history(config=configs[0], channels=["messages"])
    with collector_held():
        pass
    assert not gc.isenabled()


def test_overlapping_holds_turn_the_collector_back_on_when_the_last_one_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_held():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with collector_held():
            second_in.set()
            first_out.wait(10)
            seen["after the first ended"] = gc.isenabled()
        seen["after both ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == {"after the first ended": False, "after both ended": True}
    with collector_held(), collector_held():  # nested in one thread
        assert not gc.isenabled()
    assert gc.isenabled()


def _steps() -> list[tuple[Any, int]]:
    """Every line of the hold's code: (code object, line number)."""
    codes = [collector_held.__wrapped__.__code__, pause._enter.__code__, pause._leave.__code__]  # type: ignore[attr-defined]
    return [
        (code, line) for code in codes for line in sorted({n for *_, n in code.co_lines() if n})
    ]


@pytest.mark.parametrize("at", range(len(_steps())))
def test_an_interrupt_at_any_step_leaves_no_hold_and_the_collector_as_it_was(at: int) -> None:
    code, line = _steps()[at]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is not code:
            return None

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and frame.f_lineno == line:
                raise KeyboardInterrupt
            return local

        return local

    sys.settrace(trace)
    try:
        with collector_held():
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    assert not pause._holds, "no hold is left behind"
    with collector_held():  # the next hold ends whatever the interrupted one left
        pass
    assert gc.isenabled()
    assert not pause._holds


def test_reads_that_overlap_without_a_break_still_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause, "LONGEST", 0.0)
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with collector_held():
            holding.set()
            done.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    try:
        assert holding.wait(10)

        class Node:
            pass

        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]
        alive = weakref.ref(cycle)
        del cycle
        with collector_held():
            pass
        assert not gc.isenabled(), "the other read still holds"
        assert alive() is None, "the read that ended collected"
    finally:
        done.set()
        other.join(10)
    assert gc.isenabled()


_FORK_CHILD = """
import gc, os
from swarmstate.integrations.langgraph import pause
gc.enable()
with pause.collector_held():
    pid = os.fork()
    if pid == 0:
        os._exit(0 if gc.isenabled() and not pause._holds else 1)
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status) or (0 if gc.isenabled() else 2))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_during_a_hold_starts_with_the_collector_on() -> None:
    # In a fresh interpreter: this one may run other threads, and forking
    # with threads is deprecated (a warning, an error in these tests).
    done = subprocess.run([sys.executable, "-c", _FORK_CHILD], check=False, timeout=60)
    assert done.returncode == 0

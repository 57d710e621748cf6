"""Every checkpoint SwarmStateSaver returns equals what LangGraph's reference saver returns.

LangGraph's ``InMemorySaver`` stores a channel's value when its version
changes, exactly as passed; a read returns the value stored at each
channel's version. Hypothesis writes conversations made of appends, in-place
edits of old messages (content and nested fields, with and without a write
to the channel), ``RemoveMessage``, replacement by id, ``REMOVE_ALL_MESSAGES``,
``update_state`` forks and a subgraph; each runs on SwarmStateSaver (every
backend) and on ``InMemorySaver`` with the same graph, and every checkpoint
of every thread and namespace must be equal: channel values, metadata,
pending writes, and the graph's view of it (values, next, step).
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings, strategies
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys

BACKENDS = ["memory", "disk", "postgres"]


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    op: str
    arg: int
    log: list[str]


class Inner(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    op: str
    arg: int


def _words(seed: int, count: int = 40) -> str:
    """Deterministic filler text, so lists soon pass the size stored as shared segments."""
    return " ".join(f"w{(seed * 7919 + i * 104729) % 100003:x}" for i in range(count))


def _pick(messages: list[Any], arg: int) -> Any:
    return messages[arg % len(messages)]


def _act(state: Any, tag: str) -> dict[str, Any]:
    """What the agent does for the op in the state: the heart of the test graph."""
    op, arg, messages = state.get("op", "append"), state.get("arg", 0), state["messages"]
    reply = AIMessage(
        content=f"{tag} reply {arg} to {len(messages)} {_words(arg + len(messages))}",
        id=f"{tag}-{arg}-{len(messages)}",
    )
    if op == "edit" and messages:
        old = _pick(messages, arg)
        old.content = f"edited {arg}"  # in place, then the channel is written
        old.additional_kwargs.setdefault("notes", []).append(arg)
        return {"messages": [reply]}
    if op == "edit_nested" and messages:
        old = _pick(messages, arg)
        old.additional_kwargs["deep"] = {"level": [arg, {"x": arg}]}
        old.response_metadata["n"] = arg  # nested, in place
        return {"messages": [reply]}
    if op == "edit_silent" and messages:
        # In place and the channel is NOT written: its version stays, and the
        # reference keeps the value stored at that version.
        _pick(messages, arg).content = f"silently edited {arg}"
        return {"log": [f"silent {arg}"]}
    if op == "remove" and len(messages) > 1:
        return {"messages": [RemoveMessage(id=_pick(messages, arg).id)]}
    if op == "replace" and messages:
        old = _pick(messages, arg)
        return {"messages": [AIMessage(content=f"replaced {arg}", id=old.id)]}
    if op == "remove_all":
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), reply]}
    return {"messages": [reply]}


def _inner_agent(state: Inner) -> dict[str, Any]:
    return _act(state, "inner")


def build(saver: Any) -> Any:
    inner = StateGraph(Inner)
    inner.add_node("inner_agent", _inner_agent)
    inner.add_edge(START, "inner_agent")
    inner.add_edge("inner_agent", END)

    def route(state: Chat) -> str:
        return "sub" if state.get("op") == "sub" else "agent"

    builder = StateGraph(Chat)
    builder.add_node("agent", lambda state: _act(state, "agent"))
    builder.add_node("sub", inner.compile())
    builder.add_node(
        "tail",
        lambda state: {
            "messages": [AIMessage(content="done", id=f"tail-{len(state['messages'])}")]
        },
    )
    builder.add_conditional_edges(START, route, ["agent", "sub"])
    builder.add_edge("agent", "tail")
    builder.add_edge("sub", "tail")
    builder.add_edge("tail", END)
    return builder.compile(checkpointer=saver)


OPS = ["append", "edit", "edit_nested", "edit_silent", "remove", "replace", "remove_all", "sub"]
steps = strategies.lists(
    strategies.one_of(
        strategies.tuples(strategies.sampled_from(OPS), strategies.integers(0, 50)),
        strategies.tuples(strategies.just("fork"), strategies.integers(0, 50)),
    ),
    min_size=1,
    max_size=7,
)


def run(saver: Any, script: list[tuple[str, int]], threads: int) -> None:
    """Play ``script`` on ``threads`` threads; a fork rewrites an older checkpoint and resumes.

    ``durability="sync"``: with the default ("async") the runtime saves a
    checkpoint in the background while the next node runs, so a node that
    edits a message in place races the serializer, in every saver alike.
    """
    graph = build(saver)
    counter = itertools.count()
    for thread in range(threads):
        config: dict[str, Any] = {"configurable": {"thread_id": f"t{thread}"}}
        # Three plain turns first, so the message list is stored as shared segments.
        for op, arg in [("append", 1), ("append", 2), ("append", 3), *script]:
            n = next(counter)
            if op == "fork":
                history = list(graph.get_state_history(config))
                if len(history) < 2:
                    continue
                target = history[arg % len(history)].config
                forked = graph.update_state(
                    target, {"messages": [HumanMessage(content=f"fork {n}", id=f"fork-{n}")]}
                )
                graph.invoke({"op": "append", "arg": arg}, forked, durability="sync")
                continue
            user = HumanMessage(content=f"user {n} {_words(n, 20 + arg % 30)}", id=f"user-{n}")
            graph.invoke({"messages": [user], "op": op, "arg": arg}, config, durability="sync")


def _snapshot(saver: Any) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every checkpoint of every thread and namespace, newest first, without ids and times.

    A subgraph's namespace carries a task id, which differs between savers
    (it derives from checkpoint ids): namespaces are named by their prefix
    and the order in which they first appeared.
    """
    by_ns: dict[tuple[str, str], list[Any]] = {}
    for found in saver.list(None):
        conf = found.config["configurable"]
        by_ns.setdefault((conf["thread_id"], conf["checkpoint_ns"]), []).append(found)
    first = {
        key: min(t.config["configurable"]["checkpoint_id"] for t in rows)
        for key, rows in by_ns.items()
    }
    names: dict[tuple[str, str], tuple[str, str]] = {}
    for thread, ns in sorted(by_ns, key=lambda k: (k[0], first[k])):
        prefix = ns.split(":")[0]
        rank = sum(1 for t, n in names.values() if t == thread and n.split("#")[0] == prefix)
        names[(thread, ns)] = (thread, f"{prefix}#{rank}")
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key, rows in by_ns.items():
        rows.sort(key=lambda t: t.config["configurable"]["checkpoint_id"], reverse=True)
        out[names[key]] = [
            {
                "values": found.checkpoint["channel_values"],
                # Ids differ between savers (they carry the time): keep their shape.
                "metadata": {
                    k: sorted(v) if k == "parents" else v
                    for k, v in found.metadata.items()
                    if k != "run_id"
                },
                "writes": sorted((w[1], repr(w[2])) for w in found.pending_writes or []),
                "has_parent": found.parent_config is not None,
            }
            for found in rows
        ]
    return out


def _graph_view(saver: Any, threads: int) -> list[list[tuple[Any, ...]]]:
    graph = build(saver)
    return [
        [
            (s.values, s.next, s.metadata.get("step") if s.metadata else None)
            for s in graph.get_state_history({"configurable": {"thread_id": f"t{t}"}})
        ]
        for t in range(threads)
    ]


@pytest.fixture(params=BACKENDS)
def fresh_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], swarmstate.BaseStore]]:
    """Makes a new, empty store of one backend per Hypothesis example."""
    opened: list[swarmstate.BaseStore] = []
    counter = itertools.count()
    with tempfile.TemporaryDirectory(prefix="swarmstate-exact-") as tmp:

        def make() -> swarmstate.BaseStore:
            store: swarmstate.BaseStore
            if request.param == "memory":
                store = swarmstate.Store()
            elif request.param == "disk":
                from swarmstate.backends.disk import DiskStore

                store = DiskStore(Path(tmp) / f"exact{next(counter)}.db")
            else:
                store = request.getfixturevalue("pg_store_factory")()
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()


def test_every_checkpoint_equals_the_reference_savers(
    fresh_store: Callable[[], swarmstate.BaseStore], request: pytest.FixtureRequest
) -> None:
    # Fewer examples on the durable backends: each runs two savers and two graphs.
    examples = 30 if request.node.callspec.params["fresh_store"] == "memory" else 8

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(script=steps, threads=strategies.integers(1, 2))
    def check(script: list[tuple[str, int]], threads: int) -> None:
        ours = SwarmStateSaver(fresh_store())
        reference = InMemorySaver()
        run(ours, script, threads)
        run(reference, script, threads)
        expected = _snapshot(reference)
        assert _snapshot(ours) == expected
        segments = [ns for ns in ours.store.namespaces("langgraph:") if ns.endswith(keys.CHUNKS)]
        assert segments, "the conversations are long enough for values stored as chunks"
        assert _graph_view(ours, threads) == _graph_view(reference, threads)
        # A saver opened afresh on the same store (no cache) reads the same.
        assert _snapshot(SwarmStateSaver(ours.store)) == expected

    check()

"""A subgraph's copies of the state it runs on share their bytes with that state.

A compiled graph used as a node gets the enclosing state as its input: its
first checkpoint holds it in ``__start__``, its next one in the channels it
maps to; the pending write of its input step holds the state, and so does
the enclosing graph's pending write of the node's result. Each copy is as
large as the conversation, every turn, so storing them anew grows the store
with the square of the turns.
Measured here on a real graph, on every store: what more turns add to the
store, against the size of the state they copy.

The graph saves with ``durability="sync"``: a copy is compared with the
enclosing checkpoint once that one is written (or cached by this saver).
With LangGraph's default (``"async"``) a subgraph's put may run before the
enclosing put it follows has started, and then stores the state whole:
correct, only larger.
"""

from __future__ import annotations

import random
import string
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from swarmstate.integrations.langgraph.format import keys


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


def _text(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choices(string.ascii_letters + " ", k=n))


def _graph(saver: SwarmStateSaver, rnd: random.Random) -> Any:
    def think(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(_text(rnd, 600))]}

    def call(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(_text(rnd, 300))]}

    agent = StateGraph(Chat)
    agent.add_node("think", think)
    agent.add_node("call", call)
    agent.add_edge(START, "think")
    agent.add_edge("think", "call")
    builder = StateGraph(Chat)
    builder.add_node("agent", agent.compile())
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


def _stored(store: swarmstate.BaseStore) -> tuple[int, int]:
    """Bytes of the thread's chunks, and of everything else of it."""
    chunks_ns = keys.chunks("t")
    chunks = rest = 0
    for namespace in store.namespaces(keys.thread_prefix("t")):
        size = sum(len(value) for _, value in store.items(namespace, raw=True))
        if namespace == chunks_ns:
            chunks += size
        else:
            rest += size
    return chunks, rest


def test_a_subgraphs_checkpoints_take_the_state_they_copy_from_the_enclosing_graph(
    make_store: Any,
) -> None:
    saver = SwarmStateSaver(make_store())
    saver.setup()
    rnd = random.Random(3)
    graph = _graph(saver, rnd)
    config = {"configurable": {"thread_id": "t"}}
    for _ in range(12):  # the state grows past the size from which values are shared
        graph.invoke({"messages": [HumanMessage(_text(rnd, 800))]}, config, durability="sync")
    state = graph.get_state(config).values["messages"]
    size = len(saver.serde.dumps_typed(state)[1])
    chunks_before, rest_before = _stored(saver.store)
    for _ in range(6):
        graph.invoke({"messages": [HumanMessage(_text(rnd, 800))]}, config, durability="sync")
    chunks_after, rest_after = _stored(saver.store)
    # Six turns add about 10 kB of messages to a state of over 27 kB. Stored
    # anew, the subgraph's two checkpoints would add two states a turn to the
    # chunks, and the two pending writes holding the state (the subgraph's
    # input, its result handed back) two more to the rest: twelve each.
    # Shared: what is new, the occasional rewrite of small chunks as one
    # larger (sharing's tiers), and the records.
    assert chunks_after - chunks_before < 3 * size, (chunks_after - chunks_before, size)
    assert rest_after - rest_before < 3 * size, (rest_after - rest_before, size)
    assert graph.get_state(config).values["messages"][: len(state)] == state
    sub = [
        t
        for t in saver.list(config)
        if t.config["configurable"]["checkpoint_ns"].startswith("agent:")
    ]
    assert any(t.checkpoint["channel_values"].get("messages") for t in sub)

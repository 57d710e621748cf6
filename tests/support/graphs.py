"""Real LangGraph graphs (plain Python nodes, no LLM) that fill a store for CLI tests."""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

from swarmstate.integrations.langgraph import SwarmStateSaver

ODD_THREAD = "odd: 3:x, ünï,c\u0001"
"""A thread id holding what an id encoding could trip on: its separators, non-ASCII, a control."""

THREADS = ["chat", ODD_THREAD, "paused", "sub"]


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


def fill_with_graphs(store: Any) -> SwarmStateSaver:
    """Run real graphs into ``store``; returns the SwarmStateSaver over it.

    Threads: ``chat`` (two turns of a conversation with a tool call),
    :data:`ODD_THREAD` (one turn), ``sub`` (a subgraph: a second checkpoint
    namespace) and ``paused`` (stopped at an interrupt: its latest
    checkpoint has pending writes).
    """
    saver = SwarmStateSaver(store)
    chat = chat_graph(saver)
    for thread, turns in (("chat", ["hello", "and again\nplease"]), (ODD_THREAD, ["hi"])):
        for text in turns:
            chat.invoke({"messages": [HumanMessage(text)]}, cfg(thread))
    chat_graph(saver, subgraph=True).invoke({"messages": [HumanMessage("nested")]}, cfg("sub"))
    chat_graph(saver, ask=True).invoke({"messages": [HumanMessage("may I?")]}, cfg("paused"))
    return saver


def _agent(state: Chat) -> dict[str, Any]:
    last = state["messages"][-1]
    call = {"name": "lookup", "args": {"q": last.content}, "id": f"call-{len(state['messages'])}"}
    return {"messages": [AIMessage("", tool_calls=[call])], "turns": state.get("turns", 0) + 1}


def _tool(state: Chat) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage(f"found {call['args']['q']}", tool_call_id=call["id"])]}


def _answer(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"the answer to {state['messages'][-1].content}")]}


def _review(state: Chat) -> dict[str, Any]:
    verdict = interrupt({"approve": state["messages"][-1].content})
    return {"messages": [AIMessage(f"reviewed: {verdict}")]}


def chat_graph(saver: Any, *, subgraph: bool = False, ask: bool = False) -> Any:
    """START -> agent (a tool call) -> tool -> answer [-> nested subgraph] [-> review] -> END."""
    builder = StateGraph(Chat)
    builder.add_node("agent", _agent)
    builder.add_node("tool", _tool)
    builder.add_node("answer", _answer)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tool")
    builder.add_edge("tool", "answer")
    last = "answer"
    if subgraph:
        inner = StateGraph(Chat)
        inner.add_node("inner", _answer)
        inner.add_edge(START, "inner")
        builder.add_node("nested", inner.compile())
        builder.add_edge(last, "nested")
        last = "nested"
    if ask:
        builder.add_node("review", _review)
        builder.add_edge(last, "review")
        last = "review"
    builder.add_edge(last, END)
    return builder.compile(checkpointer=saver)


# -- graphs for the views' finer points: DeltaChannel, dict messages, forks, joins ------

LONG_QUESTION = "Should this go out? " + "word " * 120
"""An interrupt value longer than any table cell."""


def _fold(state: list[Any], writes: list[Any]) -> list[Any]:
    return functools.reduce(add_messages, writes, state)


def _extend(state: list[str], writes: list[list[str]]) -> list[str]:
    return state + [note for write in writes for note in write]


class DeltaChat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(_fold, snapshot_frequency=3)]
    notes: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=2)]
    turns: int


def _delta_agent(state: DeltaChat) -> dict[str, Any]:
    turn = state.get("turns", 0) + 1
    return {"messages": [AIMessage(f"reply {turn}")], "notes": [f"agent {turn}"], "turns": turn}


def _delta_review(state: DeltaChat) -> dict[str, Any]:
    verdict = interrupt({"question": LONG_QUESTION, "turn": state.get("turns")})
    return {"notes": [f"review: {verdict}"]}


def delta_graph(saver: Any) -> Any:
    """Messages and notes in LangGraph's DeltaChannel: START -> agent -> review (asks) -> END."""
    builder = StateGraph(DeltaChat)
    builder.add_node("agent", _delta_agent)
    builder.add_node("review", _delta_review)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


class DictChat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], operator.add]
    turns: int


def _dict_agent(state: DictChat) -> dict[str, Any]:
    asked = state["messages"][-1]["content"]
    reply = {"role": "assistant", "content": f"you said {asked}"}
    return {"messages": [reply], "turns": state.get("turns", 0) + 1}


def dict_graph(saver: Any) -> Any:
    """Plain ``{"role", "content"}`` dicts under ``operator.add``: START -> agent -> END."""
    builder = StateGraph(DictChat)
    builder.add_node("agent", _dict_agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


class Fan(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


def _step(name: str) -> Any:
    def run(state: Fan) -> dict[str, Any]:
        return {"done": [name]}

    return run


def _each(state: Fan) -> list[Send]:
    return [Send("each", {"done": [f"item {i}"]}) for i in range(2)]


def fan_graph(saver: Any) -> Any:
    """START -> a and b at once -> join (waits for both) and two Sends -> END; stops before join."""
    builder = StateGraph(Fan)
    for name in ("a", "b", "join", "each"):
        builder.add_node(name, _step(name))
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "join")
    builder.add_conditional_edges("a", _each, ["each"])
    builder.add_edge("join", END)
    builder.add_edge("each", END)
    return builder.compile(checkpointer=saver, interrupt_before=["join"])


def fill_with_view_graphs(store: Any) -> tuple[SwarmStateSaver, dict[str, Any]]:
    """Run the graphs the views' finer points need; the saver and each thread's graph.

    Threads: ``delta`` (:func:`delta_graph`, four turns, each stopped at its
    review and resumed but the last), ``dicts`` (:func:`dict_graph`, three
    turns, then a fork from the first turn's end that runs on, so the thread
    has two branches) and ``fan`` (:func:`fan_graph`, stopped before its join).
    """
    saver = SwarmStateSaver(store)
    graphs = {"delta": delta_graph(saver), "dicts": dict_graph(saver), "fan": fan_graph(saver)}
    for turn in range(4):
        graphs["delta"].invoke({"messages": [HumanMessage(f"turn {turn}")]}, cfg("delta"))
        if turn < 3:
            graphs["delta"].invoke(Command(resume=f"ok {turn}"), cfg("delta"))
    dicts = graphs["dicts"]
    for text in ("one", "two", "three"):
        dicts.invoke({"messages": [{"role": "user", "content": text}]}, cfg("dicts"))
    history = dicts.get_state_history(cfg("dicts"))
    first_turn = next(s for s in history if s.values.get("turns") == 1)
    fork = dicts.update_state(
        first_turn.config, {"messages": [{"role": "user", "content": "instead"}]}, as_node="agent"
    )
    dicts.invoke({"messages": [{"role": "user", "content": "again"}]}, fork)
    graphs["fan"].invoke({"done": []}, cfg("fan"))
    return saver, graphs

"""Real LangGraph graphs (plain Python nodes, ``add_messages``) that fill a store for CLI tests."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

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

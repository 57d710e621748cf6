"""A chat graph for the LangGraph Agent Server, with plain Python nodes (no LLM, no network).

``reply`` answers the last user message. A message starting with
``confirm`` then pauses on an interrupt until the client resumes it with an
answer; one starting with ``wait`` sleeps for a moment (long enough to be
rolled back by a second run); anything else ends the turn.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

WAIT_SECONDS = 5.0


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


def _asked(state: Chat) -> str:
    """The text of the latest user message."""
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def reply(state: Chat) -> dict[str, Any]:
    turn = state.get("turns", 0) + 1
    return {"messages": [AIMessage(f"echo: {_asked(state)}", id=f"reply-{turn}")], "turns": turn}


def route(state: Chat) -> str:
    asked = _asked(state)
    if asked.startswith("confirm"):
        return "confirm"
    if asked.startswith("wait"):
        return "wait"
    return END


def confirm(state: Chat) -> dict[str, Any]:
    answer = interrupt({"question": f"send {_asked(state)!r}?"})
    return {"messages": [AIMessage(f"confirmed: {answer}", id=f"confirm-{state['turns']}")]}


async def wait(state: Chat) -> dict[str, Any]:
    await asyncio.sleep(WAIT_SECONDS)
    return {"messages": [AIMessage("done waiting", id=f"wait-{state['turns']}")]}


builder = StateGraph(Chat)
builder.add_node("reply", reply)
builder.add_node("confirm", confirm)
builder.add_node("wait", wait)
builder.add_edge(START, "reply")
builder.add_conditional_edges("reply", route, ["confirm", "wait", END])
builder.add_edge("confirm", END)
builder.add_edge("wait", END)
graph = builder.compile()

"""More corners where a saver could return the wrong state without an error.

Real graphs with plain Python nodes, compared with LangGraph's ``InMemorySaver``
where one applies: a ``__copy__`` fork of a checkpoint read by a resume.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

import swarmstate as ss
from swarmstate.integrations.langgraph import SwarmStateSaver

MakeStore = Callable[[], ss.BaseStore]


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


# -- 1. a __copy__ fork of a checkpoint a resume went on from ---------------------------


class Steps(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    last: str


def _stopping_graph(saver: Any) -> Any:
    """``a`` then ``b``, stopping before ``b``; ``b``'s value depends on ``a``'s."""
    builder = StateGraph(Steps)
    builder.add_node("a", lambda state: {"items": ["a"], "last": "A"})
    builder.add_node("b", lambda state: {"items": ["b"], "last": "B" + state["last"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=saver, interrupt_before=["b"])


def _fork_after_resume(saver: Any) -> tuple[Any, Any, list[Any]]:
    graph = _stopping_graph(saver)
    graph.invoke({"items": ["question"]}, cfg("f"))
    graph.invoke(None, cfg("f"))  # b runs, from the checkpoint this saver just read
    latest = graph.get_state(cfg("f"))
    fork = graph.update_state(latest.config, None, as_node="__copy__")
    history = [(s.values, s.next) for s in graph.get_state_history(cfg("f"))]
    return fork, graph.get_state(fork), history


def test_a_copy_fork_after_a_resume_holds_the_values_the_resume_wrote(
    make_store: MakeStore,
) -> None:
    store = make_store()
    fork, ours, history = _fork_after_resume(SwarmStateSaver(store))
    _, reference, reference_history = _fork_after_resume(InMemorySaver())
    assert reference.values == {"items": ["question", "a", "b"], "last": "BA"}
    assert (ours.values, ours.next) == (reference.values, reference.next)
    assert history == reference_history
    # What was stored, not what a cache holds: a new saver reads the same.
    again = _stopping_graph(SwarmStateSaver(store)).get_state(fork)
    assert again.values == reference.values


async def test_an_async_copy_fork_after_a_resume_matches_the_reference(
    make_store: MakeStore,
) -> None:
    found = []
    for saver in (SwarmStateSaver(make_store()), InMemorySaver()):
        graph = _stopping_graph(saver)
        await graph.ainvoke({"items": ["question"]}, cfg("f"))
        await graph.ainvoke(None, cfg("f"))
        latest = await graph.aget_state(cfg("f"))
        fork = await graph.aupdate_state(latest.config, None, as_node="__copy__")
        found.append((await graph.aget_state(fork)).values)
    assert found[0] == found[1] == {"items": ["question", "a", "b"], "last": "BA"}

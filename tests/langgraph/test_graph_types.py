"""The graph's own types revive under the strict default serializer, as in LangGraph's strict mode.

A state holding a dataclass with an Enum field, a pydantic model and a
NamedTuple: read back as those types by the saver that wrote them, by a new
saver on the same data in this process, and by another process whose saver
is given the state schema (``allow=[State]``). What an undeclared class reads
as, and the attack a stored record of types allowed, are in ``test_trust.py``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver

MakeStore = Callable[[], swarmstate.BaseStore]

GRAPH_MODULE = textwrap.dedent(
    '''
    """A graph whose state holds its own types."""

    import dataclasses
    import enum
    import operator
    from typing import Annotated, Any, NamedTuple, TypedDict

    import pydantic
    from langgraph.graph import END, START, StateGraph


    class Priority(enum.Enum):
        LOW = "low"
        HIGH = "high"


    @dataclasses.dataclass
    class Ticket:
        title: str
        priority: Priority


    class Note(pydantic.BaseModel):
        text: str


    class Span(NamedTuple):
        start: int
        end: int


    class State(TypedDict, total=False):
        ticket: Ticket
        notes: Annotated[list[Note], operator.add]
        span: Span


    def build(saver: Any) -> Any:
        def triage(state: State) -> dict[str, Any]:
            ticket = state.get("ticket") or Ticket("printer on fire", Priority.LOW)
            # Reads the attributes of what the previous turn stored.
            return {
                "ticket": Ticket(ticket.title.upper(), Priority.HIGH),
                "notes": [Note(text=f"seen {len(state.get('notes', []))}")],
                "span": Span(0, len(ticket.title)),
            }

        builder = StateGraph(State)
        builder.add_node("triage", triage)
        builder.add_edge(START, "triage")
        builder.add_edge("triage", END)
        return builder.compile(checkpointer=saver)
    '''
)


@pytest.fixture
def graph_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "ticket_graph.py").write_text(GRAPH_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ticket_graph", None)
    import ticket_graph

    yield ticket_graph
    sys.modules.pop("ticket_graph", None)


def cfg(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def test_the_graphs_own_types_revive_under_the_default_serializer(
    make_store: MakeStore, graph_module: Any
) -> None:
    store = make_store()
    graph = graph_module.build(SwarmStateSaver(store))
    for _ in range(3):  # each turn reads what the one before stored
        graph.invoke({}, cfg("t"), durability="sync")
    for reader in (graph, graph_module.build(SwarmStateSaver(store))):
        values = reader.get_state(cfg("t")).values
        assert isinstance(values["ticket"], graph_module.Ticket)
        assert values["ticket"].priority is graph_module.Priority.HIGH
        assert all(isinstance(note, graph_module.Note) for note in values["notes"])
        assert [note.text for note in values["notes"]] == ["seen 0", "seen 1", "seen 2"]
        assert values["span"] == graph_module.Span(0, len("PRINTER ON FIRE"))


def test_another_process_reads_the_types_its_state_schema_declares(
    tmp_path: Path, graph_module: Any
) -> None:
    from swarmstate.backends.disk import DiskStore

    path = tmp_path / "tickets.db"
    with DiskStore(path) as store:
        graph_module.build(SwarmStateSaver(store)).invoke({}, cfg("t"), durability="sync")
    reader = textwrap.dedent(
        f"""
        import ticket_graph  # found in the working directory, tmp_path
        from swarmstate.backends.disk import DiskStore
        from swarmstate.integrations.langgraph import SwarmStateSaver

        with DiskStore({str(path)!r}) as store:
            graph = ticket_graph.build(SwarmStateSaver(store, allow=[ticket_graph.State]))
            config = {{"configurable": {{"thread_id": "t"}}}}
            ticket = graph.get_state(config).values["ticket"]  # a first read: nothing written
            print(type(ticket).__name__, ticket.priority.name)
            graph.invoke({{}}, config, durability="sync")
            ticket = graph.get_state(config).values["ticket"]
            print(type(ticket).__name__, ticket.priority.name)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", reader], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Ticket", "HIGH"] * 2

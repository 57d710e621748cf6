"""Nothing a store holds decides what a reader revives: the classes come from code only.

The attack: someone who can write the store (a shared SQLite file, a
PostgreSQL role, a restored backup) plants a row in the record of graph types
that earlier releases kept, naming ``subprocess.Popen``, and a channel value
holding LangGraph's constructor extension for it. Every reader (a fresh
saver, the read-only ``threads``, ``history``, ``show`` and ``check``) must
read it without running anything.

The classes a reader does revive: LangGraph's safe set, what the application
declares (``allow=``, or LangGraph's ``with_allowlist`` in its strict mode),
and every class this process wrote through a saver, at any depth, whichever
saver reads and whether or not the write was accepted. Each of those is
compared with LangGraph's ``InMemorySaver`` on the same real graph.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import operator
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pydantic
import pytest
from hypothesis import given, settings, strategies
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, Send, interrupt

import swarmstate
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver, allowlist, strict_serializer
from swarmstate.integrations.langgraph.format import keys
from tests.support.cli import run_cli

MakeStore = Callable[[], swarmstate.BaseStore]

EXT_CONSTRUCTOR_POS_ARGS = 1  # LangGraph's msgpack extension: module, name, positional args


def cfg(thread_id: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **extra}}


# -- the planted row ---------------------------------------------------------------------


def popen_value(marker: Path) -> bytes:
    """LangGraph's serialized form of ``subprocess.Popen(["touch", marker])``."""
    call = ormsgpack.packb(("subprocess", "Popen", [["touch", str(marker)]]))
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, call))


class Plain(TypedDict, total=False):
    note: str


def plain_graph(saver: Any, note: str) -> Any:
    builder = StateGraph(Plain)
    builder.add_node("write", lambda state: {"note": note})
    builder.add_edge(START, "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=saver)


def placeholder_for(planted: bytes) -> tuple[str, bytes]:
    """A str whose serialized form is exactly as long as ``planted`` (so it can be swapped)."""
    size = len(planted) - 2  # str8: 0xd9, length, bytes
    assert 32 <= size <= 255
    text = "P" * size
    packed = ormsgpack.packb(text)
    assert len(packed) == len(planted)
    return text, packed


def write_placeholder(store: swarmstate.BaseStore, marker: Path) -> tuple[bytes, bytes]:
    """A real graph writes a value of the planted size; returns (its bytes, the planted bytes)."""
    planted = popen_value(marker)
    text, packed = placeholder_for(planted)
    plain_graph(SwarmStateSaver(store, compress=False), text).invoke(
        {}, cfg("t"), durability="sync"
    )
    return packed, planted


def plant_through_the_store(store: swarmstate.BaseStore, marker: Path) -> None:
    """The record row and the value, written with the store's own API."""
    packed, planted = write_placeholder(store, marker)
    replaced = 0
    for namespace in store.namespaces(keys.ROOT):
        rows = store.items(namespace, raw=True)
        changed = [(namespace, key, v.replace(packed, planted)) for key, v in rows if packed in v]
        replaced += len(changed)
        if changed:
            store.set_many(changed, raw=True)
    assert replaced
    store.set(keys.TYPES, keys.field("subprocess") + keys.field("Popen"), None)


def plant_with_sql(path: Path, marker: Path) -> None:
    """The same, written into the DiskStore file with SQL."""
    with DiskStore(path) as store:
        packed, planted = write_placeholder(store, marker)
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT id, value FROM entries WHERE ended IS NULL").fetchall()
        replaced = 0
        for row_id, value in rows:
            if packed in value:
                db.execute(
                    "UPDATE entries SET value = ? WHERE id = ?",
                    (value.replace(packed, planted), row_id),
                )
                replaced += 1
        assert replaced
        db.execute(
            "INSERT INTO entries (ns, key, ended, size, value) VALUES (?, ?, NULL, 1, ?)",
            (keys.TYPES, keys.field("subprocess") + keys.field("Popen"), swarmstate.dumps(None)),
        )
        db.commit()
    finally:
        db.close()


def assert_nothing_ran(marker: Path, who: str) -> None:
    time.sleep(0.3)  # a command started in the background has had time to run
    assert not marker.exists(), f"{who} ran the planted command"


def read_with_fresh_savers(store: swarmstate.BaseStore, marker: Path) -> None:
    found = SwarmStateSaver(store).get_tuple(cfg("t"))
    assert_nothing_ran(marker, "get_tuple")
    assert found is not None
    # What LangGraph's strict mode returns for a class it does not allow: its arguments.
    assert found.checkpoint["channel_values"]["note"] == [["touch", str(marker)]]
    assert len(list(SwarmStateSaver(store).list(cfg("t")))) >= 2
    assert_nothing_ran(marker, "list")
    state = plain_graph(SwarmStateSaver(store), "").get_state(cfg("t"))
    assert_nothing_ran(marker, "get_state")
    assert state.values["note"] == [["touch", str(marker)]]


def read_with_every_command(target: list[str], marker: Path) -> None:
    for command in (["threads"], ["history", "t"], ["show", "t"], ["check"]):
        done = run_cli(command[0], target[0], *command[1:], *target[1:])
        assert_nothing_ran(marker, f"swarmstate {command[0]}")
        assert done.returncode == 0, (command, done.stdout, done.stderr)


def test_a_planted_type_row_runs_nothing_on_diskstore(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "planted.db"
    with DiskStore(path) as store:
        plant_through_the_store(store, marker)
    with DiskStore(path) as store:
        read_with_fresh_savers(store, marker)
    read_with_every_command([str(path)], marker)


def test_a_type_row_planted_with_sql_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "planted.db"
    plant_with_sql(path, marker)
    with DiskStore(path) as store:
        assert store.keys(keys.TYPES)  # the planted row is there, as an old store's would be
        read_with_fresh_savers(store, marker)
    read_with_every_command([str(path)], marker)


def test_a_planted_type_row_runs_nothing_on_postgresql(
    tmp_path: Path, pg_store_factory: Any, pg_conninfo: str
) -> None:
    marker = tmp_path / "ran"
    store = pg_store_factory()
    plant_through_the_store(store, marker)
    read_with_fresh_savers(store, marker)
    read_with_every_command([pg_conninfo, "--schema", store.schema], marker)


# -- the classes the writing process revives, at any depth --------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Job:
    name: str
    at: Point


@dataclasses.dataclass
class Ask:
    question: str


class Nested(TypedDict, total=False):
    data: dict[str, Any]
    done: Annotated[list[str], operator.add]
    answer: str


def nested_graph(saver: Any) -> Any:
    """A dataclass in a list in a dict, a ``Send`` carrying a dataclass, an ``interrupt(Ask)``."""

    def start(state: Nested) -> dict[str, Any]:
        return {"data": {"points": [Point(1, 2)]}}

    def fan(state: Nested) -> list[Send]:
        return [Send("work", Job("a", Point(3, 4)))]

    def work(job: Any) -> dict[str, Any]:
        return {"done": [f"{job.name}@{job.at.x}"]}  # attributes: a dict would fail here

    def ask(state: Nested) -> dict[str, Any]:
        return {"answer": interrupt(Ask("why?"))}

    builder = StateGraph(Nested)
    builder.add_node("start", start)
    builder.add_node("work", work)
    builder.add_node("ask", ask)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", fan, ["work"])
    builder.add_edge("work", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def kinds(value: Any) -> set[str]:
    """The class names of the objects in ``value``, at any depth."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, int, float, bytes, type(None))):
            continue
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            found.add(type(item).__name__)
            if isinstance(item, Send):
                stack.append(item.arg)
            elif isinstance(item, Interrupt):
                stack.append(item.value)
            elif dataclasses.is_dataclass(item):
                stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return found


def history_kinds(saver: Any, thread_id: str) -> list[tuple[list[str], list[str]]]:
    """Per checkpoint, newest first: the classes of its values and of its pending writes."""
    return [
        (
            sorted(kinds(found.checkpoint["channel_values"])),
            sorted(kinds([write[2] for write in found.pending_writes or []])),
        )
        for found in saver.list(cfg(thread_id))
    ]


def test_classes_nested_at_any_depth_revive_in_the_writing_process(
    make_store: MakeStore,
) -> None:
    ours = nested_graph(SwarmStateSaver(make_store()))
    reference = nested_graph(InMemorySaver())
    for graph in (ours, reference):
        graph.invoke({}, cfg("n"), durability="sync")
    expected = history_kinds(reference.checkpointer, "n")
    assert any("Job" in pending for _, pending in expected)  # the Send's argument
    assert any("Ask" in pending for _, pending in expected)  # the interrupt's payload
    assert any("Point" in values for values, _ in expected)  # in a list in a dict
    assert history_kinds(ours.checkpointer, "n") == expected
    state = ours.get_state(cfg("n"))
    assert state.values["data"] == {"points": [Point(1, 2)]}
    assert state.interrupts[0].value == Ask("why?")
    for graph in (ours, reference):
        graph.invoke(Command(resume="because"), cfg("n"), durability="sync")
    assert ours.get_state(cfg("n")).values == reference.get_state(cfg("n")).values


@dataclasses.dataclass
class Refused:
    text: str


class Holds(TypedDict, total=False):
    item: Any
    seen: str


def holding_graph(saver: Any) -> Any:
    builder = StateGraph(Holds)
    builder.add_node("look", lambda state: {"seen": state["item"].text})
    builder.add_edge(START, "look")
    builder.add_edge("look", END)
    return builder.compile(checkpointer=saver)


def test_a_class_whose_first_write_was_refused_revives_after_a_later_accepted_write(
    make_store: MakeStore,
) -> None:
    saver = SwarmStateSaver(make_store())
    graph = holding_graph(saver)
    stale = saver.claim("w", ttl=30)
    saver.claim("w", ttl=30)  # another worker's claim fences the first
    with pytest.raises(swarmstate.FencedError):
        graph.invoke({"item": Refused("first")}, cfg("w", fence=stale), durability="sync")
    reference = holding_graph(InMemorySaver())
    for each in (graph, reference):
        each.invoke({"item": Refused("later")}, cfg("ok"), durability="sync")
    expected = reference.get_state(cfg("ok")).values
    assert expected["item"] == Refused("later")
    assert graph.get_state(cfg("ok")).values == expected
    assert holding_graph(SwarmStateSaver(saver.store)).get_state(cfg("ok")).values == expected


@dataclasses.dataclass
class First:
    text: str


@dataclasses.dataclass
class Second:
    text: str


def test_a_long_lived_saver_and_a_new_one_give_the_same_answer(make_store: MakeStore) -> None:
    store = make_store()
    writer = SwarmStateSaver(store)
    long_lived = SwarmStateSaver(store)
    reference = InMemorySaver()
    holding_graph(writer).invoke({"item": First("one")}, cfg("one"), durability="sync")
    holding_graph(reference).invoke({"item": First("one")}, cfg("one"), durability="sync")
    holding_graph(long_lived).get_state(cfg("one"))  # it has read the store before
    holding_graph(writer).invoke({"item": Second("two")}, cfg("two"), durability="sync")
    holding_graph(reference).invoke({"item": Second("two")}, cfg("two"), durability="sync")
    expected = holding_graph(reference).get_state(cfg("two")).values
    assert expected["item"] == Second("two")
    for saver in (long_lived, SwarmStateSaver(store)):
        assert holding_graph(saver).get_state(cfg("two")).values == expected


# -- a new process: what the application declares, and nothing else ------------------------

DECLARED_MODULE = textwrap.dedent(
    '''
    """A graph whose state, Send argument and interrupt payload are its own classes."""

    import dataclasses
    import enum
    import operator
    from typing import Annotated, Any, TypedDict

    import pydantic
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send, interrupt


    class Priority(enum.Enum):
        LOW = "low"
        HIGH = "high"


    @dataclasses.dataclass
    class Ticket:
        title: str
        priority: Priority


    class Note(pydantic.BaseModel):
        text: str


    @dataclasses.dataclass
    class Job:
        name: str


    @dataclasses.dataclass
    class Ask:
        question: str


    class State(TypedDict, total=False):
        ticket: Ticket
        notes: Annotated[list[Note], operator.add]
        answer: str


    def build(saver: Any) -> Any:
        def triage(state: State) -> dict[str, Any]:
            return {"ticket": Ticket("printer", Priority.HIGH), "notes": [Note(text="seen")]}

        def fan(state: State) -> list[Send]:
            return [Send("work", Job("fix"))]

        def work(job: Job) -> dict[str, Any]:
            return {"notes": [Note(text=job.name)]}

        def ask(state: State) -> dict[str, Any]:
            return {"answer": interrupt(Ask("why?"))}

        builder = StateGraph(State)
        builder.add_node("triage", triage)
        builder.add_node("work", work)
        builder.add_node("ask", ask)
        builder.add_edge(START, "triage")
        builder.add_conditional_edges("triage", fan, ["work"])
        builder.add_edge("work", "ask")
        builder.add_edge("ask", END)
        return builder.compile(checkpointer=saver)
    '''
)

READER = textwrap.dedent(
    """
    import json, logging, sys
    module = __import__(sys.argv[2])  # found through PYTHONPATH: the test's folder
    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver, strict_serializer

    warned = []
    handler = logging.Handler()
    handler.emit = lambda record: warned.append(record.getMessage())
    logging.getLogger("swarmstate").addHandler(handler)
    mode = sys.argv[4]
    declared = [module.State, module.Job, module.Ask]
    config = {"configurable": {"thread_id": "t"}}
    found = {}
    with DiskStore(sys.argv[3]) as store:
        for _ in range(2):  # two savers, two reads: one warning per class
            if mode == "allow":
                saver = SwarmStateSaver(store, allow=declared)
            elif mode == "serde":
                saver = SwarmStateSaver(store, serde=strict_serializer(allow=declared))
            else:
                saver = SwarmStateSaver(store)
            graph = module.build(saver)
            state = graph.get_state(config)
            sends = [  # read as the graph reads (LangGraph's strict mode gives it a clone)
                w[2] for t in graph.checkpointer.list(config) for w in t.pending_writes or []
                if type(w[2]).__name__ == "Send"
            ]
            found = {
                "ticket": type(state.values["ticket"]).__name__,
                "priority": type(state.values["ticket"].priority).__name__
                if not isinstance(state.values["ticket"], dict) else "-",
                "note": type(state.values["notes"][0]).__name__,
                "job": type(sends[0].arg).__name__,
                "ask": type(state.interrupts[0].value).__name__,
            }
    print(json.dumps({"found": found, "warned": warned}))
    """
)


@pytest.fixture
def declared_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A DiskStore file this process wrote with a graph of a module never imported before."""
    name = f"declared_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(DECLARED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    path = tmp_path / "declared.db"
    with DiskStore(path) as store:
        module.build(SwarmStateSaver(store)).invoke({}, cfg("t"), durability="sync")
    yield name, path
    sys.modules.pop(name, None)


def read_in_new_process(
    tmp_path: Path, name: str, path: Path, mode: str, **env: str
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(tmp_path), name, str(path), mode],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, (str(tmp_path), os.environ.get("PYTHONPATH")))
            ),
            **env,
        },
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


EVERY_CLASS = {
    "ticket": "Ticket",
    "priority": "Priority",
    "note": "Note",
    "job": "Job",
    "ask": "Ask",
}


@pytest.mark.parametrize("mode", ["allow", "serde"])
def test_a_new_process_revives_what_the_application_declares(
    tmp_path: Path, declared_store: tuple[str, Path], mode: str
) -> None:
    result = read_in_new_process(tmp_path, *declared_store, mode)
    assert result == {"found": EVERY_CLASS, "warned": []}


def test_a_new_process_in_langgraphs_strict_mode_revives_what_the_graph_declares(
    tmp_path: Path, declared_store: tuple[str, Path]
) -> None:
    # The runtime hands the graph's saver the classes its state schema and its
    # nodes' inputs declare (with_allowlist): the Send's argument is the input
    # of the node it goes to; the interrupt's payload is declared nowhere.
    result = read_in_new_process(tmp_path, *declared_store, "none", LANGGRAPH_STRICT_MSGPACK="true")
    assert result["found"] == {**EVERY_CLASS, "ask": "dict"}
    assert [message.split(" as its fields")[0] for message in result["warned"]] == [
        f"SwarmStateSaver read a stored {declared_store[0]}.Ask"
    ]


def test_a_new_process_reads_undeclared_classes_as_fields_with_one_warning_each(
    tmp_path: Path, declared_store: tuple[str, Path]
) -> None:
    result = read_in_new_process(tmp_path, *declared_store, "none")
    assert result["found"] == {
        "ticket": "dict",
        "priority": "-",
        "note": "dict",
        "job": "dict",
        "ask": "dict",
    }
    warned = result["warned"]
    name = declared_store[0]
    for cls in ("Ticket", "Priority", "Note", "Job", "Ask"):
        named = [message for message in warned if f" {name}.{cls} as its fields" in message]
        assert len(named) == 1, (cls, warned)
        assert f"SwarmStateSaver(store, allow=[{cls}])" in named[0]
    assert len(warned) == 5


class Steps(TypedDict, total=False):
    steps: Annotated[list[tuple[Any, str]], operator.add]


class Result(pydantic.BaseModel):
    value: int


def test_langchain_classes_and_task_results_revive_in_the_writing_process(
    make_store: MakeStore,
) -> None:
    # The shapes of LangGraph's own tests that read these back as dicts before:
    # AgentAction in a tuple in a list; a @task's model read when its entrypoint resumes.
    from langchain_core.agents import AgentAction

    def run(saver: Any) -> tuple[Any, Any]:
        builder = StateGraph(Steps)
        builder.add_node("act", lambda state: {"steps": [(AgentAction("t", "x", "l"), "ok")]})
        builder.add_edge(START, "act")
        builder.add_edge("act", END)
        graph = builder.compile(checkpointer=saver)
        graph.invoke({}, cfg("a"), durability="sync")

        @task
        def make() -> Result:
            return Result(value=1)

        @entrypoint(checkpointer=saver)
        def flow(x: int) -> Any:
            made = make().result()
            interrupt("go on?")
            return made

        flow.invoke(1, cfg("f"))
        return graph.get_state(cfg("a")).values, flow.invoke(Command(resume="yes"), cfg("f"))

    expected = run(InMemorySaver())
    assert isinstance(expected[0]["steps"][0][0], AgentAction)
    assert expected[1] == Result(value=1)
    assert run(SwarmStateSaver(make_store())) == expected


@pytest.mark.parametrize("allow", ["Ticket", [42], [("module",)], [("module", "")]])
def test_allow_must_name_classes(allow: Any) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError, match="allow"):
        SwarmStateSaver(swarmstate.Store(), allow=allow)
    with pytest.raises(swarmstate.InvalidArgumentError, match="allow"):
        strict_serializer(allow=allow)


def test_a_value_that_holds_itself_is_walked_once() -> None:
    from swarmstate.integrations.langgraph import allowlist

    loop: list[Any] = [Point(1, 2)]
    loop.append(loop)
    assert allowlist.objects_in({"a": loop, "b": loop}) == {Point}


def test_a_list_of_messages_is_checked_at_once_and_an_object_in_one_is_still_found() -> None:
    from langchain_core.messages import AIMessage

    from swarmstate.integrations.langgraph import allowlist

    messages = [AIMessage(content=f"m{i}", id=f"m{i}") for i in range(20)]
    assert allowlist.objects_in({"messages": messages}) == {AIMessage}
    messages[7].additional_kwargs["where"] = [Point(1, 2)]
    assert allowlist.objects_in({"messages": messages}) == {AIMessage, Point}


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


class Shown(pydantic.BaseModel):
    at: int

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def level(self) -> Level:
        return Level.HIGH if self.at else Level.LOW


def test_a_models_computed_field_is_walked_as_the_serializer_writes_it() -> None:
    from swarmstate.integrations.langgraph import allowlist

    # model_dump keeps an Enum member as it is: the serializer writes its class.
    assert allowlist.objects_in([Shown(at=1)]) == {Shown, Level}


def test_a_planted_class_name_is_logged_escaped(caplog: pytest.LogCaptureFixture) -> None:
    store = swarmstate.Store()
    planted = ormsgpack.packb(("evil\x1b[2J", "Name\nforged line", {"a": 1}))
    extension = ormsgpack.packb(ormsgpack.Ext(2, planted))  # constructor with keyword args
    text, packed = placeholder_for(extension)
    plain_graph(SwarmStateSaver(store, compress=False), text).invoke({}, cfg("t"))
    for namespace in store.namespaces(keys.ROOT):
        rows = store.items(namespace, raw=True)
        changed = [(namespace, k, v.replace(packed, extension)) for k, v in rows if packed in v]
        if changed:
            store.set_many(changed, raw=True)
    with caplog.at_level(logging.WARNING, logger="swarmstate"):
        found = SwarmStateSaver(store).get_tuple(cfg("t"))
    assert found is not None
    assert found.checkpoint["channel_values"]["note"] == {"a": 1}
    ours = [r.getMessage() for r in caplog.records if r.name == "swarmstate"]
    assert len(ours) == 1
    assert "\x1b" not in ours[0]
    assert "\n" not in ours[0]
    assert "'evil\\x1b[2J.Name\\nforged line'" in ours[0]


# -- the check that spares plain data a walk never misses an object ----------------------


@dataclasses.dataclass
class Marked:
    label: str


_TEXTS = strategies.one_of(
    strategies.text(max_size=300),
    # Lengths whose msgpack header bytes are extension markers (0xc7-0xc9, 0xd4-0xd8).
    strategies.sampled_from([199, 200, 201, 212, 213, 214, 215, 216]).map(lambda n: "x" * n),
    strategies.text(alphabet="\u0500\u05d0\u0627\u01c8\u0248", max_size=200),
)
_LEAVES = strategies.one_of(
    strategies.sampled_from(["m", "mm", "ab"]).map(Marked),
    _TEXTS,
    strategies.integers(min_value=-(2**63), max_value=2**64 - 1),
    strategies.floats(allow_nan=False),
    strategies.booleans(),
    strategies.none(),
    _TEXTS.map(Marked),
)
_VALUES = strategies.recursive(
    _LEAVES,
    lambda inner: strategies.one_of(
        strategies.lists(inner, max_size=12),
        strategies.dictionaries(_TEXTS, inner, max_size=6),
    ),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_the_quick_check_finds_every_object_a_walk_finds(value: Any) -> None:
    kind, data = JsonPlusSerializer().dumps_typed(value)
    assert allowlist.classes_in(value, kind, data) == allowlist.objects_in(value)


class _Color(enum.StrEnum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize("value", ["plain", 7, 2.5, True, _Color.RED, _Level.HIGH])
def test_a_scalar_holds_no_object_and_a_subclass_of_one_is_still_found(value: Any) -> None:
    # A str, int, float or bool is answered without looking at its bytes; an enum
    # member of one of those types is an object the reader must be allowed to revive.
    kind, data = JsonPlusSerializer().dumps_typed(value)
    expected = {type(value)} if isinstance(value, enum.Enum) else set()
    assert allowlist.classes_in(value, kind, data) == expected == allowlist.objects_in(value)


def test_the_quick_check_finds_objects_packed_as_fixed_size_extensions() -> None:
    # An object whose data is exactly 8 or 16 bytes is a fixext 8 or 16, not an ext 8.
    found = []
    for module, name in (("mm", "AB"), ("module", "Named1")):
        cls = dataclasses.make_dataclass(name, [])
        cls.__module__ = module
        kind, data = JsonPlusSerializer().dumps_typed({"x": [cls()]})
        found.append(data[data.index(0x91) + 1])  # the marker of the list's one item
        assert allowlist.classes_in({"x": [cls()]}, kind, data) == {cls}
    assert found == [0xD7, 0xD8]

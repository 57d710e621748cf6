"""Stored models rebuilt without validation from their third read: the serializer's result."""

from __future__ import annotations

import copy
from typing import Annotated, Any, ClassVar, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, PrivateAttr, field_validator

from swarmstate.integrations.langgraph import SwarmStateSaver, strict_serializer
from swarmstate.integrations.langgraph.revive import Reviver

READS = 5  # the first two are the serializer's, the rest rebuilt (for models that allow it)


class Counted(BaseModel):
    """A model that counts its validations: how the tests see which reads were rebuilt."""

    made: ClassVar[int] = 0
    text: str
    tags: list[str] = []
    meta: dict[str, Any] = {}

    def __init__(self, **data: Any) -> None:
        type(self).made += 1
        super().__init__(**data)


class Shouting(BaseModel):
    """Validation changes the stored value again each time (not idempotent)."""

    text: str

    @field_validator("text")
    @classmethod
    def _louder(cls, value: str) -> str:
        return value + "!"


class Pair(BaseModel):
    """A tuple field: stored as a msgpack array, validated back to a tuple."""

    both: tuple[int, int]


class Secret(BaseModel):
    """A private attribute set by validation: state outside ``__dict__``."""

    text: str
    _seen: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any) -> None:
        self._seen = len(self.text)


class Holder(BaseModel):
    """A nested model: its fields hold a model, not plain data."""

    inner: Counted


def _serde(*classes: type) -> JsonPlusSerializer:
    return strict_serializer().with_msgpack_allowlist([(c.__module__, c.__name__) for c in classes])


def _messages() -> list[Any]:
    return [
        HumanMessage("what is the weather", id="u1", additional_kwargs={"lang": "en"}),
        AIMessage(
            "let me look",
            id="a1",
            tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            response_metadata={"model": "m", "nested": {"k": [1, 2.5, None, True]}},
        ),
        ToolMessage("cloudy", tool_call_id="c1", id="t1", artifact={"raw": [1, 2]}),
        AIMessage([{"type": "text", "text": "it is cloudy"}], id="a2", name="bot"),
    ]


def _same(a: Any, b: Any) -> bool:
    """Equal with the same classes all the way down, key order, fields-set and private state."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, BaseModel):
        return (
            _same(a.__dict__, b.__dict__)
            and a.__pydantic_fields_set__ == b.__pydantic_fields_set__
            and _same(a.__pydantic_extra__, b.__pydantic_extra__)
            and _same(a.__pydantic_private__, b.__pydantic_private__)
        )
    return bool(a == b)


def test_every_read_of_messages_is_the_serializers_own_decode() -> None:
    serde = strict_serializer()
    pair = serde.dumps_typed(_messages())
    reviver = Reviver(1 << 20)
    for _ in range(READS):
        assert _same(reviver.loads(serde, pair), serde.loads_typed(pair))


def test_models_are_validated_at_their_first_two_reads_only() -> None:
    serde = _serde(Counted)
    pair = serde.dumps_typed([Counted(text="a", tags=["x"], meta={"n": 1}), Counted(text="b")])
    reviver = Reviver(1 << 20)
    Counted.made = 0
    reads = [reviver.loads(serde, pair) for _ in range(READS)]
    assert Counted.made == 2 * 2  # two models, validated at reads one and two
    expected = serde.loads_typed(pair)
    assert all(_same(read, expected) for read in reads)


def test_equal_models_in_one_read_count_as_one_meeting() -> None:
    serde = _serde(Counted)
    pair = serde.dumps_typed([Counted(text="same")] * 3)
    reviver = Reviver(1 << 20)
    Counted.made = 0
    reads = [reviver.loads(serde, pair) for _ in range(READS)]
    # Read one validates all three; read two learns the shape at the first.
    assert Counted.made == 3 + 1
    assert all(_same(read, serde.loads_typed(pair)) for read in reads)
    assert len({id(model) for read in reads for model in read}) == 3 * READS


def test_what_the_reviver_remembers_stays_within_its_budget() -> None:
    serde = _serde(Counted)
    budget = 20_000
    reviver = Reviver(budget)
    for batch in range(40):
        models = [Counted(text=f"{batch}-{i}-" + "x" * 50) for i in range(25)]
        reviver.loads(serde, serde.dumps_typed(models))
    (shapes,) = reviver._shapes.values()
    for generation in (shapes._young, shapes._old):
        assert 0 < sum(len(data) + 200 for data in generation) <= budget // 2


def test_one_read_of_more_models_than_the_budget_holds_stays_within_it() -> None:
    serde = _serde(Counted)
    budget = 16_384
    reviver = Reviver(budget)
    models = [Counted(text=f"{i}-" + "x" * 50) for i in range(2_000)]
    pair = serde.dumps_typed(models)
    for _ in range(3):
        assert _same(reviver.loads(serde, pair), serde.loads_typed(pair))
    (shapes,) = reviver._shapes.values()
    entry = max(len(data) + 200 for data in [*shapes._young, *shapes._old])
    for generation in (shapes._young, shapes._old):
        assert sum(len(data) + 200 for data in generation) <= budget // 2 + entry


def test_no_two_reads_share_a_mutable_value() -> None:
    serde = strict_serializer()
    pair = serde.dumps_typed(_messages())
    reviver = Reviver(1 << 20)
    reads = [reviver.loads(serde, pair) for _ in range(READS)]
    pristine = copy.deepcopy(reads[-1])
    for read in reads[:-1]:  # edit every earlier read in place, deep inside too
        read[0].additional_kwargs["lang"] = "de"
        read[1].tool_calls[0]["args"]["city"] = "Bergen"
        read[1].response_metadata["nested"]["k"].append("x")
        read[1].__pydantic_fields_set__.discard("id")
        read[3].content[0]["text"] = "edited"
    assert _same(reads[-1], pristine)
    assert _same(reviver.loads(serde, pair), serde.loads_typed(pair))


@pytest.mark.parametrize(
    ("model", "make"),
    [
        (Shouting, lambda: Shouting(text="hey")),
        (Pair, lambda: Pair(both=(1, 2))),
        (Secret, lambda: Secret(text="four")),
    ],
    ids=["validation-changes-the-value", "tuple-field", "private-attribute"],
)
def test_a_model_rebuilding_would_change_is_decoded_by_the_serializer_every_time(
    model: type, make: Any
) -> None:
    serde = _serde(model)
    pair = serde.dumps_typed([make(), make()])
    reviver = Reviver(1 << 20)
    for _ in range(READS):
        read, expected = reviver.loads(serde, pair), serde.loads_typed(pair)
        assert _same(read, expected)
        assert type(read[0]) is model


def test_a_nested_model_is_decoded_by_the_serializer_every_time() -> None:
    serde = _serde(Holder, Counted)
    pair = serde.dumps_typed([Holder(inner=Counted(text="in"))] * 2)
    reviver = Reviver(1 << 20)
    Counted.made = 0
    for _ in range(READS):
        read = reviver.loads(serde, pair)
        assert _same(read, serde.loads_typed(pair))
        assert type(read[0].inner) is Counted
    assert Counted.made == 2 * 2 * READS  # the reviver's read and the reference, every time


def test_each_allowlist_gets_what_it_allows() -> None:
    """One reviver, two serializers: a model one of them does not allow comes back as fields."""
    allowing, refusing = _serde(Counted), strict_serializer()
    pair = allowing.dumps_typed([Counted(text="a"), Counted(text="b")])
    reviver = Reviver(1 << 20)
    for _ in range(READS):
        assert type(reviver.loads(allowing, pair)[0]) is Counted
    for _ in range(READS):
        read = reviver.loads(refusing, pair)
        assert read == refusing.loads_typed(pair)
        assert type(read[0]) is dict


def test_a_serializer_that_reads_otherwise_is_left_to_itself() -> None:
    class Marking(JsonPlusSerializer):
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return ["its own", super().loads_typed(data)]

    serde = Marking()
    pair = serde.dumps_typed(_messages())
    reviver = Reviver(1 << 20)
    for _ in range(READS):
        assert reviver.loads(serde, pair)[0] == "its own"


def test_a_zero_budget_turns_it_off() -> None:
    serde = _serde(Counted)
    pair = serde.dumps_typed([Counted(text="a")])
    reviver = Reviver(0)
    Counted.made = 0
    for _ in range(READS):
        assert _same(reviver.loads(serde, pair), serde.loads_typed(pair))
    assert Counted.made == 2 * READS


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _chat(saver: Any) -> Any:
    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [
                AIMessage(
                    f"answer {n}",
                    id=f"a{n}",
                    tool_calls=[{"name": "look", "args": {"n": n}, "id": f"c{n}"}],
                ),
                ToolMessage(f"result {n}", tool_call_id=f"c{n}", id=f"t{n}"),
            ]
        }

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def test_a_graphs_state_read_again_and_again_is_the_reference_and_edits_do_not_leak(
    saver: SwarmStateSaver,
) -> None:
    ours, reference = _chat(saver), _chat(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(6):
        for graph in (ours, reference):
            graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"u{turn}")]}, config)
    expected = reference.get_state(config).values["messages"]
    for _ in range(READS):
        state = ours.get_state(config).values["messages"]
        assert _same(state, expected)
        state[1].tool_calls[0]["args"]["n"] = "edited"  # the caller edits what it got
        state[0].content = "edited"
    history = [s.values["messages"] for s in ours.get_state_history(config)]
    assert all(
        _same(a, b)
        for a, b in zip(
            history,
            [s.values["messages"] for s in reference.get_state_history(config)],
            strict=True,
        )
    )

"""Property tests of the byte-level sharing of versions and of the serialized-item memo."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings, strategies
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from swarmstate.integrations.langgraph import sharing
from swarmstate.integrations.langgraph.memo import Contents, Generations, Memo

items = strategies.one_of(
    strategies.integers(-(2**40), 2**40),
    strategies.text(max_size=30),
    strategies.integers(30, 90).map(lambda n: "lorem ipsum " * n),
    strategies.binary(max_size=20),
    strategies.none(),
    strategies.dictionaries(
        strategies.text(max_size=5), strategies.integers(-(2**40), 2**40), max_size=3
    ),
)

# An edit script: each step turns the previous value into the next one.
edits = strategies.lists(
    strategies.tuples(
        strategies.sampled_from(
            ["append", "extend", "edit", "remove", "insert", "clear", "trim", "slide", "swap"]
        ),
        strategies.integers(0, 1000),
        items,
    ),
    min_size=1,
    max_size=60,
)


def _apply(current: list[Any], op: str, where: int, item: Any) -> list[Any]:
    new = list(current)
    if op == "append":
        new.append(item)
    elif op == "extend":
        new.extend([item] * (where % 5 + 1))
    elif op == "edit" and new:
        new[where % len(new)] = item
    elif op == "remove" and new:
        del new[where % len(new)]
    elif op == "insert":
        new.insert(where % (len(new) + 1), item)
    elif op == "clear":
        new = [item]
    elif op == "trim" and new:
        new = new[where % len(new) :]
    elif op == "slide":  # the oldest items out and a new one in, in one version
        new = [*new[where % 4 :], item]
    elif op == "swap" and new:  # one item out of the middle, one added at the end
        del new[where % len(new)]
        new.append(item)
    return new


@settings(max_examples=200, deadline=None)
@given(script=edits, shape=strategies.sampled_from(["list", "dict", "text"]))
def test_every_version_reads_back_byte_for_byte_and_old_versions_stay_readable(
    script: list[tuple[str, int, Any]], shape: str
) -> None:
    chunks: dict[str, bytes] = {}
    versions: list[sharing.Version] = []
    base: sharing.Version | None = None
    current: list[Any] = []
    for op, where, item in script:
        current = _apply(current, op, where, item)
        value: Any = current
        if shape == "dict":
            value = {str(i): v for i, v in enumerate(current)}
        elif shape == "text":
            value = " ".join(map(repr, current))
        data = ormsgpack.packb(value)
        made, new = sharing.whole(data) if base is None else sharing.share(data, base)
        for key, chunk in new:
            assert key not in chunks, "chunk keys are never reused"
            chunks[key] = chunk
        assert {key for key, _ in new} <= set(sharing.chunk_keys(made.parts))
        assert made.data == data
        assert made.ends[-1] == len(data)
        assert len(made.parts) <= sharing.MAX_PARTS
        versions.append(made)
        base = made
    # Every version, from the chunks alone, is the serializer's bytes again.
    for made in versions:
        assert sharing.assemble(made.parts, chunks) == made.data


def _written(values: list[Any]) -> tuple[int, int, sharing.Version]:
    """Bytes of new chunks and of all versions whole, storing ``values`` one after another."""
    base: sharing.Version | None = None
    written = whole = 0
    for value in values:
        data = ormsgpack.packb(value)
        base, new = sharing.whole(data) if base is None else sharing.share(data, base)
        written += sum(len(chunk) for _, chunk in new)
        whole += len(data)
    assert base is not None
    return written, whole, base


def _text(i: int, words: int = 40) -> str:
    return " ".join(f"w{(i * 7919 + k * 104729) % 1000003:x}" for k in range(words))


def test_appending_writes_about_the_new_items_and_reads_stay_short() -> None:
    current: list[Any] = []
    versions = []
    for i in range(2_000):
        current = [*current, {"i": i, "text": _text(i, i % 12)}]
        versions.append(current)
    written, _, last = _written(versions)
    assert len(last.parts) <= sharing.MAX_PARTS
    # Each byte is rewritten about once per tier (log_16 of the size, amortized).
    assert written < 5 * len(last.data)


def test_compacting_a_version_makes_one_chunk_per_merged_run_and_copies_each_byte_once() -> None:
    # More parts than a version keeps, of sizes across tiers: merged down to half the
    # limit, each run merged (however many merges made it) is written once.
    sizes = [(97 * k) % 2_900 + 64 for k in range(sharing.MAX_PARTS + 9)]
    data = bytes(k % 251 for k in range(sum(sizes)))
    parts: list[sharing.Part] = []
    stored: dict[str, bytes] = {}
    at = 0
    for k, size in enumerate(sizes):
        stored[f"base-{k}"] = data[at : at + size]
        parts.append((f"base-{k}", 0, size))
        at += size
    keys_made: list[str] = []

    def new_key() -> str:
        keys_made.append(f"new-{len(keys_made)}")
        return keys_made[-1]

    edited = bytes([255]) + data[1:]  # the first byte edited: the rest is the base's parts
    made, chunks = sharing.share(edited, sharing.version(data, parts), new_key)
    assert len(made.parts) <= sharing.MAX_PARTS // 2
    assert [key for key, _ in chunks] == keys_made  # no chunk made, copied, then dropped
    assert sorted(keys_made) == sorted(k for k in sharing.chunk_keys(made.parts) if k in keys_made)
    assert sum(len(chunk) for _, chunk in chunks) <= len(edited)
    assert sharing.assemble(made.parts, {**stored, **dict(chunks)}) == edited


def test_an_edit_in_the_middle_writes_about_the_edited_item() -> None:
    current = [{"i": i, "text": _text(i, 8)} for i in range(1_000)]
    edited = list(current)
    edited[500] = {"i": -1, "text": "edited"}
    written, _, _ = _written([current, edited])
    assert written - len(ormsgpack.packb(current)) < 200


def test_a_window_trimmed_as_items_are_added_writes_about_the_added_items() -> None:
    window: list[Any] = [{"role": "user", "content": _text(i)} for i in range(24)]
    versions = []
    for i in range(24, 224):
        window = [*window[1:], {"role": "assistant", "content": _text(i)}]
        versions.append(window)
    written, whole, _ = _written(versions)
    assert written < whole / 8


@pytest.mark.parametrize("dropped", [1, 3, 9])
def test_a_window_whose_items_open_alike_takes_the_rest_from_where_it_really_starts(
    dropped: int,
) -> None:
    # Every item has the same length and opens with the same 60 characters, so
    # the new bytes' first bytes are found in the base at every item; only one
    # place begins the rest of it.
    opening = "x" * 60
    window = [f"{opening} item {i:04d} {'y' * 100}" for i in range(30)]
    base, chunks = sharing.whole(ormsgpack.packb(window))
    added = f"{opening} item 0099 {'y' * 100}"
    data = ormsgpack.packb([*window[dropped:], added])
    made, new = sharing.share(data, base)
    assert sharing.assemble(made.parts, dict(chunks + new)) == data
    assert made.fresh <= len(ormsgpack.packb(added)) + 8  # the added item, maybe a header


def test_a_dict_with_one_key_changed_writes_about_that_key() -> None:
    docs = {f"doc{k}": _text(k, 150) for k in range(60)}
    versions = [docs]
    for i in range(100):
        docs = {**docs, f"doc{(i * 37) % 60}": _text(1000 + i, 150)}
        versions.append(docs)
    written, whole, _ = _written(versions)
    assert written < whole / 10


def test_a_text_rewritten_at_both_ends_writes_about_the_ends() -> None:
    draft = _text(1, 6000)[:40_000]
    versions = [draft]
    for i in range(50):
        draft = _text(i, 3) + draft[30:-30] + _text(i + 7, 3)
        versions.append(draft)
    written, whole, _ = _written(versions)
    assert written < whole / 10


def test_a_value_that_shares_nothing_is_one_new_chunk() -> None:
    first = ormsgpack.packb([_text(i) for i in range(20)])
    second = ormsgpack.packb([_text(100 + i) for i in range(20)])
    base, _ = sharing.whole(first)
    _made, new = sharing.share(second, base)
    assert len(new) == 1
    assert len(new[0][1]) >= len(second) - 8  # all of it, but maybe a header


def test_a_match_is_only_ever_equal_bytes() -> None:
    # Repeated content must not make a run of bytes that differ.
    base, chunks = sharing.whole(ormsgpack.packb(["same text " * 20] * 30))
    data = ormsgpack.packb(["same text " * 20] * 29 + ["other"] + ["same text " * 20])
    made, new = sharing.share(data, base)
    assert sharing.assemble(made.parts, dict(chunks + new)) == data


def _messages(n: int) -> list[Any]:
    return [
        (HumanMessage if i % 2 else AIMessage)(
            content=f"message {i} " * 5, id=f"m{i}", additional_kwargs={"n": i}
        )
        for i in range(n)
    ]


def _serialized(memo: Memo, serde: Any, items: list[Any], previous: Any = None) -> bytes:
    made = memo.serialize(serde, items, previous)
    assert made is not None
    return made[0]


def _version(memo: Memo, serde: Any, items: list[Any]) -> tuple[Contents, bytes]:
    """The contents and bytes of ``items``, as a parent version for the next serialize."""
    made = memo.serialize(serde, items)
    assert made is not None
    return made[1], made[0]


def test_the_memo_gives_the_serializers_bytes_and_sees_in_place_edits() -> None:
    serde = JsonPlusSerializer()
    memo = Memo(1 << 24)
    messages = _messages(40)
    assert _serialized(memo, serde, messages) == serde.dumps_typed(messages)[1]
    # Edited in place: same objects, other content. Each edit must be seen.
    messages[3].content = "changed"
    messages[7].additional_kwargs["n"] = 7.0  # equal as a number, another type
    messages[9].additional_kwargs["nested"] = {"a": [1, 2]}
    messages[11].additional_kwargs = {"n": True}
    assert _serialized(memo, serde, messages) == serde.dumps_typed(messages)[1]
    messages[9].additional_kwargs["nested"]["a"].append(3)  # deep, in place
    assert _serialized(memo, serde, messages) == serde.dumps_typed(messages)[1]
    # Fresh objects with the same content hit; the bytes are still exact.
    copies = serde.loads_typed(serde.dumps_typed(messages))
    assert _serialized(memo, serde, copies) == serde.dumps_typed(messages)[1]


def test_an_appended_list_takes_its_old_items_bytes_from_the_parent_version() -> None:
    serde = JsonPlusSerializer()
    memo = Memo(1 << 24)
    messages = _messages(40)
    parent = _version(memo, serde, messages)
    memo._bytes = Generations(1 << 24, lambda key, value: len(value))  # items forgotten
    grown = messages + _messages(45)[40:]
    assert _serialized(memo, serde, grown, parent) == serde.dumps_typed(grown)[1]
    # Only the five new items were looked up: the forty came from the parent.
    assert len(memo._bytes._young) == len(grown) - len(messages) == 5


def test_a_window_trimmed_at_the_front_takes_the_rest_from_the_parent_version() -> None:
    serde = JsonPlusSerializer()
    for dropped in (1, 2, 4):
        memo = Memo(1 << 24)
        messages = _messages(40)
        parent = _version(memo, serde, messages)
        memo._bytes = Generations(1 << 24, lambda key, value: len(value))  # items forgotten
        window = messages[dropped:] + _messages(43)[40:]
        assert _serialized(memo, serde, window, parent) == serde.dumps_typed(window)[1]
        assert len(memo._bytes._young) == 3, dropped  # the three new ones


def test_an_edit_the_parent_version_does_not_hold_is_seen_through_the_prefix() -> None:
    serde = JsonPlusSerializer()
    memo = Memo(1 << 24)

    class Twin(HumanMessage):  # the same fields as its base: only the class differs
        pass

    for edit in ("content", "nested", "extra", "class", "removed", "shorter", "window"):
        messages = _messages(40)
        parent = _version(memo, serde, messages)
        if edit == "window":  # the front trimmed, and a kept item edited
            messages = messages[2:]
            messages[30].content = "changed"
        elif edit == "extra":
            messages[4].__pydantic_extra__["note"] = "added in place"
        elif edit == "content":
            messages[3].content = "changed"
        elif edit == "nested":
            messages[9].additional_kwargs["n"] = float(messages[9].additional_kwargs["n"])
        elif edit == "class":
            messages[1] = Twin(**messages[1].__dict__)
        elif edit == "removed":
            del messages[20]
        else:
            messages = messages[:30]
        grown = messages + _messages(45)[40:]
        assert _serialized(memo, serde, grown, parent) == serde.dumps_typed(grown)[1], edit


def test_generations_get_many_answers_as_get_does_key_by_key() -> None:
    def filled() -> Generations[str, bytes]:
        held: Generations[str, bytes] = Generations(8, lambda key, value: len(value))
        for key in "abc":
            held.put(key, key.encode() * 4)  # c's put turns a and b into the old generation
        return held

    keys = ["a", "x", "c", "b", "c", "a"]
    one_by_one = filled()
    expected = [one_by_one.get(key) for key in keys]
    assert expected[:3] == [b"aaaa", None, b"cccc"]  # an old hit, a miss, a young hit
    many = filled()
    assert many.get_many(keys) == expected
    # Here (this order of keys) both also end holding the same entries.
    assert [key for key in "abcx" if key in many] == [key for key in "abcx" if key in one_by_one]
    assert many.get_many([]) == []


def test_the_memo_steps_aside_where_it_cannot_prove_equal_bytes() -> None:
    serde = JsonPlusSerializer()
    memo = Memo(1 << 24)
    messages = _messages(20)
    messages[2].additional_kwargs["when"] = (1, 2)  # a tuple: not plain data
    assert memo.serialize(serde, messages) is None

    class Other(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return super().dumps_typed(obj)

    assert memo.serialize(Other(), _messages(20)) is None  # another encoder: no memo
    assert memo.serialize(serde, _messages(3)) is None  # short lists go whole


def test_the_memo_knows_where_each_item_of_its_bytes_starts() -> None:
    from swarmstate.integrations.langgraph.format.items import array_header, item_ends

    serde = JsonPlusSerializer()
    memo = Memo(1 << 24)
    messages = _messages(40)
    parent = _version(memo, serde, messages)
    for version in (messages + _messages(45)[40:], messages[2:] + _messages(43)[40:]):
        made = memo.serialize(serde, version, parent)
        assert made is not None
        data, contents = made
        head = array_header(data)
        assert head is not None
        count, skip = head
        expected = [skip, *(skip + end for end in item_ends(data, skip, count))]
        assert list(contents.starts) == expected

"""Property tests of the shared-segment list layout and of the serialized-item memo."""

from __future__ import annotations

import os
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import swarmstate as ss
from swarmstate.integrations import _lg_lists as L
from swarmstate.integrations._lg_memo import Generations, Memo

items = st.one_of(
    st.integers(-(2**40), 2**40),
    st.text(max_size=30),
    # Long enough to be stored compressed (and to compress).
    st.integers(30, 90).map(lambda n: "lorem ipsum " * n),
    st.binary(max_size=20),
    st.none(),
    st.dictionaries(st.text(max_size=5), st.integers(-(2**40), 2**40), max_size=3),
)

# An edit script: each step turns the previous list into the next one.
edits = st.lists(
    st.tuples(
        st.sampled_from(
            ["append", "extend", "edit", "remove", "insert", "clear", "trim", "slide", "swap"]
        ),
        st.integers(0, 1000),
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
@given(script=edits, pack=st.booleans())
def test_every_version_reads_back_byte_for_byte_and_old_versions_stay_readable(
    script: list[tuple[str, int, Any]], pack: bool
) -> None:
    stored: dict[str, Any] = {}
    versions: list[tuple[bytes, tuple[L.Ref, ...]]] = []
    base: L.Listing | None = None
    current: list[Any] = []
    for op, where, item in script:
        current = _apply(current, op, where, item)
        data = ormsgpack.packb(current)
        built = L.build(data, base, pack=pack)
        assert built is not None
        listing, segments = built
        for key, encoded in segments:
            assert key not in stored, "segment keys are never reused"
            stored[key] = ss.loads(encoded)
        assert {key for key, _ in segments} <= {ref.key for ref in listing.refs}
        assert listing.data == data
        assert len(listing.refs) <= L.MAX_REFS
        versions.append((data, listing.refs))
        base = listing
    # Every version, from the segments alone, is the serializer's bytes again.
    parsed = {key: L.parse_segment(value) for key, value in stored.items()}
    for data, refs in versions:
        assert L.assemble(refs, parsed).data == data


def test_appending_writes_about_the_new_items_and_reads_stay_short() -> None:
    base: L.Listing | None = None
    current: list[Any] = []
    written = 0
    for i in range(2_000):
        current.append({"i": i, "text": "x" * (i % 50)})
        data = ormsgpack.packb(current)
        built = L.build(data, base)
        assert built is not None
        base, segments = built
        written += sum(len(_items(encoded)) for _, encoded in segments)
        assert len(base.refs) <= 3 * L.FANIN
    # Each item is rewritten about once per tier (log_16 of the length, amortized).
    assert written < 4 * len(base.data)


def test_an_edit_in_the_middle_writes_about_the_edited_item() -> None:
    current = [{"i": i, "text": "y" * 40} for i in range(1_000)]
    base = L.build(ormsgpack.packb(current), None)
    assert base is not None
    current[500] = {"i": -1, "text": "edited"}
    built = L.build(ormsgpack.packb(current), base[0])
    assert built is not None
    listing, segments = built
    assert (
        sum(listing.refs[i].stop - listing.refs[i].start for i in range(len(listing.refs))) == 1_000
    )
    assert sum(len(_items(encoded)) for _, encoded in segments) < 200


def test_a_window_trimmed_as_items_are_added_writes_about_the_added_items() -> None:
    # What a chat that deletes its oldest messages (RemoveMessage) to keep a
    # window does: each version drops the first items and appends one.
    def message(i: int) -> dict[str, Any]:
        return {"i": i, "text": "z" * 300}

    window: list[Any] = [message(i) for i in range(24)]
    built = L.build(ormsgpack.packb(window), None)
    assert built is not None
    base = built[0]
    written = added = 0
    for version in range(400):
        k = 1 + (version % 3 == 0)  # one or two out, as many in
        window = [*window[k:], *(message(added + 24 + j) for j in range(k))]
        added += k
        data = ormsgpack.packb(window)
        built = L.build(data, base)
        assert built is not None
        base, segments = built
        assert base.data == data
        assert base.length == 24
        written += sum(len(_items(encoded)) for _, encoded in segments)
        assert len(base.refs) <= 3 * L.TAIL_FANIN
    item = len(ormsgpack.packb(message(400)))
    # Each added item is written about once per tier it is merged into, not
    # the whole window each version (which would be 400 x 24 items).
    assert written < 3 * added * item


def test_a_later_run_is_found_only_on_an_item_boundary() -> None:
    # The first kept item's bytes also occur inside an earlier item (as a
    # bytes value): that match is no run; the one on the item boundary is.
    needle = {"k": "needle"}
    before = ["x" * 40, {"wrap": ormsgpack.packb(needle)}, "a" * 40, needle, "b" * 40, "c" * 40]
    first = L.build(ormsgpack.packb(before), None)
    assert first is not None
    after = [needle, "b" * 40, "c" * 40, "new"]
    data = ormsgpack.packb(after)
    again = L.build(data, first[0])
    assert again is not None
    listing, segments = again
    stored = {key: L.parse_segment(ss.loads(encoded)) for key, encoded in first[1] + segments}
    assert L.assemble(listing.refs, stored).data == data
    assert sum(len(_items(encoded)) for _, encoded in segments) == len(ormsgpack.packb("new"))


def _items(encoded: bytes) -> bytes:
    """A stored segment's items as they were before any compression."""
    return L.parse_segment(ss.loads(encoded))[1]


def test_a_segment_of_compressible_items_is_stored_packed_and_reads_back() -> None:
    text = [{"i": i, "text": f"message {i} " + "lorem ipsum dolor " * 20} for i in range(40)]
    assert all(len(ss.loads(e)) == 2 for _, e in L.build(ormsgpack.packb(text), None)[1])
    built = L.build(ormsgpack.packb(text), None, pack=True)
    assert built is not None
    listing, segments = built
    stored = [ss.loads(encoded) for _, encoded in segments]
    assert all(len(s) == 3 and s[2] == 1 for s in stored), "compressible items are packed"
    assert sum(len(e) for _, e in segments) < listing.size / 2
    parsed = {key: L.parse_segment(value) for (key, _), value in zip(segments, stored, strict=True)}
    assert L.assemble(listing.refs, parsed).data == listing.data


def test_items_that_do_not_compress_are_stored_as_they_are() -> None:
    noise = [os.urandom(300) for _ in range(10)]
    built = L.build(ormsgpack.packb(noise), None, pack=True)
    assert built is not None
    stored = [ss.loads(encoded) for _, encoded in built[1]]
    assert stored
    assert all(len(s) == 2 for s in stored)


@pytest.mark.parametrize(
    "damage",
    [
        lambda lengths, packed: [lengths, packed[:-5], 1],  # cut short
        lambda lengths, packed: [lengths, packed + b"\x00", 1],  # trailing bytes
        lambda lengths, packed: [[*lengths[:-1], lengths[-1] - 1], packed, 1],  # holds more
        lambda lengths, packed: [[*lengths, 10], packed, 1],  # holds less
        lambda lengths, packed: [[], packed, 1],  # names no items at all
        lambda lengths, packed: [lengths, b"not zlib at all", 1],
        lambda lengths, packed: {0: lengths, 1: packed, 2: 1},  # a map, not a list
    ],
)
def test_a_damaged_packed_segment_is_a_decode_error(damage: Any) -> None:
    text = [f"message {i} " + "lorem ipsum dolor " * 20 for i in range(8)]
    built = L.build(ormsgpack.packb(text), None, pack=True)
    assert built is not None
    (_, encoded), *_ = built[1]
    lengths, packed, tag = ss.loads(encoded)
    assert tag == 1
    with pytest.raises(ss.DecodeError):
        L.parse_segment(damage(lengths, packed))


def test_bytes_that_are_not_an_array_are_not_a_listing() -> None:
    assert L.build(ormsgpack.packb({"a": 1}), None) is None
    assert L.build(b"", None) is None


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


def _version(memo: Memo, serde: Any, items: list[Any]) -> Any:
    """The contents and listing of ``items``, as a parent version for the next serialize."""
    made = memo.serialize(serde, items)
    assert made is not None
    built = L.build(made[0], None)
    assert built is not None
    return made[1], built[0]


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

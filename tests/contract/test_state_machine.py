"""Model-based test: every backend agrees with a plain dict, step by step.

The model maps ``(namespace, key)`` to the encoded bytes of the value, and
the tagged keys to their ``(order, group)`` tags. Snapshots are recorded
with a copy of the model at that moment and checked again at every later
step: their contents, their ``size_bytes``, and the diff between any two of
them; a restore brings back the tags they had.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings, strategies
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import swarmstate

NAMESPACES = strategies.sampled_from(["", "a", "a/", "a/b", "ab", "é", "\U0001f600", "t\x00"])
KEYS = strategies.sampled_from(["", "k", "k1", "k2", "K", "ü", "x/y"])
SCALARS = (
    strategies.none()
    | strategies.booleans()
    | strategies.integers(min_value=-(2**63), max_value=2**64 - 1)
    | strategies.floats(allow_nan=False)
    | strategies.text(max_size=8)
    | strategies.binary(max_size=8)
)
VALUES = strategies.recursive(
    SCALARS,
    lambda inner: (
        strategies.lists(inner, max_size=3)
        | strategies.dictionaries(strategies.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)

Model = dict[tuple[str, str], bytes]
TagModel = dict[tuple[str, str], tuple[str | None, str | None]]

TAG_VALUES = strategies.sampled_from(["", "a", "b", "b\x00", "é", "z"])
TAGS = strategies.none() | strategies.builds(
    swarmstate.Tags, order=strategies.none() | TAG_VALUES, group=strategies.none() | TAG_VALUES
)
TAG_RANGES = strategies.tuples(
    strategies.sampled_from(["order", "group"]),
    strategies.none() | TAG_VALUES,
    strategies.none() | TAG_VALUES,
)


def tagged_of(tags: TagModel, tag: str) -> list[tuple[str, str, str]]:
    """What ``store.tagged(tag)`` lists, from the model."""
    at = 0 if tag == "order" else 1
    return sorted((pair[at], ns, key) for (ns, key), pair in tags.items() if pair[at] is not None)


def in_range(value: str, start: str | None, stop: str | None) -> bool:
    return (start is None or value >= start) and (stop is None or value < stop)


BOUNDS = strategies.none() | KEYS
# A condition's kind and names; a Holds condition's bytes are drawn with it:
# the model's bytes for the key (so that it can hold) or a value's.
CONDITIONS = strategies.tuples(
    strategies.sampled_from(["absent", "present", "holds", "holds_current", "empty"]),
    NAMESPACES,
    KEYS,
    BOUNDS,
    VALUES,
)


def condition_of(drawn: tuple[str, str, str, str | None, Any], model: Model) -> Any:
    """The condition a drawn tuple describes, against the model's current bytes."""
    kind, ns, key, bound, value = drawn
    if kind == "absent":
        return swarmstate.Absent(ns, key)
    if kind == "present":
        return swarmstate.Present(ns, key)
    if kind == "holds":
        return swarmstate.Holds(ns, key, swarmstate.dumps(value))
    if kind == "holds_current":
        return swarmstate.Holds(ns, key, model.get((ns, key), b"\xc0"))
    start, stop = (key, bound) if bound is None or key <= bound else (bound, key)
    return swarmstate.Empty(ns, start if start else None, stop)


def holds(condition: Any, model: Model) -> bool:
    if isinstance(condition, swarmstate.Empty):
        return not any(
            ns == condition.namespace
            and (condition.start is None or key >= condition.start)
            and (condition.stop is None or key < condition.stop)
            for ns, key in model
        )
    found = model.get((condition.namespace, condition.key))
    if isinstance(condition, swarmstate.Absent):
        return found is None
    if isinstance(condition, swarmstate.Present):
        return found is not None
    return found == condition.data


def model_diff(base: Model, later: Model) -> swarmstate.Diff:
    return {
        "added": sorted(k for k in later if k not in base),
        "removed": sorted(k for k in base if k not in later),
        "changed": sorted(k for k in later if k in base and later[k] != base[k]),
    }


def make_machine(factory: Any, max_history: int | None) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one backend's store factory."""

    class StoreMachine(RuleBasedStateMachine):
        snaps = Bundle("snaps")

        def __init__(self) -> None:
            super().__init__()
            self.store: swarmstate.BaseStore = factory(max_history=max_history)
            self.model: Model = {}
            self.tags: TagModel = {}
            self.recorded: list[tuple[swarmstate.Snapshot, Model]] = []
            self.recorded_tags: dict[int, TagModel] = {}

        def untag(self, pairs: Any) -> None:
            for pair in list(pairs):
                self.tags.pop(pair, None)

        def retained(self) -> list[tuple[swarmstate.Snapshot, Model]]:
            if max_history is None:
                return self.recorded
            return self.recorded[-max_history:]

        @initialize()
        def start_empty(self) -> None:
            assert len(self.store) == 0

        @rule(ns=NAMESPACES, key=KEYS, value=VALUES)
        def set(self, ns: str, key: str, value: Any) -> None:
            self.store.set(ns, key, value)
            self.model[(ns, key)] = swarmstate.dumps(value)
            self.untag([(ns, key)])

        @rule(ns=NAMESPACES, key=KEYS)
        def delete(self, ns: str, key: str) -> None:
            existed = self.store.delete(ns, key)
            assert existed == ((ns, key) in self.model)
            self.model.pop((ns, key), None)
            self.untag([(ns, key)])

        @rule(
            items=strategies.lists(strategies.tuples(NAMESPACES, KEYS, VALUES), max_size=5),
            poison=strategies.booleans(),
            if_absent=strategies.booleans(),
            ensure=strategies.lists(strategies.tuples(NAMESPACES, KEYS, VALUES), max_size=2),
        )
        def set_many(
            self,
            items: list[tuple[str, str, Any]],
            poison: bool,
            if_absent: bool,
            ensure: list[tuple[str, str, Any]],
        ) -> None:
            if poison:
                with pytest.raises(swarmstate.UnsupportedTypeError):
                    self.store.set_many(
                        [*items, ("a", "k", {1, 2})], if_absent=if_absent, ensure=ensure
                    )
                return
            self.store.set_many(items, if_absent=if_absent, ensure=ensure)
            for ns, key, value in ensure:
                if (ns, key) not in self.model:
                    self.model[(ns, key)] = swarmstate.dumps(value)
                    self.untag([(ns, key)])
            for ns, key, value in items:
                if not (if_absent and (ns, key) in self.model):
                    self.model[(ns, key)] = swarmstate.dumps(value)
                    self.untag([(ns, key)])

        @rule(
            drawn=strategies.lists(CONDITIONS, max_size=3),
            sets=strategies.lists(strategies.tuples(NAMESPACES, KEYS, VALUES, TAGS), max_size=4),
            deletes=strategies.lists(strategies.tuples(NAMESPACES, KEYS), max_size=3),
            prefixes=strategies.lists(NAMESPACES, max_size=2),
            tag_ranges=strategies.lists(TAG_RANGES, max_size=2),
            if_absent=strategies.booleans(),
        )
        def write(
            self,
            drawn: list[tuple[str, str, str, str | None, Any]],
            sets: list[tuple[str, str, Any, swarmstate.Tags | None]],
            deletes: list[tuple[str, str]],
            prefixes: list[str],
            tag_ranges: list[tuple[str, str | None, str | None]],
            if_absent: bool,
        ) -> None:
            conditions = [condition_of(d, self.model) for d in drawn]
            transaction = swarmstate.Transaction(
                conditions=conditions,
                sets=[entry[:3] if entry[3] is None else entry for entry in sets],
                deletes=deletes,
                prefix_deletes=prefixes,
                tag_deletes=tag_ranges,
                if_absent=if_absent,
            )
            if not all(holds(c, self.model) for c in conditions):
                with pytest.raises(swarmstate.ConflictError):
                    self.store.write(transaction)
                return
            model = self.model
            doomed = {k for k in model if any(k[0].startswith(p) for p in prefixes)}
            doomed |= {k for k in deletes if k in model}
            for k in doomed:
                del model[k]
            self.untag(doomed)
            for tag, start, stop in tag_ranges:
                at = 0 if tag == "order" else 1
                gone = {
                    k
                    for k, pair in self.tags.items()
                    if pair[at] is not None and in_range(pair[at], start, stop)
                }
                for k in gone:
                    del model[k]
                self.untag(gone)
                doomed |= gone
            written = 0
            for ns, key, value, tags in sets:
                if if_absent and (ns, key) in model:
                    continue
                model[(ns, key)] = swarmstate.dumps(value)
                self.untag([(ns, key)])
                if tags is not None and (tags.order is not None or tags.group is not None):
                    self.tags[(ns, key)] = (tags.order, tags.group)
                written += 1
            assert self.store.write(transaction) == swarmstate.WriteResult(written, len(doomed))

        @rule(pairs=strategies.lists(strategies.tuples(NAMESPACES, KEYS), max_size=4))
        def delete_many(self, pairs: list[tuple[str, str]]) -> None:
            expected = len({p for p in pairs if p in self.model})
            assert self.store.delete_many(pairs) == expected
            for pair in pairs:
                self.model.pop(pair, None)
            self.untag(pairs)

        @rule(prefix=NAMESPACES)
        def delete_prefix(self, prefix: str) -> None:
            doomed = [k for k in self.model if k[0].startswith(prefix)]
            assert self.store.delete_prefix(prefix) == len(doomed)
            for k in doomed:
                del self.model[k]
            self.untag(doomed)

        @rule(source=NAMESPACES, dest=NAMESPACES)
        def copy_prefix(self, source: str, dest: str) -> None:
            copies = {
                (dest + ns[len(source) :], key): data
                for (ns, key), data in self.model.items()
                if ns.startswith(source)
            }
            copied_tags = {
                (dest + ns[len(source) :], key): self.tags.get((ns, key))
                for ns, key in self.model
                if ns.startswith(source)
            }
            assert self.store.copy_prefix(source, dest) == len(copies)
            self.model.update(copies)
            for k, pair in copied_tags.items():
                self.tags.pop(k, None)
                if pair is not None:
                    self.tags[k] = pair

        @rule()
        def clear(self) -> None:
            self.store.clear()
            self.model.clear()
            self.tags.clear()

        @rule(target=snaps)
        def snapshot(self) -> swarmstate.Snapshot:
            snap = self.store.snapshot()
            self.recorded.append((snap, dict(self.model)))
            self.recorded_tags[snap.id] = dict(self.tags)
            return snap

        @rule(snap=snaps)
        def restore(self, snap: swarmstate.Snapshot) -> None:
            live = {s.id: m for s, m in self.retained()}
            if snap.id not in live:
                with pytest.raises(swarmstate.SnapshotError):
                    self.store.restore(snap)
                return
            self.store.restore(snap)
            self.model = dict(live[snap.id])
            self.tags = dict(self.recorded_tags[snap.id])

        @rule(
            tag=strategies.sampled_from(["order", "group"]),
            start=strategies.none() | TAG_VALUES,
            stop=strategies.none() | TAG_VALUES,
            reverse=strategies.booleans(),
            limit=strategies.none() | strategies.integers(min_value=0, max_value=3),
        )
        def tagged(
            self, tag: str, start: str | None, stop: str | None, reverse: bool, limit: int | None
        ) -> None:
            expected = [e for e in tagged_of(self.tags, tag) if in_range(e[0], start, stop)]
            if reverse:
                expected.reverse()
            if limit is not None:
                expected = expected[:limit]
            got = self.store.tagged(tag, start=start, stop=stop, reverse=reverse, limit=limit)
            assert got == expected

        @precondition(lambda self: factory.durable)
        @rule()
        def reopen(self) -> None:
            self.store = factory.reopen(self.store, max_history=max_history)
            retained = self.retained()
            assert [s.id for s in self.store.snapshots()] == [s.id for s, _ in retained]
            # Snapshots taken before the reopen are re-read from the new store.
            by_id = {s.id: s for s in self.store.snapshots()}
            self.recorded = [(by_id[s.id], m) for s, m in retained]

        @rule(data=strategies.data())
        def diff_two_snapshots(self, data: strategies.DataObject) -> None:
            retained = self.retained()
            if not retained:
                return
            base, base_model = data.draw(strategies.sampled_from(retained))
            later, later_model = data.draw(strategies.sampled_from(retained))
            assert later.diff(base) == model_diff(base_model, later_model)

        @invariant()
        def store_equals_model(self) -> None:
            namespaces = sorted({ns for ns, _ in self.model})
            assert self.store.namespaces() == namespaces
            seen: Model = {}
            for ns in namespaces:
                for key, value in self.store.items(ns):
                    seen[(ns, key)] = swarmstate.dumps(value)
            assert seen == self.model
            assert len(self.store) == len(self.model)
            assert self.store.tagged("order") == tagged_of(self.tags, "order")
            assert self.store.tagged("group") == tagged_of(self.tags, "group")

        @invariant()
        def snapshots_keep_their_contents(self) -> None:
            assert [s.id for s in self.store.snapshots()] == [s.id for s, _ in self.retained()]
            for snap, model in self.retained():
                assert snap.keys == sorted(model)
                assert snap.count == len(model)
                assert snap.size_bytes == sum(len(v) for v in model.values())
                for (ns, key), data in model.items():
                    assert swarmstate.dumps(snap.get(ns, key)) == data

        def teardown(self) -> None:
            self.store.close()

    return StoreMachine


EXAMPLES = {"memory": 60, "disk": 25, "postgres": 15}


@pytest.mark.parametrize("max_history", [None, 2])
def test_store_agrees_with_dict_model(store_factory: Any, max_history: int | None) -> None:
    machine = make_machine(store_factory, max_history)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES[store_factory.backend],
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )

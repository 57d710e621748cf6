"""The saver's reading of configs agrees with LangGraph's own helpers."""

from __future__ import annotations

from collections import ChainMap
from typing import Any

from hypothesis import given, strategies
from langgraph.checkpoint.base import EXCLUDED_METADATA_KEYS, get_checkpoint_metadata

from swarmstate.integrations.langgraph import config

# Keys a runtime config holds (excluded ones, private ones, user ones) and
# values of every kind the helper keeps, cleans or drops.
_KEYS = strategies.sampled_from(
    [*sorted(EXCLUDED_METADATA_KEYS), "__pregel_runtime", "__x", "_one", "user", "step", "k\x00"]
) | strategies.text(max_size=4)
_VALUES = (
    strategies.text(alphabet="ab\x00", max_size=4)
    | strategies.integers(-3, 3)
    | strategies.booleans()
    | strategies.floats(allow_nan=False)
    | strategies.none()
    | strategies.lists(strategies.integers(), max_size=2)
    | strategies.dictionaries(strategies.text(max_size=2), strategies.integers(), max_size=2)
)
_DICTS = strategies.dictionaries(_KEYS, _VALUES, max_size=6)


def _chain(maps: list[dict[str, Any]], nested: bool) -> ChainMap[str, Any]:
    if nested and len(maps) > 1:
        return ChainMap(maps[0], ChainMap(*maps[1:]))
    return ChainMap(*maps)


_SOURCES = (
    strategies.none()
    | _DICTS
    | strategies.builds(_chain, strategies.lists(_DICTS, max_size=3), strategies.booleans())
)


@given(metadata=_DICTS, meta=_SOURCES, configurable=_SOURCES)
def test_stored_metadata_is_langgraphs_get_checkpoint_metadata(
    metadata: dict[str, Any], meta: Any, configurable: Any
) -> None:
    run_config: dict[str, Any] = {}
    if meta is not None:
        run_config["metadata"] = meta
    if configurable is not None:
        run_config["configurable"] = configurable
    expected = get_checkpoint_metadata(run_config, dict(metadata))  # type: ignore[arg-type]
    got = config.stored_metadata(run_config, dict(metadata), frozenset(EXCLUDED_METADATA_KEYS))
    # Key order and value types too: True and 1 are equal, but stored differently.
    assert [(k, type(v), v) for k, v in got.items()] == [
        (k, type(v), v) for k, v in expected.items()
    ]


def test_stored_metadata_reads_a_mapping_that_is_not_a_plain_dict_as_langgraph_does() -> None:
    class Loud(dict[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return "overridden"

    run_config = {"metadata": ChainMap({"a": 1}, Loud(user="u")), "configurable": {"b": "x"}}
    expected = get_checkpoint_metadata(run_config, {"step": 1})  # type: ignore[arg-type]
    got = config.stored_metadata(run_config, {"step": 1}, frozenset(EXCLUDED_METADATA_KEYS))
    assert got == expected
    assert got["user"] == "overridden"


def test_stored_metadata_reads_metadata_through_its_items_as_langgraph_does() -> None:
    class Items(dict[str, Any]):
        def items(self) -> Any:
            return [(key, "from items") for key in self]

    run_config = {"configurable": {"b": "x", "__pregel_x": 1}}
    for excluded in (frozenset(EXCLUDED_METADATA_KEYS), set(EXCLUDED_METADATA_KEYS)):
        for _ in range(2):  # the second time, with the runtime's keys remembered
            got = config.stored_metadata(run_config, Items(a=1), excluded)
            assert got == get_checkpoint_metadata(run_config, Items(a=1))  # type: ignore[arg-type]
            assert got == {"a": "from items", "b": "x"}

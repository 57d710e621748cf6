"""Reading LangGraph configs and matching metadata filters, for the checkpointer."""

from __future__ import annotations

import uuid
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, Set
from typing import Any, TypeVar, cast

from swarmstate._errors import InvalidArgumentError

__all__ = [
    "checkpoint_ns_of",
    "configurable",
    "matches",
    "materialize",
    "scope_of",
    "stored_metadata",
    "thread_id_of",
]

_T = TypeVar("_T")
_ABSENT = object()


def matches(metadata: Any, filter: dict[str, Any] | None) -> bool:
    """Whether every filter entry equals the metadata's; keys are looked up, never parsed."""
    if not filter:
        return True
    if not isinstance(metadata, dict):
        return False
    return all(metadata.get(key, _ABSENT) == value for key, value in filter.items())


def stored_metadata(config: Any, metadata: Mapping[str, Any], excluded: Set[str]) -> dict[str, Any]:
    """The metadata a checkpoint is stored with, as LangGraph's ``get_checkpoint_metadata``.

    The same dict, key order included (a test compares the two on generated
    configs): ``metadata`` with NUL removed from its str values, then each
    str, int, bool or float entry of the config's ``metadata`` and
    ``configurable`` that it lacks, except ``excluded`` keys and those
    starting with ``__``. Cheaper, on the shapes the runtime passes: no
    comprehension (on 3.11 each is a function call of its own), and a
    ``ChainMap`` of plain dicts as ``config["metadata"]`` is read as the
    dict it holds, or flattened by ``dict.update`` in C, never key by key
    through its Python methods; a key it never adds (excluded, or one of the
    runtime's ``__`` keys, once seen) costs one set lookup. On a DeltaChannel
    graph, where a put writes a few hundred bytes, LangGraph's function was
    about a tenth of the put.
    """
    if type(excluded) is frozenset:
        skipped = _SKIPPED.get(excluded)
        if skipped is None:
            skipped = _SKIPPED.setdefault(excluded, set(excluded))
    else:
        skipped = set(excluded)  # not hashable, maybe not fixed: nothing remembered
    # Read through items(), as LangGraph reads it (a subclass may override it).
    stored = dict(metadata) if type(metadata) is dict else dict(metadata.items())
    for key, value in stored.items():
        if isinstance(value, str) and (type(value) is not str or "\x00" in value):
            stored[key] = value.replace("\x00", "")  # a value replaced, not a key added
    for source in (config.get("metadata"), config.get("configurable")):
        if type(source) is ChainMap:
            maps = source.maps
            if len(maps) == 1 and type(maps[0]) is dict:
                source = maps[0]
            elif all(type(m) is dict for m in maps):
                flat: dict[Any, Any] = {}
                for mapping in reversed(maps):
                    flat.update(mapping)  # the first map's value wins, in ChainMap's key order
                source = flat
        if not source:
            continue
        for key, value in source.items():
            if key in skipped or key in stored:
                continue
            if key.startswith("__"):
                if len(skipped) < _SKIPPED_MAX:
                    skipped.add(key)  # the runtime's own keys: one lookup from now on
                continue
            if isinstance(value, str):
                stored[key] = value.replace("\x00", "")
            elif isinstance(value, (int, bool, float)):
                stored[key] = value
    return stored


_SKIPPED: dict[frozenset[str], set[str]] = {}
"""Per ``excluded`` frozenset: keys :func:`stored_metadata` never adds (excluded, or ``__``)."""
_SKIPPED_MAX = 1024


def materialize(fn: Callable[..., Iterator[_T]], *args: Any, **kwargs: Any) -> list[_T]:
    return [*fn(*args, **kwargs)]


def configurable(config: Any) -> dict[str, Any]:
    """The ``configurable`` dict of a RunnableConfig, with a clear error when absent."""
    conf = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(conf, dict):
        raise InvalidArgumentError(
            "config must be a dict with a 'configurable' dict, e.g. "
            "{'configurable': {'thread_id': '1'}}"
        )
    return cast(dict[str, Any], conf)


def thread_id_of(conf: dict[str, Any]) -> str:
    """The thread id as a str; ints and UUIDs are accepted and converted like LangGraph does."""
    value = conf.get("thread_id")
    if type(value) is str:
        return value
    if type(value) is int or isinstance(value, uuid.UUID):
        return str(value)
    raise InvalidArgumentError(
        "config['configurable']['thread_id'] must be a str (ints and UUIDs are converted), "
        f"got {type(value).__name__}: {value!r}"
    )


def checkpoint_ns_of(conf: dict[str, Any]) -> str:
    value = conf.get("checkpoint_ns", "")
    if value is None:
        return ""
    if type(value) is not str:
        raise InvalidArgumentError(
            f"checkpoint_ns must be a str, got {type(value).__name__}: {value!r}"
        )
    return value


def scope_of(config: Any) -> tuple[dict[str, Any], str, str]:
    """``(configurable, thread_id, checkpoint_ns)`` of a config, checked like the helpers above.

    The common shape (dicts and str ids) is read with a few type checks; anything
    else goes through :func:`configurable`, :func:`thread_id_of` and
    :func:`checkpoint_ns_of` for conversion or a clear error.
    """
    if type(config) is dict:
        conf = config.get("configurable")
        if type(conf) is dict:
            thread_id = conf.get("thread_id")
            checkpoint_ns = conf.get("checkpoint_ns", "")
            if type(thread_id) is str and type(checkpoint_ns) is str:
                return conf, thread_id, checkpoint_ns
    conf = configurable(config)
    return conf, thread_id_of(conf), checkpoint_ns_of(conf)

"""One checkpoint of one channel put through a saver's own ``put``: the tests' shorthand."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from swarmstate.integrations.langgraph import SwarmStateSaver


def put_value(
    saver: SwarmStateSaver,
    thread_id: str,
    value: Any,
    *,
    channel: str = "x",
    parent: str | None = None,
    checkpoint_ns: str = "",
    outer: dict[str, str] | None = None,
    run_id: str | None = None,
    checkpoint_id: str | None = None,
) -> str:
    """Put a checkpoint holding ``value`` as ``channel``'s new version; its id.

    ``parent``: the checkpoint it builds on; ``outer``: the config's
    ``checkpoint_map`` (a subgraph's enclosing checkpoints); ``run_id``: put
    in the metadata when given.
    """
    checkpoint = empty_checkpoint()
    if checkpoint_id is not None:
        checkpoint["id"] = checkpoint_id
    version = saver.get_next_version(None)
    checkpoint["channel_values"] = {channel: value}
    checkpoint["channel_versions"] = {channel: version}
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if parent is not None:
        conf["checkpoint_id"] = parent
    if outer is not None:
        conf["checkpoint_map"] = outer
    metadata: dict[str, Any] = {"source": "loop", "step": 1}
    if run_id is not None:
        metadata["run_id"] = run_id
    saver.put({"configurable": conf}, checkpoint, metadata, {channel: version})  # type: ignore[arg-type]
    return str(checkpoint["id"])


def store_calls(store: Any, monkeypatch: Any) -> list[str]:
    """The names of ``store``'s reads and writes from now on, in order (the store runs them)."""
    calls: list[str] = []
    for name in ("write", "items", "get_many", "get", "keys"):
        method = getattr(store, name)

        def recorded(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
            calls.append(_name)
            return _method(*args, **kw)

        monkeypatch.setattr(store, name, recorded)
    return calls

"""Messages in channel values: LangChain messages, and dicts a graph keeps as messages.

A dict is a message when it has a ``content`` and a string ``role`` (or
``type``), as graphs that keep ``{"role", "content"}`` dicts under
``operator.add`` write them. ``--json`` prints a message whole
(:func:`message_row`); a diff matches messages by id, or by content when
they have none (:func:`message_diff`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage

from swarmstate._cli.values import plain

__all__ = ["is_message", "is_messages", "message_diff", "message_row"]


def is_message(item: Any) -> bool:
    """A LangChain message, or a dict with a ``content`` and a string ``role`` or ``type``."""
    if isinstance(item, BaseMessage):
        return True
    return (
        isinstance(item, dict)
        and "content" in item
        and isinstance(item.get("role", item.get("type")), str)
    )


def is_messages(value: Any) -> bool:
    """A non-empty list of messages (see :func:`is_message`)."""
    return isinstance(value, list) and bool(value) and all(is_message(m) for m in value)


def _kind(message: Any) -> str:
    if isinstance(message, BaseMessage):
        return str(message.type)
    return str(message.get("role", message.get("type")))


def _id(message: Any) -> Any:
    found = message.id if isinstance(message, BaseMessage) else message.get("id")
    return found or None


def _calls(message: Any) -> list[Any]:
    if isinstance(message, BaseMessage):
        calls = getattr(message, "tool_calls", None)
    else:
        calls = message.get("tool_calls")
    return list(calls) if isinstance(calls, list | tuple) else []


def message_row(message: Any) -> dict[str, Any]:
    """A message as ``--json`` prints it, whole: ``type``, ``id``, ``content``, ``tool_calls``.

    ``type`` is a LangChain message's type, or a dict message's ``role``.
    """
    if not is_message(message):  # an item of a list that is not all messages
        return {"type": type(message).__name__, "id": None, "content": plain(message),
                "tool_calls": []}  # fmt: skip
    content = message.content if isinstance(message, BaseMessage) else message["content"]
    return {
        "type": _kind(message),
        "id": _id(message),
        "content": plain(content),
        "tool_calls": plain(_calls(message)),
    }


def message_diff(
    encode: Callable[[Any], bytes], old: list[Any], new: list[Any]
) -> dict[str, list[dict[str, Any]]]:
    """Messages added, removed and changed from ``old`` to ``new``, each a :func:`message_row`.

    Messages with an id are matched by id (``changed``: the same id, other
    content; the new message). Messages without one are matched by content,
    counting repeats: a second identical ``{"role": "user", "content": "ok"}``
    is one added message.
    """
    before = {_id(m): m for m in old if _id(m) is not None}
    after = {_id(m): m for m in new if _id(m) is not None}
    unnamed_old = Counter(encode(m) for m in old if _id(m) is None)
    added, removed, changed = [], [], []
    for message in new:
        key = _id(message)
        if key is None:
            data = encode(message)
            if unnamed_old[data] > 0:
                unnamed_old[data] -= 1
            else:
                added.append(message_row(message))
        elif key not in before:
            added.append(message_row(message))
        elif encode(before[key]) != encode(message):
            changed.append(message_row(message))
    unnamed_new = Counter(encode(m) for m in new if _id(m) is None)
    for message in old:
        key = _id(message)
        if key is None:
            data = encode(message)
            if unnamed_new[data] > 0:
                unnamed_new[data] -= 1
            else:
                removed.append(message_row(message))
        elif key not in after:
            removed.append(message_row(message))
    return {"added": added, "removed": removed, "changed": changed}

"""Values as the views print them: whole in JSON, one line in tables, cut with a visible mark.

``--json`` never cuts a value: :func:`plain` turns any value a checkpoint
holds into JSON-ready data, whole. Tables print one line per value, cut by
:func:`abbreviate` and ended with :data:`CUT`. Nothing here imports
LangGraph: :mod:`swarmstate.cli` imports it through :mod:`.render`.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import reprlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["CUT", "abbreviate", "message_text", "plain", "short", "value_change"]

CUT = "…"
"""Ends a value a table cut; ``--json`` prints it whole."""

_TEXT_WIDTH = 80
_DEPTH = 64  # deeper than any state a graph keeps; a cycle ends here as repr
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _TEXT_WIDTH
_repr.maxlist = _repr.maxdict = _repr.maxtuple = _repr.maxset = 6
_repr.fillvalue = CUT  # where reprlib leaves something out, as a table cut is marked


def abbreviate(text: str, width: int = _TEXT_WIDTH) -> str:
    """``text`` on one line (whitespace collapsed, control characters escaped), cut to ``width``.

    A cut line ends with :data:`CUT`.
    """
    flat = " ".join(text.split())
    if not flat.isprintable():
        flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= width else flat[: width - 1] + CUT


def short(value: Any, width: int = _TEXT_WIDTH) -> str:
    """A value on one line for a table: a string as it is, anything else as a short repr."""
    return abbreviate(value if isinstance(value, str) else _repr.repr(value), width)


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data, whole: what ``--json`` prints for a channel or a write.

    Mappings, lists, tuples and sets become objects and arrays; pydantic
    models (LangChain messages among them) their ``model_dump``; dataclasses
    (LangGraph's ``Interrupt``) an object of their fields; enums their value;
    dates ISO 8601; anything else its ``repr``, which keeps every byte of
    ``bytes``. Floats that JSON cannot hold (``nan``, ``inf``) become their repr.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > _DEPTH:
        return repr(value)
    inner = depth + 1
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else repr(k): plain(v, inner) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, inner) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v, inner) for v in value), key=repr)
    if isinstance(value, enum.Enum):
        return plain(value.value, inner)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), inner) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return plain(dump(mode="json"), inner)
        except Exception:  # a model that does not dump as JSON: its repr says what it is
            return repr(value)
    return repr(value)


def message_text(row: dict[str, Any], width: int = _TEXT_WIDTH) -> str:
    """A :func:`message_row` on one line for a table: its text, or the tools it calls."""
    content = row["content"]
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):  # content blocks: their text parts
        parts: Iterator[str] = (
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and "text" in part)
        )
        text = " ".join(parts)
    else:
        text = short(content)
    if not text and row["tool_calls"]:
        names = (c.get("name") if isinstance(c, dict) else c for c in row["tool_calls"])
        text = "tool calls: " + ", ".join(str(n) for n in names)
    return f"{abbreviate(str(row['type']), width)}: {abbreviate(text, width)}"


def value_change(old: Any, new: Any, width: int = 60) -> str:
    """A changed value on one line: ``old -> new``, or what was appended to a list that grew."""
    grew = isinstance(old, list) and isinstance(new, list) and len(new) > len(old)
    if grew and new[: len(old)] == old:
        tail = new[len(old) :]
        items = "item" if len(tail) == 1 else "items"
        return f"+{len(tail)} {items}: " + abbreviate(
            ", ".join(short(v, width) for v in tail), width * 2
        )
    return f"{short(old, width)} -> {short(new, width)}"

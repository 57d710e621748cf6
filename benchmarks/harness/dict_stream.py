"""The saver sections' second recorded stream: the same agent, with plain dict messages.

``swarmstate._bench.conversation`` records a tool-using agent whose messages are
``langchain_core`` models under ``add_messages``. Many graphs keep plain
dicts instead; this records the same agent that way, through the same
recorder: ``messages`` is a list of ``{"role", "content"}`` dicts under a
reducer that keeps the last :data:`WINDOW`, and one turn is again seven
checkpoints (the input, ``__start__``, ``agent`` asking for tools, ``tools``
and ``remember`` as two parallel tasks, ``agent`` again, the tools again,
and the answer). Text is seeded words, never a repeated phrase; a node's
words are seeded from what it reads, so the same seed records the same
stream.
"""

import hashlib
import random
from typing import Annotated, Any, TypedDict

__all__ = ["WINDOW", "record"]

WINDOW = 20  # dict messages kept in state
_TOOL_ROUNDS = 2
_VOCABULARY = 4_000


class _Words:
    def __init__(self, seed: str) -> None:
        rng = random.Random(f"{seed}:dict-vocabulary")
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = [
            "".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(_VOCABULARY)
        ]
        self.seed = seed

    def rng(self, node: str, reads: str) -> random.Random:
        digest = hashlib.blake2b(reads.encode(), digest_size=8).hexdigest()
        return random.Random(f"{self.seed}:{node}:{digest}")

    def prose(self, rng: random.Random, approx_bytes: int) -> str:
        out: list[str] = []
        size = 0
        while size < approx_bytes:
            sentence = " ".join(rng.choices(self.words, k=rng.randint(6, 16)))
            out.append(sentence.capitalize() + rng.choice(".,;?!"))
            size += len(out[-1]) + 1
        return " ".join(out)


def _window(old: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    return (old + new)[-WINDOW:]


class _DictState(TypedDict):
    messages: Annotated[list[dict[str, str]], _window]
    notes: dict[str, str]


def _builder(words: _Words) -> Any:
    from langgraph.graph import END, START, StateGraph

    def asked(messages: list[dict[str, str]]) -> int:
        """Assistant messages since the user's last one (the window may have cut it off)."""
        count = 0
        for message in reversed(messages):
            if message["role"] == "user":
                break
            count += message["role"] == "assistant"
        return count

    def agent(state: _DictState) -> dict[str, Any]:
        messages = state["messages"]
        rng = words.rng("agent", messages[-1]["content"])
        size = rng.randint(80, 200) if asked(messages) < _TOOL_ROUNDS else rng.randint(400, 900)
        return {"messages": [{"role": "assistant", "content": words.prose(rng, size)}]}

    def tools(state: _DictState) -> dict[str, Any]:
        rng = words.rng("tools", state["messages"][-1]["content"])
        content = words.prose(rng, rng.randint(200, 600))
        return {"messages": [{"role": "tool", "content": content}]}

    def remember(state: _DictState) -> dict[str, Any]:
        rng = words.rng("remember", state["messages"][-1]["content"])
        notes = dict(state.get("notes") or {})
        notes[f"fact-{rng.randrange(8)}"] = words.prose(rng, 40)
        return {"notes": notes}

    def route(state: _DictState) -> Any:
        # The first two answers of a turn ask for tools; the third is the final one.
        return ["tools", "remember"] if asked(state["messages"]) <= _TOOL_ROUNDS else END

    builder = StateGraph(_DictState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("remember", remember)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "remember", END])
    builder.add_edge("tools", "agent")
    builder.add_edge("remember", "agent")
    return builder


def record(seed: object, checkpoints: int) -> Any:
    """The dict-message stream: a ``Conversation`` of at least ``checkpoints`` checkpoints."""
    from swarmstate._bench.conversation import Conversation

    words = _Words(f"{seed}:dict")

    def ask(rng: random.Random) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": words.prose(rng, rng.randint(60, 300))}]}

    return Conversation.record(f"{seed}:dict", checkpoints, _builder(words), ask)

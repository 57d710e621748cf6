"""A LangGraph conversation recorded from the runtime, to replay on any checkpointer.

The saver rows of ``benchmarks/run.py`` and ``swarmstate benchmark`` feed every
checkpointer the calls LangGraph's Pregel loop makes, not a hand-built
imitation: :meth:`Conversation.record` runs a real ``StateGraph`` (plain
Python nodes, no model) under a recording checkpointer and keeps what the
runtime passes to ``put`` and ``put_writes``.

The graph is a tool-using agent. One turn (one ``invoke``) is seven
checkpoints: the input, ``__start__``, then ``agent`` asking for tools,
``tools`` and ``remember`` running in parallel (two tasks, two
``put_writes`` calls), ``agent`` again, the tools again, and the final
answer. ``messages`` uses ``add_messages`` with ``langchain_core`` messages;
``agent`` deletes the oldest ones (``RemoveMessage``) to keep a window of
:data:`WINDOW`, so the channel grows at the start of a thread and then stays
near 10 kB; ``notes`` is a small dict ``remember`` rewrites. Text is drawn
word by word from a seeded vocabulary, so no phrase repeats (PostgreSQL's
TOAST would compress repeated phrases away) and the same seed records the
same conversation.

What the recording keeps, per checkpoint: the checkpoint dict as the runtime
built it (``channel_versions``, ``versions_seen``, ``updated_channels``),
its metadata, ``new_versions`` (only the channels that changed), and the
``put_writes`` calls made from it (each task's writes with its task id and
``task_path``). Versions are recorded as plain integers and renumbered for
each saver with that saver's own ``get_next_version`` (:meth:`for_saver`),
as the runtime would have; checkpoint ids, timestamps, task ids and run ids
are replaced with seeded ones.

Replaying a thread (:class:`Replay`) makes the runtime's calls in its
order: for each checkpoint, ``put`` with the parent's id in the config,
then ``put_writes`` for each task that ran from it. A thread cut after
checkpoint ``n`` therefore ends mid-turn, with the writes of the step in
flight on its latest checkpoint, unless ``n`` is a turn's last checkpoint.
"""

from __future__ import annotations

import hashlib
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

__all__ = ["TURN", "WINDOW", "Conversation", "Replay", "Step", "Task"]

WINDOW = 24  # messages kept in state; about 10 kB of checkpoint
TURN = 7  # checkpoints per turn (one invoke)
_TOOL_ROUNDS = 2


@dataclass(frozen=True)
class Task:
    """One ``put_writes`` call: a task's writes, its id and its path."""

    task_id: str
    task_path: str
    writes: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Step:
    """One checkpoint as ``put`` receives it, and the tasks that then ran from it."""

    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    new_versions: dict[str, Any]
    turn: int
    tasks: tuple[Task, ...]


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: dict[str, str]


class _Text:
    """Seeded prose: words drawn one by one from a seeded vocabulary."""

    def __init__(self, seed: str, words: int = 4_000) -> None:
        rng = random.Random(f"{seed}:vocabulary")
        onsets, vowels = "bcdfghjklmnprstvwz", "aeiou"
        vocab: set[str] = set()
        while len(vocab) < words:
            syllables = rng.choice((1, 2, 2, 3, 3, 4))
            vocab.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables)))
        self.words = sorted(vocab)
        self.seed = seed

    def rng(self, *key: object) -> random.Random:
        return random.Random(":".join([self.seed, *map(str, key)]))

    def prose(self, rng: random.Random, approx_bytes: int) -> str:
        out: list[str] = []
        size = 0
        while size < approx_bytes:
            sentence = rng.choices(self.words, k=rng.randint(6, 16))
            text = " ".join(sentence).capitalize() + rng.choice(".,;?!")
            out.append(text)
            size += len(text) + 1
        return " ".join(out)


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _graph(text: _Text) -> Any:
    """The recorded agent: plain Python nodes whose output depends only on the seed and state."""

    def agent(state: _State) -> dict[str, Any]:
        messages = state["messages"]
        rng = text.rng("agent", messages[-1].id)
        human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        asked = sum(1 for m in messages[human:] if isinstance(m, AIMessage))
        # Delete the oldest messages so state keeps a window of WINDOW (with the new one).
        extra = len(messages) + 1 - WINDOW
        trim: list[Any] = [RemoveMessage(id=str(m.id)) for m in messages[: max(0, extra)]]
        usage = {"input_tokens": rng.randint(800, 4_000), "output_tokens": rng.randint(20, 400)}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        if asked < _TOOL_ROUNDS:
            calls = [
                {
                    "name": rng.choice(("search", "fetch_page", "lookup_order")),
                    "args": {"query": text.prose(rng, 60)},
                    "id": f"call_{rng.getrandbits(96):024x}",
                    "type": "tool_call",
                }
                for _ in range(rng.randint(1, 2))
            ]
            reply = AIMessage(
                content=text.prose(rng, rng.randint(80, 200)),
                id=_uid(rng),
                tool_calls=calls,
                usage_metadata=usage,
                response_metadata={"model_name": "bench-model", "finish_reason": "tool_calls"},
            )
        else:
            reply = AIMessage(
                content=text.prose(rng, rng.randint(400, 900)),
                id=_uid(rng),
                usage_metadata=usage,
                response_metadata={"model_name": "bench-model", "finish_reason": "stop"},
            )
        return {"messages": [*trim, reply]}

    def tools(state: _State) -> dict[str, Any]:
        last = state["messages"][-1]
        rng = text.rng("tools", last.id)
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        return {
            "messages": [
                ToolMessage(
                    content=text.prose(rng, rng.randint(200, 600)),
                    tool_call_id=call["id"],
                    name=call["name"],
                    id=_uid(rng),
                )
                for call in calls
            ]
        }

    def remember(state: _State) -> dict[str, Any]:
        rng = text.rng("remember", state["messages"][-1].id)
        notes = dict(state.get("notes") or {})
        notes[f"fact-{rng.randrange(8)}"] = text.prose(rng, 40)
        return {"notes": notes}

    def route(state: _State) -> Any:
        last = state["messages"][-1]
        return ["tools", "remember"] if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(_State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("remember", remember)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "remember", END])
    builder.add_edge("tools", "agent")
    builder.add_edge("remember", "agent")
    return builder


class _Recorder(BaseCheckpointSaver[int]):
    """Keeps what the runtime passes to ``put`` and ``put_writes``; serves the latest back.

    Versions are the base class's integers. Only the latest checkpoint is
    kept for reading: each recorded ``invoke`` resumes from it, and a
    finished turn leaves no pending writes to return.
    """

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
        self.writes: dict[str, list[Task]] = {}
        self._latest: CheckpointTuple | None = None
        self._lock = threading.Lock()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._latest

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return iter(() if self._latest is None else (self._latest,))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        kept = _copied(checkpoint)
        self.puts.append((kept, dict(metadata), dict(new_versions)))
        conf = config["configurable"]
        out: RunnableConfig = {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }
        # The next invoke resumes from, and edits, what get_tuple returns: a
        # copy of its own, as a saver that decodes stored bytes would give.
        self._latest = CheckpointTuple(out, _copied(kept), metadata, None, [])  # type: ignore[arg-type]
        return out

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        task = Task(task_id, task_path, tuple(writes))
        with self._lock:  # the runtime calls this from its thread pool
            self.writes.setdefault(config["configurable"]["checkpoint_id"], []).append(task)


def _copied(checkpoint: Any) -> dict[str, Any]:
    """A checkpoint no later edit can reach: its dicts and lists copied one level down.

    Message objects are shared: the runtime builds new lists around them
    and never edits one it has handed over.
    """
    values = {
        k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
        for k, v in checkpoint["channel_values"].items()
    }
    out = {
        **checkpoint,
        "channel_values": values,
        "channel_versions": dict(checkpoint["channel_versions"]),
        "versions_seen": {n: dict(v) for n, v in checkpoint["versions_seen"].items()},
    }
    if isinstance(checkpoint.get("updated_channels"), list):
        out["updated_channels"] = list(checkpoint["updated_channels"])
    return out


def checkpoint_id(rng: random.Random, ticks: int) -> str:
    """A UUIDv6-shaped id whose timestamp field is ``ticks``: ids sort by ``ticks``.

    LangGraph makes ids with ``uuid6()`` from the clock; here the clock is a
    counter so the data does not depend on when the run happens.
    """
    ticks &= (1 << 60) - 1
    value = (ticks >> 12) << 80 | 6 << 76 | (ticks & 0xFFF) << 64 | 0b10 << 62 | rng.getrandbits(62)
    return str(uuid.UUID(int=value))


class Conversation:
    """A recorded thread: :class:`Step` by step, versions as integers until :meth:`for_saver`."""

    def __init__(self, steps: list[Step], seed: str) -> None:
        self.steps = steps
        self.seed = seed
        self._versioned: dict[type, list[tuple[dict[str, Any], dict[str, Any]]]] = {}

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def record(
        cls,
        seed: object,
        checkpoints: int,
        builder: StateGraph[Any] | None = None,
        ask: Callable[[random.Random], dict[str, Any]] | None = None,
    ) -> Conversation:
        """Run the agent graph for at least ``checkpoints`` checkpoints and keep its calls.

        ``builder`` (a graph not yet compiled) and ``ask`` (a turn's input,
        from the seeded driver) record another agent instead of this
        module's, the same way.
        """
        key = str(seed)
        text = _Text(key)
        recorder = _Recorder()
        graph = (_graph(text) if builder is None else builder).compile(checkpointer=recorder)
        rng = text.rng("driver")
        config: RunnableConfig = {"configurable": {"thread_id": "recorded"}}
        while len(recorder.puts) < checkpoints:
            if ask is None:
                question = HumanMessage(content=text.prose(rng, rng.randint(60, 300)), id=_uid(rng))
                turn: dict[str, Any] = {"messages": [question]}
            else:
                turn = ask(rng)
            graph.invoke(turn, config, durability="sync")
        return cls(_normalize(recorder, rng, checkpoints), key)

    def for_saver(self, saver: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(checkpoint, new_versions)`` per step, versions made by ``saver.get_next_version``.

        The runtime asks the saver for the next version once per step, from
        the highest current one, and gives it to every channel written in
        that step; the recorded integers are those calls in order, so
        version ``k`` becomes the ``k``-th value of the saver's own chain.
        The savers' random fractions are seeded from the conversation's seed.
        """
        kind = type(saver)
        if kind not in self._versioned:
            top = max((_highest(step) for step in self.steps), default=0)
            state = random.getstate()
            random.seed(f"{self.seed}:versions")
            chain: list[Any] = [None]
            for _ in range(top):
                chain.append(saver.get_next_version(chain[-1], None))
            random.setstate(state)
            self._versioned[kind] = [_renumber(step, chain) for step in self.steps]
        return self._versioned[kind]


def _highest(step: Step) -> int:
    cp = step.checkpoint
    seen = [v for versions in cp["versions_seen"].values() for v in versions.values()]
    return int(max([*cp["channel_versions"].values(), *seen, *step.new_versions.values(), 0]))


def _renumber(step: Step, chain: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    cp = step.checkpoint
    out = {
        **cp,
        "channel_versions": {ch: chain[v] for ch, v in cp["channel_versions"].items()},
        "versions_seen": {
            node: {ch: chain[v] for ch, v in seen.items()}
            for node, seen in cp["versions_seen"].items()
        },
    }
    return out, {ch: chain[v] for ch, v in step.new_versions.items()}


def _normalize(recorder: _Recorder, rng: random.Random, count: int) -> list[Step]:
    """Seeded ids and timestamps in place of the clock's; tasks in path order."""
    ticks = 0x1F0_0000_0000_0000 + rng.getrandbits(40)
    ids: dict[str, str] = {}
    for k, (cp, _, _) in enumerate(recorder.puts[:count]):
        ids[cp["id"]] = checkpoint_id(rng, ticks + k * 1_000)
    steps: list[Step] = []
    turn = -1
    for k, (cp, metadata, new_versions) in enumerate(recorder.puts[:count]):
        if metadata.get("source") == "input":
            turn += 1
        # Parallel tasks finish in any order; the runtime sorts them by path too.
        tasks = sorted(recorder.writes.get(cp["id"], []), key=lambda t: t.task_path)
        seconds = k * 3
        ts = f"2025-01-01T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        steps.append(
            Step(
                checkpoint={**cp, "id": ids[cp["id"]], "ts": f"{ts}.000000+00:00"},
                metadata=metadata,
                new_versions=new_versions,
                turn=turn,
                tasks=tuple(Task(_uid(rng), t.task_path, t.writes) for t in tasks),
            )
        )
    return steps


class Replay:
    """The runtime's calls for one thread of a conversation on one saver.

    Runs are ``invoke`` calls: each turn gets its own ``run_id`` in the
    config's metadata (as LangGraph's server sets it), seeded from the
    thread id, so every thread has its own runs.
    """

    def __init__(self, conversation: Conversation, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.steps = conversation.steps
        self.versioned = conversation.for_saver(saver)
        self._seed = f"{conversation.seed}:{thread_id}"
        self._runs: dict[int, str] = {}
        # Flattened put_writes calls: (step index, task).
        self.tasks = [(k, t) for k, step in enumerate(self.steps) for t in step.tasks]

    def run_id(self, turn: int) -> str:
        """The ``run_id`` of the thread's ``turn``-th ``invoke``."""
        run = self._runs.get(turn)
        if run is None:
            digest = hashlib.blake2b(f"{self._seed}:{turn}".encode(), digest_size=16).digest()
            run = self._runs[turn] = str(uuid.UUID(bytes=digest, version=4))
        return run

    def config(self, k: int, checkpoint_id: str | None) -> RunnableConfig:
        """The config the runtime passes for step ``k``: scope, ``checkpoint_id``, metadata."""
        conf: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            conf["checkpoint_id"] = checkpoint_id
        meta = {"run_id": self.run_id(self.steps[k].turn), "thread_id": self.thread_id}
        return {"configurable": conf, "metadata": meta}

    def put_args(self, k: int) -> tuple[RunnableConfig, dict[str, Any], dict[str, Any], Any]:
        """Arguments of the ``put`` of step ``k`` (a fresh copy, as the runtime passes)."""
        cp, new_versions = self.versioned[k]
        parent = self.steps[k - 1].checkpoint["id"] if k else None
        copied = {
            **cp,
            "channel_values": dict(cp["channel_values"]),
            "channel_versions": dict(cp["channel_versions"]),
            "versions_seen": {n: dict(v) for n, v in cp["versions_seen"].items()},
        }
        return self.config(k, parent), copied, dict(self.steps[k].metadata), dict(new_versions)

    def writes_args(self, j: int) -> tuple[RunnableConfig, list[tuple[str, Any]], str, str]:
        """Arguments of the ``j``-th ``put_writes`` call of the thread."""
        k, task = self.tasks[j]
        config = self.config(k, self.steps[k].checkpoint["id"])
        return config, list(task.writes), task.task_id, task.task_path

    def put(self, k: int) -> object:
        return self.saver.put(*self.put_args(k))

    def put_writes(self, j: int) -> object:
        return self.saver.put_writes(*self.writes_args(j))

    def writes_of(self, k: int) -> None:
        """Every ``put_writes`` call made from checkpoint ``k``, in task path order."""
        config = self.config(k, self.steps[k].checkpoint["id"])
        for task in self.steps[k].tasks:
            self.saver.put_writes(config, list(task.writes), task.task_id, task.task_path)

    def fill(self, count: int) -> None:
        """Replay the first ``count`` checkpoints with every task's writes."""
        for k in range(count):
            self.put(k)
            self.writes_of(k)

    def latest_config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}

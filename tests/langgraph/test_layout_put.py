"""The path a put takes through the saver's modules, traced on a real graph's puts.

What ``docs/architecture.md`` ("One place for the format") promises of the
layout: the adapter (``saver.py``) checks the arguments, builds a scope and
hands one plan down; the plan goes one way, and the saver's put never comes
back into ``saver.py`` once it left it; the plan reaches at most five of the
saver's modules (``format/`` counted as one).

The trace records every Python call the put makes (``sys.setprofile`` on the
thread that runs it) whose code belongs to the saver's package. A plan is a
generator the driver (``steps.py``) resumes: its module is the *plan's
module*, and what the plan reaches is that module plus every saver module
its code, or the driver doing its steps, calls.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from langchain_core.messages import HumanMessage

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.graphs import cfg, chat_graph, dict_graph

_PACKAGE = "swarmstate.integrations.langgraph."
_DRIVER = "steps"
_ADAPTER = "saver"
_MOST = 5


def _unit(frame: FrameType | None) -> str | None:
    """The saver module a frame runs code of (a subpackage counts as one), else None."""
    if frame is None:
        return None
    name = frame.f_globals.get("__name__", "")
    if not isinstance(name, str) or not name.startswith(_PACKAGE):
        return None
    return name[len(_PACKAGE) :].split(".")[0]


@dataclass
class _Trace:
    """What one call of the saver did, in the saver's modules."""

    entered: list[str] = field(default_factory=list)
    """Each saver module entered, in order (a repeat of the one before left out)."""
    edges: set[tuple[str, str]] = field(default_factory=set)
    """``(caller, callee)`` module pairs."""
    plans: set[str] = field(default_factory=set)
    """Modules of the generators the driver resumed."""
    run: Any = None
    """The run id a put's metadata names."""

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _unit(frame)
        if callee is None:
            return
        caller = _unit(frame.f_back)
        if not self.entered or self.entered[-1] != callee:
            self.entered.append(callee)
        if caller is not None:
            self.edges.add((caller, callee))
            if caller == _DRIVER and frame.f_code.co_flags & 0x20:  # CO_GENERATOR
                self.plans.add(callee)

    def returns_to_adapter(self) -> int:
        """How many times a frame of the adapter was entered after another module's."""
        return sum(1 for a, b in itertools.pairwise(self.entered) if b == _ADAPTER != a)

    def reached(self) -> set[str]:
        """The plan's modules and every saver module they (or the driver) call."""
        callers = self.plans | {_DRIVER}
        return self.plans | {callee for caller, callee in self.edges if caller in callers}


class _Traced(SwarmStateSaver):
    """A saver that traces its puts and put_writes, on whatever thread runs them."""

    def __init__(self, store: swarmstate.BaseStore) -> None:
        super().__init__(store)
        self.traces: dict[str, list[_Trace]] = {"put": [], "put_writes": []}
        self._lock = threading.Lock()

    def _traced(self, kind: str, call: Callable[[], Any], run: Any = None) -> Any:
        trace = _Trace(run=run)
        sys.setprofile(trace.profile)
        try:
            return call()
        finally:
            sys.setprofile(None)
            with self._lock:
                self.traces[kind].append(trace)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        run = metadata.get("run_id") or config.get("metadata", {}).get("run_id")
        return self._traced(
            "put",
            lambda: super(_Traced, self).put(config, checkpoint, metadata, new_versions),
            run,
        )

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self._traced(
            "put_writes",
            lambda: super(_Traced, self).put_writes(config, writes, task_id, task_path),
        )


def _graphs_traced() -> _Traced:
    """A conversation of LangChain messages (its classes learned by the allowlist) and one
    of plain dict messages, a few turns each, in memory."""
    saver = _Traced(swarmstate.Store())
    chat, plain = chat_graph(saver), dict_graph(saver)
    for turn in range(3):
        chat.invoke({"messages": [HumanMessage(f"question {turn}")]}, cfg("chat"))
        plain.invoke({"messages": [{"role": "user", "content": f"q {turn}"}]}, cfg("plain"))
    return saver


def test_a_put_never_comes_back_into_the_adapter_once_it_left() -> None:
    saver = _graphs_traced()
    for kind, traces in saver.traces.items():
        assert traces, kind
        for trace in traces:
            assert trace.entered[0] == _ADAPTER
            assert trace.returns_to_adapter() == 0, (kind, " > ".join(trace.entered))


def test_a_put_reaches_at_most_five_of_the_savers_modules() -> None:
    saver = _graphs_traced()
    runs_seen: set[Any] = set()
    for kind, traces in saver.traces.items():
        for trace in traces:
            assert trace.plans, kind  # the plan ran under the driver
            assert _ADAPTER not in trace.plans, (kind, trace.plans)
            reached = trace.reached()
            if "catalog" in reached:
                # The saver's first put (the store's conversion check) and a run's
                # first (its group tag, kept after) also ask the catalog.
                assert kind == "put"
                first = trace is traces[0]
                assert first or (trace.run is not None and trace.run not in runs_seen)
                reached.discard("catalog")
            runs_seen.add(trace.run)
            assert len(reached) <= _MOST, (kind, sorted(reached))
            # One way down: no other module calls the adapter.
            callers = {caller for caller, callee in trace.edges if callee == _ADAPTER}
            assert callers <= {_ADAPTER}, (kind, callers)

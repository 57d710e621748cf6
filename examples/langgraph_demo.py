"""A LangGraph graph checkpointed into one SQLite file by swarmstate.

Plain Python nodes, no LLM, no network. The demo runs several steps, pauses
on an interrupt and resumes it, forks the thread from an older checkpoint,
and diffs two whole-store snapshots.

    pip install ".[disk,langgraph]"
    python examples/langgraph_demo.py            # in a temporary directory
    python examples/langgraph_demo.py state.db   # or in a file you keep
"""

from __future__ import annotations

import operator
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver


class Article(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]
    draft: str
    approved: bool


def outline(state: Article) -> dict[str, Any]:
    return {"log": ["outline"], "draft": f"Outline about {state['topic']}."}


def write(state: Article) -> dict[str, Any]:
    return {"log": ["write"], "draft": state["draft"] + " Three solid paragraphs."}


def review(state: Article) -> dict[str, Any]:
    verdict = interrupt({"please review": state["draft"]})
    return {"log": [f"review: {verdict}"], "approved": verdict == "approve"}


def publish(state: Article) -> dict[str, Any]:
    return {"log": ["published" if state["approved"] else "sent back"]}


def build(saver: SwarmStateSaver) -> Any:
    builder = StateGraph(Article)
    for name, node in [("outline", outline), ("write", write), ("review", review),
                       ("publish", publish)]:  # fmt: skip
        builder.add_node(name, node)
    builder.add_edge(START, "outline")
    builder.add_edge("outline", "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=saver)


def describe(keys: list[tuple[str, str]]) -> str:
    """Count changed store entries per thread, in words."""
    threads: dict[str, int] = {}
    for namespace, _ in keys:
        parsed = SwarmStateSaver.parse_namespace(namespace)
        name = f"thread {parsed[0]!r}" if parsed else "run index"
        threads[name] = threads.get(name, 0) + 1
    return ", ".join(f"{n} in {t}" for t, n in sorted(threads.items())) or "nothing"


def main(path: Path) -> None:
    print(f"checkpoints go to {path}\n")
    with DiskStore(path) as store:
        saver = SwarmStateSaver(store)
        graph = build(saver)
        config: Any = {"configurable": {"thread_id": "article-1"}}

        print("1. run until the review step asks a human")
        out = graph.invoke({"topic": "checkpointing"}, config)
        print(f"   log so far: {out['log']}")
        print(f"   interrupted with: {out['__interrupt__'][0].value}")
        before_resume = store.snapshot()

        print("\n2. resume with the human's answer")
        out = graph.invoke(Command(resume="approve"), config)
        print(f"   log: {out['log']}")
        after_resume = store.snapshot()
        added = after_resume.diff(before_resume)["added"]
        print(f"   the resume added store entries: {describe(added)}")

        print("\n3. history of the thread, newest first")
        history = list(graph.get_state_history(config))
        for state in history:
            step, log = state.metadata["step"], state.values.get("log", [])
            print(f"   step {step:>2}  next={list(state.next)!s:<14} log={log}")

        print("\n4. fork from the checkpoint taken after 'outline' and take another path")
        after_outline = next(s for s in history if s.next == ("write",))
        fork = graph.update_state(after_outline.config, {"draft": "A shorter outline."})
        graph.invoke(None, fork)  # runs 'write' again from the edited outline
        # The fork is now the thread's latest checkpoint, so the plain config resumes it.
        out = graph.invoke(Command(resume="reject"), config)
        print(f"   fork log: {out['log']}")
        print(f"   fork draft: {out['draft']!r}")
        print(f"   original branch still reads: {graph.get_state(history[0].config).values['log']}")
        after_fork = store.snapshot()
        diff = after_fork.diff(after_resume)
        print(
            f"   snapshot diff: added {describe(diff['added'])}; "
            f"changed {describe(diff['changed'])}; removed {describe(diff['removed'])}"
        )

        print("\n5. roll the whole store back to before the resume")
        store.restore(before_resume)
        state = graph.get_state(config)
        print(f"   thread is waiting again at {list(state.next)} with log {state.values['log']}")
        print(
            f"   checkpoints in the thread: {len(list(saver.list(config)))} "
            f"(there were {len(history)} after the resume, more after the fork)"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "langgraph_demo.db")

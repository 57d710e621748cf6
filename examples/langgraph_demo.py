"""A LangGraph graph checkpointed into one SQLite file by swarmstate.

Plain Python nodes, no LLM, no network. The demo runs several steps, pauses
on an interrupt and resumes it, forks the thread from an older checkpoint,
and diffs two whole-store snapshots; then it prints the commands that show
what it wrote.

    pip install ".[disk,langgraph]"
    python examples/langgraph_demo.py                  # writes ./langgraph_demo.db afresh
    python examples/langgraph_demo.py --db state.db    # another file
    python examples/langgraph_demo.py --keep           # add a thread to the file's threads

Starting afresh replaces only a file this demo made (it marks its files with
an entry of its own); any other file at --db is refused and left as it is.
"""

from __future__ import annotations

import argparse
import operator
import os
import shlex
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from swarmstate import SwarmStateError
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


MARK = ("langgraph_demo", "made-by")
"""The entry that marks a store this demo made: the only kind it replaces."""


class NotOurs(Exception):
    """The file at ``--db`` was not made by this demo."""


def fresh_file(path: Path) -> None:
    """Remove the store a previous run left at ``path``; refuse to remove anything else."""
    if not os.path.lexists(path):
        return
    with DiskStore(path, readonly=True) as store:  # raises unless it is a swarmstate store
        made_here = store.get(*MARK) is not None
    if not made_here:
        raise NotOurs(
            f"{path} is a swarmstate store this demo did not make; refusing to replace it "
            "(give another --db, or --keep to add a thread to it)"
        )
    for name in (str(path), f"{path}-wal", f"{path}-shm"):
        if os.path.exists(name):
            os.remove(name)


def free_thread_id(saver: SwarmStateSaver) -> str:
    """``article-1``, or the first ``article-N`` the kept file does not hold yet."""
    n = 1
    while saver.get_tuple({"configurable": {"thread_id": f"article-{n}"}}) is not None:
        n += 1
    return f"article-{n}"


def main(path: Path) -> str:
    """Run the demo into ``path``; returns the thread id it wrote."""
    print(f"checkpoints go to {path}\n")
    new = not os.path.lexists(path)
    with DiskStore(path) as store:
        if new:  # before the first snapshot: rolling the store back keeps the mark
            store.set(*MARK, {"example": "examples/langgraph_demo.py"})
        saver = SwarmStateSaver(store)
        graph = build(saver)
        thread_id = free_thread_id(saver)
        config: Any = {"configurable": {"thread_id": thread_id}}

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
    return thread_id


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="LangGraph checkpointed by swarmstate.")
    parser.add_argument(
        "--db", type=Path, default=Path("langgraph_demo.db"), help="the SQLite file to write"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep what the file holds and add a new thread"
    )
    parser.add_argument("file", nargs="?", type=Path, help="the same as --db (older spelling)")
    args = parser.parse_args()
    if args.file is not None:
        args.db = args.file
    try:
        if not args.keep:
            fresh_file(args.db)
        thread = main(args.db)
    except (SwarmStateError, NotOurs) as exc:
        parser.exit(1, f"langgraph_demo: {exc}\n")
    db = shlex.quote(str(args.db))
    print("\nlook at what it wrote (read-only):")
    print(f"   swarmstate threads {db}")
    print(f"   swarmstate history {db} {shlex.quote(thread)}")

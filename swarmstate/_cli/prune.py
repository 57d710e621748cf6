"""``swarmstate prune``: retention over a store from the command line, and the space given back.

The one command that writes, and only with ``--yes``: without it, wherever it
runs, it is a dry run. It runs :meth:`SwarmStateSaver.retain
<swarmstate.integrations.langgraph.SwarmStateSaver.retain>` and, with
``--reclaim``, the store's :meth:`~swarmstate.BaseStore.reclaim`. A dry run
opens the store read-only (as every other command does), so it cannot
change a byte of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from typing import Any, TextIO

from swarmstate._cli.source import open_store, open_writable

__all__ = ["PROGRESS_AFTER", "Progress", "parse_duration", "prune"]

PROGRESS_AFTER = 1.0
"""Seconds a run lasts before its progress line appears (short runs print none)."""

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LONGEST = 36500 * 86400  # no checkpoint is older: a cutoff further back is a typo
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``15m``, ``90s`` or plain seconds, as seconds; else a usage error."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 30d, 12h, 15m, 90s or seconds, got {text!r}"
        )
    seconds = float(found[1]) * _UNITS[found[2]]
    if seconds > _LONGEST:
        raise argparse.ArgumentTypeError(f"expected at most 100 years (36500d), got {text!r}")
    return seconds


class Progress:
    """One line on a terminal, redrawn as threads are done; nothing elsewhere or on short runs."""

    def __init__(self, stream: TextIO, *, after: float | None = None) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.after = PROGRESS_AFTER if after is None else after
        self.started = time.monotonic()
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self.started < self.after:
            return
        self.stream.write(f"\rprune: {done:,}/{total:,} threads")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def prune(args: argparse.Namespace, dry_run: bool) -> dict[str, Any]:
    """Run retention (and ``--reclaim`` after a real run); the ``--json`` document."""
    from swarmstate.integrations.langgraph import SwarmStateSaver

    opener = open_store if dry_run else open_writable
    progress = Progress(sys.stderr)
    with opener(args.path, schema=args.schema) as store:
        try:
            report = SwarmStateSaver(store).retain(
                keep_last=args.keep_last,
                older_than=args.older_than,
                thread_ids=args.thread,
                dry_run=dry_run,
                progress=progress,
            )
        finally:
            progress.clear()
        reclaimed = store.reclaim() if args.reclaim and not dry_run else None
    return {
        **dataclasses.asdict(report),
        "reclaim": None if reclaimed is None else reclaimed.as_dict(),
    }

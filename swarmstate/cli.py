"""The swarmstate command: look into a store without changing it, prune it, measure this machine.

Every command that takes PATH opens it read-only (see :mod:`swarmstate._cli.source`),
except ``prune``, which opens it read-write for a real run.
This module only parses arguments, runs the command and turns failures into
one line on stderr and an exit status; the commands live in :mod:`swarmstate._cli`.
Importing it imports neither LangGraph nor matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import swarmstate
from swarmstate._checks import hide_password
from swarmstate._cli import render
from swarmstate._cli.prune import parse_duration
from swarmstate._cli.source import InputError, open_store
from swarmstate._errors import SwarmStateError

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

DESCRIPTION = """\
Look into a swarmstate store without changing it, prune it, and measure this machine.

PATH is a DiskStore file, or a PostgreSQL database given as a URL
(postgresql://...) or a libpq key=value string. Every command but prune
opens it read-only: nothing is created or written, a 0-byte or foreign file
is refused as it is, and a command does not wait behind another process's
write. prune deletes old checkpoints (a dry run changes nothing)."""

EPILOG = """\
exit status:
  0  success
  1  the command could not do its work: PATH is missing, unreadable or not a
     swarmstate store, a thread or checkpoint does not exist, check found
     problems, an optional extra is missing, or --out cannot be written
  2  usage error: unknown command, missing or malformed argument

Every error is one line on stderr. --json prints a stable JSON document
instead of the table: the same fields under fixed keys, ids, times
(ISO 8601, UTC) and values whole, where a table cuts a value to fit."""

PRUNE_DESCRIPTION = """\
Delete old checkpoints and idle threads, and what only they referenced.

Never breaks resume: the newest checkpoints of every namespace are kept with
their pending writes, and so are the ancestors a DeltaChannel rebuilds from.
Give --keep-last, --older-than or both.

It deletes only with --yes, wherever it runs (a terminal, cron, a script).
Without --yes it is a dry run: it opens PATH read-only, changes nothing,
reports what a real run would delete, and says to add --yes.
--reclaim gives the freed space back after a real run (DiskStore: the file
shrinks; PostgreSQL: VACUUM)."""

_DEBUG_ENV = "SWARMSTATE_DEBUG"  # set to 1 for a traceback of an unexpected error


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _at_least(least: int) -> Callable[[str], int]:
    """An argparse type: an int no smaller than ``least``, else a usage error."""
    kind = "a positive integer" if least == 1 else f"an integer >= {least}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
        return value

    return parse


_positive = _at_least(1)
_non_negative = _at_least(0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``swarmstate`` command."""
    parser = _Parser(
        prog="swarmstate",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"swarmstate {swarmstate.__version__}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ".",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != "benchmark":
            cmd.add_argument("path", metavar="PATH", help="DiskStore file or PostgreSQL DSN")
        return cmd

    def as_json(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument(
            "--json", action="store_true", help="print a JSON document instead of the table"
        )

    def output(cmd: argparse.ArgumentParser) -> None:
        as_json(cmd)
        cmd.add_argument(
            "--schema", default="swarmstate", help="PostgreSQL schema (default %(default)s)"
        )

    threads = command(
        "threads", "LangGraph threads, newest activity first: checkpoints, namespaces, bytes"
    )
    threads.add_argument(
        "--limit", type=_positive, default=20, metavar="N",
        help="at most N threads (default %(default)s)",
    )  # fmt: skip
    threads.add_argument(
        "--offset", type=_non_negative, default=0, metavar="N",
        help="skip the N newest threads: the next page starts at --offset N",
    )  # fmt: skip
    threads.add_argument(
        "--count", action="store_true",
        help="also count every thread of the store (a walk that costs the number of threads)",
    )  # fmt: skip
    output(threads)
    threads.set_defaults(func=_cmd_threads)

    history = command("history", "checkpoints of one thread, newest first")
    history.add_argument("thread", metavar="THREAD", help="thread id")
    history.add_argument("--ns", default=None, help="only this checkpoint namespace")
    history.add_argument("--limit", type=_positive, default=None, help="at most N checkpoints")
    output(history)
    history.set_defaults(func=_cmd_history)

    show = command("show", "one checkpoint: channel values summarized, pending writes, metadata")
    show.add_argument("thread", metavar="THREAD", help="thread id")
    show.add_argument(
        "checkpoint", metavar="CHECKPOINT", nargs="?",
        help="checkpoint id or a unique prefix of one (default the latest)",
    )  # fmt: skip
    show.add_argument(
        "--ns", default=None, help="checkpoint namespace (default the root one, for the latest)"
    )
    show.add_argument(
        "--messages", type=_non_negative, default=3, help="last messages shown per channel"
    )
    output(show)
    show.set_defaults(func=_cmd_show)

    diff = command("diff", "what changed between two checkpoints: channels, messages")
    diff.add_argument("thread", metavar="THREAD", help="thread id")
    diff.add_argument("a", metavar="A", help="the earlier checkpoint id (or a unique prefix)")
    diff.add_argument("b", metavar="B", help="the later checkpoint id (or a unique prefix)")
    diff.add_argument("--ns", default=None, help="checkpoint namespace of both")
    output(diff)
    diff.set_defaults(func=_cmd_diff)

    inspect = command("inspect", "store-level view: namespaces, entry counts, snapshots")
    inspect.add_argument(
        "--limit", type=_positive, default=20, help="namespaces and snapshots shown"
    )
    output(inspect)
    inspect.set_defaults(func=_cmd_inspect)

    check = command("check", "SQLite integrity check and every entry decoded; lists bad ones")
    output(check)
    check.set_defaults(func=_cmd_check)

    prune = command(
        "prune", "delete old checkpoints and idle threads (the one command that writes)"
    )
    prune.description = PRUNE_DESCRIPTION
    prune.add_argument(
        "--keep-last", type=_positive, default=None, metavar="N",
        help="keep the newest N checkpoints of each thread namespace",
    )  # fmt: skip
    prune.add_argument(
        "--older-than", type=parse_duration, default=None, metavar="AGE",
        help="delete whole threads idle longer than AGE: 30d, 12h, 15m, 90s or seconds",
    )  # fmt: skip
    prune.add_argument(
        "--thread", action="append", default=None, metavar="ID",
        help="only this thread (repeat for more)",
    )  # fmt: skip
    mode = prune.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run", action="store_true", help="change nothing; report what would go (the default)"
    )
    mode.add_argument("--yes", action="store_true", help="delete (without it: a dry run)")
    prune.add_argument(
        "--reclaim", action="store_true", help="then give the freed space back (store.reclaim())"
    )
    output(prune)
    prune.set_defaults(func=_cmd_prune, parser=prune)

    bench = command("benchmark", "measure the stores on this machine (for bug reports)")
    bench.add_argument("--full", action="store_true", help="the whole sweep (slower)")
    bench.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    shown = bench.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress", action="store_true", help="progress on stderr even when not a terminal"
    )
    shown.add_argument("--no-progress", action="store_true", help="no progress at all")
    as_json(bench)
    bench.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests only
    bench.set_defaults(func=_cmd_benchmark)
    return parser


# -- commands ---------------------------------------------------------------------


def _require_langgraph() -> None:
    """Import the saver before the views: its error names the extra when LangGraph is missing."""
    importlib.import_module("swarmstate.integrations.langgraph")


def _saver(store: Any) -> Any:
    from swarmstate.integrations.langgraph import SwarmStateSaver

    return SwarmStateSaver(store)


def _view(
    args: argparse.Namespace,
    build: Callable[[Any], dict[str, Any]],
    text: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """Open PATH read-only, build the view's document, print it as JSON or text."""
    with open_store(args.path, schema=args.schema) as store:
        doc = build(store)
    # Every stored text is escaped where it is rendered; this pass keeps a
    # control character that a view missed from reaching the terminal too.
    print(render.to_json(doc) if args.json else render.terminal_safe(text(doc)))
    return doc


def _cmd_threads(args: argparse.Namespace) -> int:
    _require_langgraph()
    from swarmstate._cli import threads as views

    def build(store: Any) -> dict[str, Any]:
        return views.threads_view(_saver(store), args.limit, args.offset, count=args.count)

    _view(args, build, render.render_threads)
    return EXIT_OK


def _cmd_history(args: argparse.Namespace) -> int:
    _require_langgraph()
    from swarmstate._cli import threads as views

    def build(store: Any) -> dict[str, Any]:
        return views.history_view(_saver(store), args.thread, args.ns, args.limit)

    _view(args, build, render.render_history)
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    _require_langgraph()
    from swarmstate._cli import threads as views

    def build(store: Any) -> dict[str, Any]:
        saver = _saver(store)
        return views.show_view(saver, args.thread, args.checkpoint, args.ns, args.messages)

    _view(args, build, render.render_show)
    return EXIT_OK


def _cmd_diff(args: argparse.Namespace) -> int:
    _require_langgraph()
    from swarmstate._cli import threads as views

    def build(store: Any) -> dict[str, Any]:
        return views.diff_view(_saver(store), args.thread, args.a, args.b, args.ns)

    _view(args, build, render.render_diff)
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace) -> int:
    from swarmstate._cli.store_views import inspect_view

    _view(
        args,
        lambda store: inspect_view(store, args.limit),
        lambda doc: render.render_inspect(doc, _shown_path(args)),
    )
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from swarmstate._cli.store_views import check_view

    doc = _view(args, check_view, lambda doc: render.render_check(doc, _shown_path(args)))
    return EXIT_OK if doc["ok"] else EXIT_ERROR


def _cmd_prune(args: argparse.Namespace) -> int:
    if args.keep_last is None and args.older_than is None:
        args.parser.error("give --keep-last N, --older-than AGE or both")
    _require_langgraph()
    from swarmstate._cli.prune import prune

    doc = prune(args, dry_run=not args.yes)
    print(
        render.to_json(doc)
        if args.json
        else render.terminal_safe(render.render_prune(doc, _shown_path(args)))
    )
    if not args.yes and not args.dry_run:
        sys.stdout.flush()
        print(
            "swarmstate prune: this was a dry run, nothing was deleted; add --yes to delete",
            file=sys.stderr,
        )
    return EXIT_OK


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from swarmstate._cli import bench

    if args.out is not None:
        bench.check_writable(args.out)
    size = "tiny" if args.tiny else ("full" if args.full else "default")
    progress = args.progress or (not args.no_progress and sys.stderr.isatty())
    doc = bench.run_benchmark(size, progress=progress)
    print(render.to_json(doc) if args.json else bench.format_report(doc))
    if args.out is not None:
        bench.write_result(doc, args.out)
        # With --json, stdout holds the document alone.
        print(
            f"wrote {args.out} (attach it to a bug report)",
            file=sys.stderr if args.json else sys.stdout,
        )
    return EXIT_OK


# -- entry point --------------------------------------------------------------------


def _shown_path(args: argparse.Namespace) -> str:
    """The store argument as output may show it: a DSN's password hidden."""
    path: str = args.path
    return hide_password(path, path)


def _one_line(exc: BaseException, args: argparse.Namespace) -> str:
    text = " ".join(str(exc).split())
    path = getattr(args, "path", None)
    if isinstance(path, str):
        # A PostgreSQL DSN may hold a password; no message shows it.
        text = hide_password(text, path)
    return render.escaped(text) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``swarmstate`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    prog = f"swarmstate {args.command}"
    try:
        result: int = args.func(args)
        sys.stdout.flush()
    except (SwarmStateError, InputError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            return _closed_stdout()
        print(f"{prog}: {_one_line(exc, args)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get(_DEBUG_ENV) == "1":
            raise
        print(
            f"{prog}: unexpected {type(exc).__name__}: {_one_line(exc, args)} "
            f"(a bug: {_DEBUG_ENV}=1 shows the traceback; please report it)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return result


def _closed_stdout() -> int:
    """The reader of stdout went away (``| head``): stop quietly, without a flush error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_ERROR

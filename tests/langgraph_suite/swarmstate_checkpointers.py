"""A pytest plugin that runs LangGraph's own checkpointer tests on SwarmStateSaver.

Loaded with ``-p swarmstate_checkpointers`` into a pytest run of the ``tests/``
folder of LangGraph's sdist (``nox -s langgraph_suite`` fetches it; see
``tests/README.md``). LangGraph's tests take a checkpointer through two
parametrized fixtures of theirs, ``sync_checkpointer`` and
``async_checkpointer``. This plugin, without touching their files:

* keeps only the tests that take one of them;
* parametrizes those fixtures with its own list of checkpointers instead of
  theirs: ``memory`` (their own in-memory saver, the baseline) and
  SwarmStateSaver over ``Store()`` and over a ``DiskStore`` in a temporary
  file, with LangGraph's default serializer or (``*_strict``) with the saver's
  own strict default;
* sets up our checkpointers itself (their fixture sets up only theirs), by
  running our fixture function in place of theirs for our parameters, the way
  anyio's plugin runs its async fixtures;
* compares each test's outcome on each of our checkpointers with the
  baseline's, lists every test the baseline passes and ours does not, and
  makes the run fail exactly when there is one (failures the baseline shares
  are reported but do not fail the run); with pytest-rerunfailures, it also
  lists the tests that passed only on a rerun.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from swarmstate import Store
from swarmstate.backends.disk import DiskStore
from swarmstate.integrations.langgraph import SwarmStateSaver

FIXTURES = ("sync_checkpointer", "async_checkpointer")
BASELINE = "memory"  # LangGraph's parameter for its in-memory saver
# Our checkpointers: name -> (store, serializer: "langgraph" or "strict").
OURS = {
    "swarmstate_store": ("memory", "langgraph"),
    "swarmstate_disk": ("disk", "langgraph"),
    "swarmstate_store_strict": ("memory", "strict"),
    "swarmstate_disk_strict": ("disk", "strict"),
}
DEFAULT = f"{BASELINE},swarmstate_store,swarmstate_disk"

_VARIANT = "swarmstate_checkpointer"  # user properties, which reach the xdist controller
_CASE = "swarmstate_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("swarmstate", "LangGraph's checkpointer tests on SwarmStateSaver")
    group.addoption(
        "--swarmstate-checkpointers",
        default=DEFAULT,
        help=(
            f"comma-separated checkpointers to run each test on, from {BASELINE} (the "
            f"baseline) and {', '.join(OURS)}; default {DEFAULT}. Without {BASELINE}, "
            "outcomes are not compared and failures fail the run as usual."
        ),
    )
    group.addoption(
        "--swarmstate-report",
        default=None,
        metavar="PATH",
        help="also write every test's outcome on every checkpointer to PATH as JSON",
    )


def pytest_configure(config: pytest.Config) -> None:
    names = [n.strip() for n in config.getoption("swarmstate_checkpointers").split(",")]
    unknown = [n for n in names if n not in OURS and n != BASELINE]
    if unknown:
        raise pytest.UsageError(
            f"--swarmstate-checkpointers: unknown {unknown}; choose from {BASELINE}, "
            f"{', '.join(OURS)}"
        )
    config.pluginmanager.register(Suite(config, list(dict.fromkeys(names))), "swarmstate-suite")


def _swarmstate_checkpointer(request: pytest.FixtureRequest) -> Iterator[SwarmStateSaver]:
    """A SwarmStateSaver over a fresh store, closed (and its file removed) after the test."""
    backend, serializer = OURS[request.param]
    serde = JsonPlusSerializer() if serializer == "langgraph" else None  # None: our strict default
    with contextlib.ExitStack() as stack:
        if backend == "disk":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="swarmstate-lg-"))
            store: Store | DiskStore = DiskStore(Path(folder) / "state.db")
        else:
            store = Store()
        stack.callback(store.close)
        yield SwarmStateSaver(store, serde=serde)


class Suite:
    """The plugin's state for one run: the checkpointers chosen and every outcome seen."""

    def __init__(self, config: pytest.Config, names: list[str]) -> None:
        self.config = config
        self.names = names
        # case (a test with its other parameters) -> checkpointer -> result
        self.outcomes: dict[str, dict[str, dict[str, str]]] = {}
        self.regressions: dict[str, list[dict[str, str]]] | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # A parametrize mark on the test takes precedence over the fixture's
        # own params (pytest's rule), so adding one replaces their list with
        # ours. Put before the test's own marks, as their fixture's params come
        # before those, it gives the baseline the ids their snapshots are named by.
        taken = {n for m in metafunc.definition.iter_markers("parametrize") for n in _argnames(m)}
        for name in FIXTURES:
            if name in metafunc.fixturenames and name not in taken:
                mark = pytest.mark.parametrize(name, self.names, indirect=True, ids=self.names)
                metafunc.definition.add_marker(mark, append=False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: Any) -> Any:
        # Their fixture knows only their checkpointers: for ours, our fixture
        # function runs in its place (outermost, so no async wrapper sees theirs).
        if fixturedef.argname not in FIXTURES or getattr(request, "param", None) not in OURS:
            return (yield)
        theirs = fixturedef.func
        fixturedef.func = _swarmstate_checkpointer  # type: ignore[misc]
        try:
            return (yield)
        finally:
            fixturedef.func = theirs  # type: ignore[misc]

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect, and before reordering
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # A case is a test with its parameters other than the checkpointer: the
        # n-th item of a test on one checkpointer and the n-th on another are
        # one case, as pytest makes the product of parameters in order.
        kept, dropped = [], []
        seen: dict[tuple[str, str], int] = {}
        for item in items:
            callspec = getattr(item, "callspec", None)
            name = next((n for n in FIXTURES if callspec and n in callspec.params), None)
            if callspec is None or name is None:
                dropped.append(item)
                continue
            kept.append(item)
            test = item.nodeid.split("[")[0]
            checkpointer = callspec.params[name]
            n = seen[test, checkpointer] = seen.get((test, checkpointer), -1) + 1
            item.user_properties += [(_VARIANT, checkpointer), (_CASE, f"{test}#{n}")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if _VARIANT not in props:
            return
        result = self.outcomes.setdefault(str(props[_CASE]), {}).setdefault(
            str(props[_VARIANT]), {"nodeid": report.nodeid, "outcome": "passed", "message": ""}
        )
        if report.outcome == "rerun":  # pytest-rerunfailures: a failed try, run again
            result["rerun"] = _first_line(report)
            return
        if result["outcome"] == "failed":
            return
        if report.failed:
            result["outcome"] = "failed"
            result["message"] = _first_line(report)
        elif report.skipped:
            result["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
            result["message"] = _first_line(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):  # an xdist worker: the controller compares
            return
        self.regressions = {n: [] for n in self.names if n != BASELINE}
        for results in self.outcomes.values():
            base = results.get(BASELINE)
            if base is None or base["outcome"] != "passed":
                continue
            for name, result in results.items():
                if name != BASELINE and result["outcome"] != "passed":
                    self.regressions[name].append(result)
        path = self.config.getoption("swarmstate_report")
        if path:
            Path(path).write_text(json.dumps(self.outcomes, indent=1, sort_keys=True) + "\n")
        if BASELINE in self.names and exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
        ):
            failed = any(self.regressions.values())
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.regressions is None:
            return
        write = terminalreporter.write_line
        terminalreporter.section("SwarmStateSaver on LangGraph's checkpointer tests")
        for name in self.names:
            counts: dict[str, int] = {}
            for results in self.outcomes.values():
                if name in results:
                    outcome = results[name]["outcome"]
                    counts[outcome] = counts.get(outcome, 0) + 1
            tally = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
            write(f"{name}: {sum(counts.values())} tests: {tally}")
        if BASELINE not in self.names:
            write(f"no baseline ({BASELINE}) in this run: outcomes are not compared")
            return
        for name, results in self.regressions.items():
            if not results:
                write(f"{name}: passes every test the baseline passes", green=True)
                continue
            write(f"{name}: {len(results)} tests the baseline passes do not pass:", red=True)
            for result in sorted(results, key=lambda r: r["nodeid"]):
                write(f"  {result['outcome'].upper()} {result['nodeid']} - {result['message']}")
        for name in self.names:
            flaky = sorted(
                (r["nodeid"], r["rerun"])
                for results in self.outcomes.values()
                if (r := results.get(name)) and r["outcome"] == "passed" and "rerun" in r
            )
            for nodeid, message in flaky:
                write(f"passed on a rerun: {nodeid} - first try: {message}", yellow=True)
        shared = sum(
            1
            for results in self.outcomes.values()
            if results.get(BASELINE, {}).get("outcome") == "failed"
        )
        if shared:
            write(f"{shared} tests fail on the baseline: they are not compared")


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
    if isinstance(names, str):
        return [n.strip() for n in names.split(",")]
    return list(names)


def _first_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        text = str(crash.message)
    elif isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
        text = str(report.longrepr[2])
    else:
        text = str(report.longrepr or "")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""

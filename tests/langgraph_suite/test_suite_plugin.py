"""The plugin that runs LangGraph's checkpointer tests on SwarmStateSaver, on a stand-in suite.

The stand-in has what the plugin relies on in LangGraph's: a conftest whose
``sync_checkpointer`` fixture knows only its own parameters, another
parametrized fixture, and tests that take neither.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

THEIR_CONFTEST = """
import pytest
from langgraph.checkpoint.memory import InMemorySaver

@pytest.fixture(params=["memory", "sqlite"])
def sync_checkpointer(request):
    if request.param == "memory":
        yield InMemorySaver()
    else:
        raise NotImplementedError(request.param)

@pytest.fixture(params=["sync", "exit"])
def durability(request):
    return request.param
"""

THEIR_TESTS = """
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from swarmstate.integrations.langgraph import SwarmStateSaver

@pytest.mark.parametrize("flag", [True, False])
def test_passes_on_every_saver(sync_checkpointer, durability, flag):
    assert isinstance(sync_checkpointer, (InMemorySaver, SwarmStateSaver))

def test_only_their_saver_passes(sync_checkpointer):
    assert isinstance(sync_checkpointer, InMemorySaver)

def test_fails_on_every_saver(sync_checkpointer):
    assert False

def test_takes_no_checkpointer():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.syspathinsert(Path(__file__).parent)  # as PYTHONPATH in the nox session
    pytester.makeconftest(THEIR_CONFTEST)
    pytester.makepyfile(test_theirs=THEIR_TESTS)
    return pytester


def run(suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    plugins = ["-p", "swarmstate_checkpointers", "-p", "no:asyncio", "-p", "no:cacheprovider"]
    return suite.runpytest(*plugins, *args)


def test_a_test_only_the_baseline_passes_fails_the_run_and_is_listed(
    suite: pytest.Pytester,
) -> None:
    result = run(suite)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "swarmstate_store: 1 tests the baseline passes do not pass:",
            "  FAILED test_theirs.py::test_only_their_saver_passes[[]swarmstate_store[]] - *",
            "swarmstate_disk: 1 tests the baseline passes do not pass:",
            "  FAILED test_theirs.py::test_only_their_saver_passes[[]swarmstate_disk[]] - *",
            "1 tests fail on the baseline: they are not compared",
        ]
    )
    # Their own parameters other than the baseline's are not run, nor are
    # tests without a checkpointer; every other parameter is kept.
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["failed"], outcomes["deselected"]) == (13, 5, 1)
    assert "sqlite" not in result.stdout.str()


def test_failures_the_baseline_shares_do_not_fail_the_run(suite: pytest.Pytester) -> None:
    result = run(suite, "-k", "not only_their_saver")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "memory: 5 tests: 1 failed, 4 passed",
            "swarmstate_store: passes every test the baseline passes",
            "swarmstate_disk: passes every test the baseline passes",
        ]
    )


def test_the_baseline_keeps_its_id_before_the_tests_own_parameters(suite: pytest.Pytester) -> None:
    result = run(suite, "--collect-only", "-q", "-k", "every_saver and memory")
    result.stdout.fnmatch_lines(
        [
            "test_theirs.py::test_passes_on_every_saver[[]sync-memory-True[]]",
            "test_theirs.py::test_passes_on_every_saver[[]sync-memory-False[]]",
        ],
        consecutive=False,
    )


def test_without_the_baseline_failures_fail_the_run_as_usual(suite: pytest.Pytester) -> None:
    result = run(suite, "--swarmstate-checkpointers=swarmstate_store_strict", "-k", "every_saver")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["no baseline (memory) in this run: outcomes are not compared"])
    assert result.parseoutcomes()["passed"] == 4


def test_an_unknown_checkpointer_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = run(suite, "--swarmstate-checkpointers=memory,sqlite")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--swarmstate-checkpointers: unknown [[]'sqlite'[]]*"])

"""LangGraph's official checkpointer conformance suite, run against every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver


async def test_official_suite_reports_full_conformance(
    make_store: Callable[[], swarmstate.BaseStore],
) -> None:
    @checkpointer_test(name="SwarmStateSaver")
    async def factory() -> AsyncIterator[SwarmStateSaver]:
        yield SwarmStateSaver(make_store())

    report = await validate(factory)

    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    # Every capability, base and extended, was detected and run, none skipped.
    assert set(report.results) == {cap.value for cap in ALL_CAPABILITIES}
    assert all(r.detected and r.passed for r in report.results.values())
    assert sum(r.tests_passed for r in report.results.values()) >= 81
    assert report.conformance_level() == "FULL"

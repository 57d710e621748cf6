"""The steps of a PostgresStore call, written once and run by a blocking or an awaiting runner.

A call that talks to the server (a range read, a batch write, the ways
around an older schema) is a *plan*: a generator that decides which
statements to run and what their rows mean, and yields each step it needs
(a statement, the schema's version, a transaction) to its runner, which
sends back the step's result or throws its error in. The same plan runs on
a thread through :meth:`.session.Session.drive` (psycopg's blocking
connections) and on an event loop through
:meth:`.async_session.AsyncSession.drive` (psycopg's async connections): the
statements, their parameters and the decoding of their rows exist once.

The invariant: a plan does no I/O of its own; every round trip is a step
it yields, so the loop's runner never blocks on the server. A runner
throws every failure of a step into its plan, cancellation included, so a
plan's ``with`` and ``finally`` blocks always run where they began.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias, TypeVar

__all__ = [
    "READY",
    "Atomic",
    "Batch",
    "Fetch",
    "Params",
    "Plan",
    "Ready",
    "Rows",
    "Step",
]

T = TypeVar("T")

Params = Mapping[str, Any] | tuple[Any, ...] | None
"""A statement's parameters: named, positional, or none."""

Rows = list[tuple[Any, ...]]
"""A statement's result rows."""


class Ready(NamedTuple):
    """Know the schema's version (read it unless known and current); the result is None."""


READY = Ready()


class Fetch(NamedTuple):
    """Run the statement named ``name`` (one round trip); the result is its rows."""

    name: str
    params: Params = None


class Batch(NamedTuple):
    """Run several named statements in one pipeline (one round trip, one implicit transaction).

    The result is each statement's rows, in order.
    """

    statements: Sequence[tuple[str, Params]]


class Atomic(NamedTuple):
    """Run the plan ``make()`` in one transaction on one connection; the result is the plan's.

    Every step of that plan runs on the transaction's connection; the plan
    takes the store's lock itself (a ``LOCK`` fetch) where it needs one. A
    failure rolls the transaction back; a runner may call ``make`` again to
    retry what the server aborted (a deadlock, a serialization failure).
    """

    make: Callable[[], Plan[Any]]


Step: TypeAlias = Ready | Fetch | Batch | Atomic
"""What a plan may ask its runner for."""

Plan: TypeAlias = Generator[Step, Any, T]
"""A call's steps; its return value is the call's result."""

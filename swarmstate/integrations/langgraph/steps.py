"""What a saver call asks of its store, as steps: written once, run blocking or awaited.

A saver method that reads or writes the store is written once, as a
generator (a *plan*) that yields one step per store call and is sent back
its result, or thrown its exception. :func:`run` drives a plan with the
store's blocking methods; :func:`arun` awaits the store's own async
methods where it has them (``PostgresStore`` on psycopg's async pool), runs
the blocking call in a worker thread where it does not (``DiskStore``:
apsw releases the interpreter while SQLite works), and calls it inline on
the in-memory store, which never blocks. The Python work between steps
(serializing, building the transaction, decoding) runs where the caller
runs: on the event loop for :func:`arun`, in pieces a step long.

The invariant: a plan never calls the store itself; every store call is a
step, so the two drivers do the same calls in the same order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from swarmstate._base import BaseStore
from swarmstate._checks import Transaction

__all__ = [
    "Blocking",
    "GetMany",
    "Items",
    "NeedsStore",
    "Plan",
    "Step",
    "Write",
    "arun",
    "mode_of",
    "run",
]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Write:
    """``store.write(transaction)``; sent back its :class:`~swarmstate.WriteResult`."""

    transaction: Transaction


@dataclass(frozen=True, slots=True)
class Items:
    """``store.items(namespace, ..., raw=True)``; sent back ``[(key, stored bytes)]``."""

    namespace: str
    start: str | None = None
    stop: str | None = None
    reverse: bool = False
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class GetMany:
    """``store.get_many(pairs, raw=True)``; sent back the stored bytes or None, in order."""

    pairs: list[tuple[str, str]]


class NeedsStore(Exception):
    """Raised by a :attr:`Blocking.first` attempt that would have to read the store."""


@dataclass(frozen=True, slots=True)
class Blocking:
    """A call of the saver's blocking code, for the work not split into steps (a
    build or a decode that may read bytes not cached, a refusal's clean-up,
    retention): run as it is by :func:`run`, in a worker thread by :func:`arun`
    unless the store never blocks.

    ``first``, if given, is the same work done without reading the store
    (raising :class:`NeedsStore` where it would have to): :func:`arun` tries it
    on the loop, and hands ``call`` to a thread only when it raises. :func:`run`
    calls ``call`` alone, so the blocking path never does the work twice.
    """

    call: Callable[[], Any]
    first: Callable[[], Any] | None = None


Step = Write | Items | GetMany | Blocking
Plan = Generator[Step, Any, _T]


def _blocking(store: BaseStore, step: Step) -> Any:
    if type(step) is Write:
        return store.write(step.transaction)
    if type(step) is Items:
        return store.items(
            step.namespace,
            start=step.start,
            stop=step.stop,
            reverse=step.reverse,
            limit=step.limit,
            raw=True,
        )
    if type(step) is GetMany:
        return store.get_many(step.pairs, raw=True)
    if type(step) is Blocking:
        return step.call()
    raise TypeError(f"not a store step: {step!r}")


def run(store: BaseStore, plan: Plan[_T]) -> _T:
    """Drive ``plan`` with ``store``'s blocking methods; its return value."""
    try:
        step = next(plan)
        while True:
            try:
                result = _blocking(store, step)
            except Exception as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _awaited(store: BaseStore, step: Step, mode: str) -> Any:
    if type(step) is Blocking and step.first is not None:
        try:
            return step.first()
        except NeedsStore:
            pass
    if mode == "inline":
        return _blocking(store, step)
    if mode == "native" and type(step) is not Blocking:
        native: Any = store  # a store with async twins (checked by awaitable())
        if type(step) is Write:
            return await native.awrite(step.transaction)
        if type(step) is Items:
            return await native.aitems(
                step.namespace,
                start=step.start,
                stop=step.stop,
                reverse=step.reverse,
                limit=step.limit,
                raw=True,
            )
        if type(step) is GetMany:
            return await native.aget_many(step.pairs, raw=True)
    return await asyncio.to_thread(_blocking, store, step)


def mode_of(store: BaseStore) -> str:
    """How :func:`arun` runs ``store``'s calls: ``inline``, ``native`` or ``thread``."""
    if not store.blocks:
        return "inline"
    if store.awaitable():
        return "native"
    return "thread"


async def arun(store: BaseStore, plan: Plan[_T], mode: str | None = None) -> _T:
    """Drive ``plan`` on the running event loop, awaiting each step; its return value.

    A failed step is thrown into the plan, which may handle it (a write
    refused by a condition); a cancellation is not: it ends the plan where it
    waited, and the store's own async method leaves nothing half done (a
    transaction is whole or absent, its connection back in the pool).
    """
    how = mode if mode is not None else mode_of(store)
    try:
        step = next(plan)
        while True:
            try:
                result = await _awaited(store, step, how)
            except Exception as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]

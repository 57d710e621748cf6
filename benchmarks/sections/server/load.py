"""The load a server puts on a checkpointer: many users awaiting one graph on one event loop.

:func:`serve` runs ``users`` tasks on the running loop, each ``await``-ing
``graph.ainvoke`` on a thread of its own, while a ticker task on the same
loop sleeps a millisecond at a time and records how late each wake-up is
(the loop's lag: how long every other request on that server would have
waited for the loop at that moment), and the CPU time of the loop's own
thread over the run (what the turns cost the loop, whatever ran in worker
threads). Nothing here knows which saver the graph writes through.

Closed loop (the default): each user starts its next turn as soon as the
last one returned, so a faster saver also offers the loop more work per
second. Open loop (``rate``): each user's turns arrive at seeded Poisson
times, ``rate`` turns per second over all users whatever the saver, and a
turn is timed from its arrival (a turn that arrives while the user's last
one still runs waits, and that wait counts), so two savers are compared at
the same offered load.
"""

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TICK_NS", "Served", "serve"]

TICK_NS = 1_000_000  # the ticker's sleep


@dataclass
class Served:
    """What one run of the load measured."""

    users: int
    turns: int
    seconds: float  # from the first user's start to the last user's end
    turn_ns: list[int]  # each ainvoke, in the order they ended
    lag_ns: list[int]  # each wake-up of the ticker: how much later than asked
    loop_cpu: float = 0.0  # seconds of CPU the loop's thread used over the run

    @property
    def throughput(self) -> float:
        """Turns per second over the run."""
        return len(self.turn_ns) / self.seconds

    @property
    def loop_cpu_per_turn(self) -> float:
        """Milliseconds of the loop thread's CPU per turn: what a turn costs the loop."""
        return self.loop_cpu / len(self.turn_ns) * 1e3

    @property
    def loop_busy(self) -> float:
        """The share of the run's wall time the loop's thread spent on the CPU."""
        return self.loop_cpu / self.seconds


async def _tick(lags: list[int], stop: asyncio.Event) -> None:
    sleep = TICK_NS / 1e9
    clock = time.perf_counter_ns
    while not stop.is_set():
        began = clock()
        await asyncio.sleep(sleep)
        lags.append(max(0, clock() - began - TICK_NS))


def arrivals(rate: float, users: int, turns: int, seed: str) -> list[list[int]]:
    """Per user, its turns' arrival times (ns from the start): Poisson, ``rate``/s over all users.

    Each user's gaps are exponential with mean ``users / rate`` seconds,
    drawn from its own seeded generator, so every saver gets the same times.
    """
    if rate <= 0:
        raise ValueError(f"rate must be positive turns per second, got {rate!r}")
    out = []
    for number in range(users):
        rng = random.Random(f"{seed}:{number}")
        at, times = 0.0, []
        for _ in range(turns):
            at += rng.expovariate(rate / users)
            times.append(int(at * 1e9))
        out.append(times)
    return out


async def serve(
    graph: Any,
    turn_input: Callable[[int], dict[str, Any]],
    users: int,
    turns: int,
    tag: str,
    rate: float | None = None,
    seed: str = "",
) -> Served:
    """``users`` concurrent users, each ``turns`` awaited turns on thread ``<tag>-<user>``.

    ``durability="sync"``: a turn's checkpoints are written before its
    ``ainvoke`` returns, as a server that must not lose a turn runs them.
    With ``rate`` (turns per second over all users), turns arrive at the
    seeded times of :func:`arrivals` instead of back to back.
    """
    clock = time.perf_counter_ns
    turn_ns: list[int] = []
    lags: list[int] = []
    stop = asyncio.Event()
    schedule = arrivals(rate, users, turns, f"{seed}:{tag}") if rate is not None else None
    began = 0

    async def user(number: int) -> None:
        config = {"configurable": {"thread_id": f"{tag}-{number}"}}
        for turn in range(turns):
            if schedule is None:
                arrived = clock()
            else:
                arrived = began + schedule[number][turn]
                ahead = arrived - clock()
                if ahead > 0:
                    await asyncio.sleep(ahead / 1e9)
            await graph.ainvoke(turn_input(turn), config, durability="sync")
            turn_ns.append(clock() - arrived)

    ticker = asyncio.create_task(_tick(lags, stop))
    began = clock()
    cpu_began = time.thread_time()  # this is the loop's thread
    try:
        async with asyncio.TaskGroup() as users_running:  # one user failing stops them all
            for number in range(users):
                users_running.create_task(user(number))
        seconds = (clock() - began) / 1e9
        loop_cpu = time.thread_time() - cpu_began
    finally:
        stop.set()
        await ticker
    return Served(users, turns, seconds, turn_ns, lags, loop_cpu)

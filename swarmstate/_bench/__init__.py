"""The measuring behind ``swarmstate benchmark`` and ``benchmarks/run.py``.

Modules, by what they measure:

* :mod:`~swarmstate._bench.timing`: interleaved rounds of timed calls,
  percentiles, throughput, seeded values;
* :mod:`~swarmstate._bench.writers`: several writer processes on one
  DiskStore file;
* :mod:`~swarmstate._bench.environment`: what a result depends on;
* :mod:`~swarmstate._bench.savers`: checkpointers side by side on a recorded
  conversation (LangGraph is imported only when a saver is measured);
* :mod:`~swarmstate._bench.conversation`: that conversation, recorded from
  LangGraph's runtime and replayed on any checkpointer (imports LangGraph).
"""

from swarmstate._bench.environment import environment, footprint
from swarmstate._bench.savers import saver_rows
from swarmstate._bench.timing import (
    Op,
    interleave,
    interleave_rounds,
    latency_stats,
    make_values,
    round_stats,
    throughput,
)
from swarmstate._bench.writers import parallel_writers

__all__ = [
    "Op",
    "environment",
    "footprint",
    "interleave",
    "interleave_rounds",
    "latency_stats",
    "make_values",
    "parallel_writers",
    "round_stats",
    "saver_rows",
    "throughput",
]

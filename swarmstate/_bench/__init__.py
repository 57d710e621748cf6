"""The measuring behind ``swarmstate benchmark`` and ``benchmarks/run.py``.

Modules, by what they measure with:

* :mod:`~swarmstate._bench.timing`: interleaved rounds of timed calls,
  percentiles, throughput, seeded values; the environment record; several
  writer processes on one DiskStore file;
* :mod:`~swarmstate._bench.savers`: checkpointers side by side on a recorded
  conversation (LangGraph is imported only when a saver is measured);
* :mod:`~swarmstate._bench.conversation`: that conversation, recorded from
  LangGraph's runtime and replayed on any checkpointer (imports LangGraph).
"""

from swarmstate._bench.timing import (
    Op,
    environment,
    footprint,
    interleave,
    interleave_rounds,
    latency_stats,
    make_values,
    parallel_writers,
    round_stats,
    saver_rows,
    throughput,
)

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

"""The benchmark suite: run with ``python -m benchmarks.run`` from the repository root."""

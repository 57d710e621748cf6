"""The sizes and call counts of one benchmark run, shared by the runner and every section."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

# X of "within X of the floor": a claim whose limit is below what any
# implementation must do (its floor) is read as "at most this much above the floor".
FLOOR_MARGIN = 1.25


@dataclass
class Config:
    """Sizes and call counts of one run; ``--quick`` shrinks every size, never drops one.

    Claims name their sizes from here (the longest thread, the largest
    store), so a quick run measures each claim at its reduced size under a
    label that says which.
    """

    iters: int
    seed: int
    quick: bool
    # Many short rounds: the contenders of a claim are timed close together,
    # and a claim's median moves little from run to run compared with its spread.
    rounds: int = 100
    warmup: int = 50
    # The least calls of each op in one round, so a round's p50 means something.
    per_round: int = 8
    # Throughput rows time whole batches: fewer, longer rounds.
    throughput_rounds: int = 30
    snapshot_sizes: list[int] = field(default_factory=lambda: [100, 1_000, 10_000, 50_000, 100_000])
    deepcopy_size: int = 50_000
    # (few, many) namespaces of 10 keys, and (few, many) keys in one namespace
    diff_namespaces: tuple[int, int] = (2_000, 20_000)
    diff_keys: tuple[int, int] = (1_000, 100_000)
    throughput_entries: int = 20_000
    thread_counts: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    disk_sizes: list[int] = field(default_factory=lambda: [1_000, 100_000])
    disk_changes: list[int] = field(default_factory=lambda: [1, 100])
    writer_counts: list[int] = field(default_factory=lambda: [1, 2, 4])
    writes_per_process: int = 2_000
    writer_rounds: int = 3
    # Checkpoints per thread. ``mid`` is the base of the flatness claims: by
    # then the conversation's message window is full, so the latest
    # checkpoint is as large as on the longest thread.
    thread_lengths: list[int] = field(default_factory=lambda: [5, 50, 500, 2_000])
    mid_thread: int = 50
    # The server section: concurrent users on one event loop, turns each per round, rounds.
    server_users: list[int] = field(default_factory=lambda: [16, 64])
    server_turns: int = 20
    server_rounds: int = 5
    pg_dsn: str | None = None
    hash_seed: str | None = None  # PYTHONHASHSEED of the run (run.py pins it from seed)

    @classmethod
    def make(cls, iters: int | None, seed: int, quick: bool, pg_dsn: str | None) -> Config:
        """The full run's sizes, or the quick run's (``iters`` defaults per mode)."""
        default_iters = 480 if quick else 5_000
        cfg = cls(iters=iters or default_iters, seed=seed, quick=quick, pg_dsn=pg_dsn)
        if quick:
            cfg.rounds, cfg.warmup, cfg.per_round, cfg.throughput_rounds = 120, 10, 4, 40
            cfg.snapshot_sizes = [100, 1_000, 10_000]
            cfg.deepcopy_size = 10_000
            cfg.diff_namespaces, cfg.diff_keys = (200, 2_000), (1_000, 10_000)
            cfg.throughput_entries = 10_000
            cfg.thread_counts = [1, 2, 4]
            cfg.disk_sizes = [1_000, 5_000]
            cfg.writer_counts = [1, 2]
            cfg.writes_per_process = 200
            cfg.writer_rounds = 1
            cfg.thread_lengths = [5, 50, 200]
            cfg.server_turns, cfg.server_rounds = 4, 5
        return cfg

    def few_calls(self, calls: int) -> int:
        """``calls``, raised to :attr:`per_round` calls in each round."""
        return max(calls, self.rounds * self.per_round)

    @property
    def long_thread(self) -> int:
        return max(self.thread_lengths)

    def diff_layouts(self) -> list[tuple[str, int, int]]:
        """``(label, namespaces, keys per namespace)`` of every diff layout."""
        few, many = self.diff_namespaces
        small, large = self.diff_keys
        return [
            (f"ns{few}", few, 10),
            (f"ns{many}", many, 10),
            (f"one{small}", 1, small),
            (f"one{large}", 1, large),
        ]

    def rng(self, section: str) -> random.Random:
        """The section's generator: seeded from ``--seed`` and the section name."""
        return random.Random(f"{self.seed}:{section}")

    def settings(self) -> dict[str, Any]:
        out = asdict(self)
        out["pg_dsn"] = "given" if self.pg_dsn else None  # never record credentials
        out["floor_margin"] = FLOOR_MARGIN
        return out

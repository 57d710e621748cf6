"""Section "workers": what the several-workers checks cost a put.

Every checkpoint write carries the condition "this thread has no guard"
(no claim, no tombstone); a claimed thread's write reads its guard first and
writes on the condition that it did not change. Per backend, three threads
are written in interleaved rounds, the same checkpoint each time:

* ``control``: the checks turned off: a saver on a store whose conditional
  write ignores its conditions (:func:`unguarded`), so each put is the write
  with no condition, what a put cost before the checks existed;
* ``unclaimed``: a thread never claimed (the one lookup);
* ``fenced``: a claimed thread, written with its token.

Rows ``workers.put.<backend>.<variant>``; claims: unclaimed / control (the
cost of the one lookup: at most 1.25x, a few microseconds on a put that
costs ten in memory) and fenced / unclaimed (a guard read more).
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.growth_savers import drop_schema
from benchmarks.harness.results import Results
from swarmstate import BaseStore
from swarmstate._bench import round_stats

VARIANTS = ("control", "unclaimed", "fenced")


def unguarded(cls: type[BaseStore]) -> type[BaseStore]:
    """A subclass of a store class whose conditional write ignores its conditions.

    The saver sends every checkpoint write to ``_put_required``, the
    primitive behind ``set_many(require=...)``; this one writes the same
    rows as ``set_many`` without ``require`` does (``_put_many``).
    """

    def _put_required(
        self: BaseStore,
        rows: list[Any],
        if_absent: bool,
        ensure: list[Any],
        require: list[Any],
    ) -> int:
        return self._put_many(rows, if_absent, ensure) if rows or ensure else 0

    return type(f"Unguarded{cls.__name__}", (cls,), {"_put_required": _put_required})


def _stores(cfg: Config, workdir: Path) -> dict[str, tuple[Any, Any]]:
    """Per backend, the store the checks run on and the unguarded store of the control.

    The control has a store of its own in memory and on disk (a file of its
    own, so neither handle's writes empty the other's page cache), and a
    second handle on the same schema on PostgreSQL.
    """
    import swarmstate
    from swarmstate.backends.disk import DiskStore

    workdir.mkdir(parents=True, exist_ok=True)
    stores: dict[str, tuple[Any, Any]] = {
        "memory": (swarmstate.Store(), unguarded(swarmstate.Store)()),
        "disk": (
            DiskStore(workdir / "workers.db"),
            unguarded(DiskStore)(workdir / "workers-control.db"),  # type: ignore[call-arg]
        ),
    }
    if cfg.pg_dsn:
        from swarmstate.backends.postgres import PostgresStore

        schema = f"bench_workers_{time.time_ns() % 10**9}"
        pg = PostgresStore(cfg.pg_dsn, schema=schema)
        pg.setup()
        stores["postgres"] = (pg, unguarded(PostgresStore)(cfg.pg_dsn, schema=schema))  # type: ignore[call-arg]
    return stores


def section_workers(cfg: Config, res: Results, workdir: Path) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from swarmstate.integrations.langgraph import SwarmStateSaver

    rounds, per_round = max(10, cfg.rounds // 2), max(8, cfg.per_round * 2)
    for backend, (store, control_store) in _stores(cfg, workdir).items():
        saver = SwarmStateSaver(store)
        control = SwarmStateSaver(control_store)
        token = saver.claim("fenced", ttl=3600)
        runs = {
            "control": (control, "control", {}),
            "unclaimed": (saver, "unclaimed", {}),
            "fenced": (saver, "fenced", {"fence": token}),
        }
        parents: dict[str, str | None] = dict.fromkeys(VARIANTS)
        samples: dict[str, list[list[int]]] = {v: [] for v in VARIANTS}
        step = 0
        for r in range(rounds + 1):  # round 0 warms up and is thrown away
            gc.collect()
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                who, thread, extra = runs[variant]
                times = []
                for _ in range(per_round):
                    step += 1
                    config: dict[str, Any] = {
                        "configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}
                    }
                    if parents[variant]:
                        config["configurable"]["checkpoint_id"] = parents[variant]
                    checkpoint = empty_checkpoint()
                    checkpoint["channel_values"] = {"step": step}
                    checkpoint["channel_versions"] = {"step": who.get_next_version(None)}
                    metadata = {"source": "loop", "step": step}
                    new_versions = checkpoint["channel_versions"]
                    started = time.perf_counter_ns()
                    who.put(config, checkpoint, metadata, new_versions)
                    times.append(time.perf_counter_ns() - started)
                    parents[variant] = checkpoint["id"]
                if r:
                    samples[variant].append(times)
        for variant in VARIANTS:
            res.add(
                f"workers.put.{backend}.{variant}",
                round_stats(samples[variant]),
                section="workers",
                group="put",
                subject=f"SwarmStateSaver({backend}) {variant}",
                param=variant,
                batch=f"workers.{backend}",
            )
        base = f"workers.put.{backend}"
        res.claim(
            f"workers.unclaimed.{backend}",
            f"{backend}: put of a thread never claimed / the same put without the checks",
            f"{base}.unclaimed",
            f"{base}.control",
            1.25,
            section="workers",
            per_call=False,
        )
        res.claim(
            f"workers.fenced.{backend}",
            f"{backend}: put of a claimed thread with its token / of a thread never claimed",
            f"{base}.fenced",
            f"{base}.unclaimed",
            3.0,
            section="workers",
            per_call=False,
        )
        store.close()
        control_store.close()
        if backend == "postgres":
            drop_schema(cfg.pg_dsn, store.schema)
    if not cfg.pg_dsn:
        for name in ("unclaimed", "fenced"):
            res.claim(
                f"workers.{name}.postgres",
                f"postgres: {name} put (needs --pg-dsn)",
                f"workers.put.postgres.{name}",
                "workers.put.postgres.control",
                1.25,
                section="workers",
                per_call=False,
                reason="needs --pg-dsn",
            )

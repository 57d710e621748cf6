"""Rows and claims of one benchmark run: ratios taken round by round, with their spread.

A row is one measured thing (a saver's latest read at 2,000 checkpoints,
ops/s of 4 threads). Rows measured in the same interleaved rounds share a
``batch``; each keeps a figure per round (``rounds_p50`` for latency,
``rounds`` for throughput).

A claim compares two rows of one batch. For every round, the numerator's
figure is divided by the denominator's; the claim's ratio is the median of
those per-round ratios and its spread their interquartile range. A claim
holds only if the whole middle half of its rounds is within the limit: the
upper quartile for ``<=`` limits, the lower quartile for ``>=`` limits.
Two rows timed apart (no common batch) give a "not paired" claim: their
ratio is shown, and it neither holds nor misses.

A claim may name a floor: a row timing the least any implementation does
for the same call (LangGraph's serializer with no store, a bare apsw
INSERT), in the same rounds; for a scaling claim (one store at two sizes)
the floor is a pair of rows, the same work done bare at both sizes. The
floor is reported as the same ratio. When a per-call claim's limit is below
its floor's ratio, no store can meet it, so the claim is restated: a second
claim follows it, "within ``FLOOR_MARGIN`` of the floor", whose ratio is the
numerator over the floor (or, for scaling, the growth over the floor's
growth).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks.harness.config import FLOOR_MARGIN

NOT_MEASURED = "not measured in this run"


def round_figures(row: dict[str, Any]) -> list[float] | None:
    """A row's figure per round: p50s of a latency row, rates of a throughput row."""
    values = row.get("rounds_p50") if "rounds_p50" in row else row.get("rounds")
    return [float(v) for v in values] if isinstance(values, list) and values else None


def spread(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Median and interquartile range (q1, q3) of per-round ratios."""
    ordered = sorted(ratios)
    if len(ordered) == 1:
        return ordered[0], ordered[0], ordered[0]
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return statistics.median(ordered), q1, q3


def _judge(entry: dict[str, Any], ratios: list[float]) -> None:
    """Set a claim's ratio, spread and verdict from its per-round ratios.

    With a ``spread_bound`` the median must be within ``bound`` and the
    quartile within ``spread_bound`` (a limit whose spread may exceed it by a
    stated margin); without, the quartile within ``bound``.
    """
    ratio, q1, q3 = spread(ratios)
    bound = entry["bound"]
    edge = entry.get("spread_bound", bound)
    below = q3 <= edge and ratio <= bound
    holds = below if entry["op"] == "<=" else q1 >= edge and ratio >= bound
    entry.update(ratio=round(ratio, 4), q1=round(q1, 4), q3=round(q3, 4), rounds=len(ratios))
    entry.update(holds=bool(holds), verdict="holds" if holds else "missed")


class Results:
    """Rows keyed by a stable id, and the claims computed from them."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.claims: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}
        # The arguments of every claim() call, to judge them again on pooled rows.
        self.specs: list[dict[str, Any]] = []

    def add(self, row_id: str, figures: dict[str, Any], **meta: Any) -> dict[str, Any]:
        """Record row ``row_id``: its figures and what it is (section, group, subject, batch...)."""
        if row_id in self.rows:
            raise KeyError(f"duplicate row {row_id}")
        row = {**meta, **figures}
        self.rows[row_id] = row
        return row

    def per_round(self, numerator: str, denominator: str) -> list[float] | str:
        """Round-by-round ratios of two rows, or why there are none."""
        num, den = self.rows.get(numerator), self.rows.get(denominator)
        missing = [rid for rid, row in ((numerator, num), (denominator, den)) if row is None]
        if missing:
            return f"row {missing[0]} {NOT_MEASURED}"
        assert num is not None
        assert den is not None
        if num.get("batch") is None or num.get("batch") != den.get("batch"):
            return f"rows {numerator} and {denominator} were not measured in the same rounds"
        a, b = round_figures(num), round_figures(den)
        if a is None or b is None or len(a) != len(b):
            return f"rows {numerator} and {denominator} have no matching rounds"
        return [x / y if y else float("inf") for x, y in zip(a, b, strict=True)]

    def claim(
        self,
        claim_id: str,
        label: str,
        numerator: str,
        denominator: str,
        bound: float,
        *,
        op: str = "<=",
        section: str = "",
        floor: str | tuple[str, str] | None = None,
        per_call: bool = True,
        reason: str | None = None,
        floor_label: str | None = None,
        spread_bound: float | None = None,
    ) -> dict[str, Any]:
        """Record claim ``numerator / denominator op bound``, paired round by round.

        ``reason`` marks a claim this run cannot measure (a full-only size,
        a server not given) and says why. ``floor_label`` names the
        numerator's call for the restated claim (default: ``label``).
        ``spread_bound``: the median is held to ``bound`` and the upper
        quartile (``<=``; the lower for ``>=``) to this, a little past it.
        """
        if op not in ("<=", ">="):
            raise ValueError(f"op must be '<=' or '>=', got {op!r}")
        self.specs.append(
            {
                "claim_id": claim_id,
                "label": label,
                "numerator": numerator,
                "denominator": denominator,
                "bound": bound,
                "op": op,
                "section": section,
                "floor": floor,
                "per_call": per_call,
                "reason": reason,
                "floor_label": floor_label,
                "spread_bound": spread_bound,
            }
        )
        entry: dict[str, Any] = {
            "id": claim_id,
            "section": section or claim_id.split(".", 1)[0],
            "label": label,
            "numerator": numerator,
            "denominator": denominator,
            "op": op,
            "bound": bound,
            "per_call": per_call,
        }
        if floor_label is not None:
            entry["floor_label"] = floor_label
        if spread_bound is not None:
            entry["spread_bound"] = spread_bound
        self.claims.append(entry)
        got = self.per_round(numerator, denominator) if reason is None else reason
        if isinstance(got, str):
            entry.update(ratio=None, q1=None, q3=None, holds=None, verdict="not measured", note=got)
            single = self._single_ratio(numerator, denominator) if reason is None else None
            if single is not None:
                # Both rows exist but were timed apart: show their ratio, judge nothing.
                entry.update(ratio=round(single, 4), verdict="not paired")
                entry["note"] = got + "; give both rows one batch and per-round figures"
            return entry
        _judge(entry, got)
        floor_ratios = self._floor(floor, denominator)
        if floor_ratios is None:
            return entry
        f_ratio, f_q1, f_q3 = spread(floor_ratios)
        entry.update(floor=floor, floor_ratio=round(f_ratio, 4))
        entry.update(floor_q1=round(f_q1, 4), floor_q3=round(f_q3, 4))
        below = f_ratio > bound if op == "<=" else f_ratio < bound
        # A claim that holds although its limit is below the floor does less
        # than the floor's call (a read that skips the serializer's
        # validation): it holds, and needs no restating.
        if per_call and op == "<=" and below and not entry["holds"]:
            entry.update(holds=False, verdict="below floor")
            self._restate(entry, got, floor, floor_ratios)
        return entry

    def _single_ratio(self, numerator: str, denominator: str) -> float | None:
        """p50 (or median ops/s) of one row over the other's, when both rows exist."""
        num, den = self.rows.get(numerator), self.rows.get(denominator)
        if num is None or den is None:
            return None
        key = "p50" if "p50" in num else "median"
        a, b = num.get(key), den.get(key)
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not b:
            return None
        return float(a) / float(b)

    def _floor(self, floor: str | tuple[str, str] | None, denominator: str) -> list[float] | None:
        if floor is None:
            return None
        low, base = floor if isinstance(floor, tuple) else (floor, denominator)
        got = self.per_round(low, base)
        return None if isinstance(got, str) else got

    def _restate(
        self,
        peer: dict[str, Any],
        ratios: list[float],
        floor: str | tuple[str, str] | None,
        floor_ratios: list[float],
    ) -> None:
        """Add "within FLOOR_MARGIN of the floor" after ``peer``, whose limit is below its floor."""
        twin = next(
            (c for c in self.claims if c.get("restates") and c["numerator"] == peer["numerator"]
             and c["denominator"] == (" / ".join(floor) if isinstance(floor, tuple) else floor)),
            None,
        )  # fmt: skip
        if twin is not None:  # the same restated claim as an earlier peer's: say so, once
            peer["restated_as"] = twin["id"]
            return
        if isinstance(floor, tuple):
            # Scaling: our growth over the floor's growth, round by round.
            against = [
                r / f if f else float("inf") for r, f in zip(ratios, floor_ratios, strict=True)
            ]
            what, denominator = "growth within", " / ".join(floor)
        else:
            got = self.per_round(peer["numerator"], str(floor))
            against = got if isinstance(got, list) else []
            what, denominator = "within", str(floor)
        label = peer.get("floor_label", peer["label"])
        entry: dict[str, Any] = {
            "id": f"{peer['id']}.floor",
            "section": peer["section"],
            "label": f"{label}: {what} {FLOOR_MARGIN:g}x of the floor",
            "numerator": peer["numerator"],
            "denominator": denominator,
            "op": "<=",
            "bound": FLOOR_MARGIN,
            "per_call": True,
            "restates": peer["id"],
        }
        peer["restated_as"] = entry["id"]
        if against:
            _judge(entry, against)
        else:
            entry.update(ratio=None, q1=None, q3=None, holds=None, verdict="not measured")
            entry["note"] = f"the floor row {floor} was not measured in the same rounds"
        self.claims.append(entry)


def pooled_rows(runs: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The rows of several runs of one section as one: rounds pooled, figures their median.

    Each row's figure per round (``rounds_p50`` or ``rounds``) is the
    concatenation of every run's, in run order, so two rows of one batch stay
    paired round by round; every other number is the median of the runs'
    values (a p50 of two runs is their mean), anything else the first run's.
    """
    out: dict[str, dict[str, Any]] = {}
    for row_id, first in runs[0].items():
        mine = [run[row_id] for run in runs if row_id in run]
        merged = dict(first)
        for field, value in first.items():
            values = [row.get(field) for row in mine]
            if field in ("rounds_p50", "rounds") and all(isinstance(v, list) for v in values):
                merged[field] = [item for v in values for item in v]
            elif _number(value) and all(_number(v) for v in values):
                merged[field] = statistics.median(values)
        out[row_id] = merged
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

"""Compare two results files claim by claim: does each ratio fall within the other's spread?

    python -m benchmarks.compare A.json B.json

Prints one line per claim both files measured: each run's ratio and spread,
and whether A's ratio lies within B's spread and B's within A's. Exits 1
when any claim's two runs disagree that way (a claim that moves by more than
its own round-to-round spread between two runs on one machine).

A claim measured once per section run (the bytes a layout stores, the size
of a file after reclaim: as many rounds as the run had processes, see
``--processes``) has no spread to compare against: its two ratios agree
when they differ by at most :data:`ONE_RUN_TOLERANCE` of the larger, and
its line says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ONE_RUN_TOLERANCE = 0.05


def agree(a: dict[str, Any], b: dict[str, Any], once: bool = False) -> bool:
    """Whether each claim's ratio lies within the other's interquartile range.

    ``once``: the claim has one figure per process (see the module docstring).
    """
    if once or a.get("rounds") == 1 or b.get("rounds") == 1:
        big = max(abs(a["ratio"]), abs(b["ratio"]))
        return bool(abs(a["ratio"] - b["ratio"]) <= ONE_RUN_TOLERANCE * big)
    return bool(a["q1"] <= b["ratio"] <= a["q3"] and b["q1"] <= a["ratio"] <= b["q3"])


def compare(first: dict[str, Any], second: dict[str, Any]) -> tuple[list[str], int]:
    """Report lines and the number of claims whose two runs disagree."""
    theirs = {c["id"]: c for c in second["claims"] if c.get("ratio") is not None}
    processes = max(first.get("processes", 1), second.get("processes", 1))
    lines, apart = [], 0
    for a in first["claims"]:
        b = theirs.get(a["id"])
        if a.get("ratio") is None or b is None:
            continue
        single = min(a.get("rounds", 1), b.get("rounds", 1)) <= processes
        ok = agree(a, b, single)
        apart += not ok
        once = f" (one figure per process: within {ONE_RUN_TOLERANCE:.0%})" if single else ""
        lines.append(
            f"{'ok  ' if ok else 'MOVED'} {a['label']}: "
            f"{a['ratio']:.3g} [{a['q1']:.3g}-{a['q3']:.3g}] vs "
            f"{b['ratio']:.3g} [{b['q1']:.3g}-{b['q3']:.3g}]{once}"
        )
    return lines, apart


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    lines, apart = compare(json.loads(args.first.read_text()), json.loads(args.second.read_text()))
    print("\n".join(lines))
    print(f"{len(lines) - apart} of {len(lines)} claims agree; {apart} moved")
    return 1 if apart else 0


if __name__ == "__main__":
    raise SystemExit(main())

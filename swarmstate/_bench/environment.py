"""What a result depends on (interpreter, packages, machine, commit), and what a run used."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "environment", "footprint"]

PACKAGES = (
    "pyswarmstate",
    "ormsgpack",
    "msgpack",
    "pyrsistent",
    "apsw",
    "psycopg",
    "psycopg-pool",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "matplotlib",
    "pytest-benchmark",
    "psutil",
    "tqdm",
)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit(where: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    if out.returncode != 0 or not commit:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def environment(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a result depends on: interpreter, packages, platform, CPU, settings, commit."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
        "git_commit": _git_commit(Path(__file__).resolve().parent),
        "timestamp_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": dict(settings or {}),
    }
    if hasattr(os, "sched_getaffinity"):
        env["cpus_usable"] = len(os.sched_getaffinity(0))
    try:
        import psutil  # type: ignore[import-untyped]

        env["memory_total_mb"] = round(psutil.virtual_memory().total / 2**20)
        freq = psutil.cpu_freq()
        env["cpu_mhz"] = round(freq.current) if freq else None
    except Exception:  # psutil is optional; missing or unsupported is fine
        pass
    return env


def footprint() -> dict[str, float]:
    """RAM and CPU used so far by this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss is KiB on Linux, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    out = {
        "max_rss_mb": round(own.ru_maxrss * scale / 2**20, 1),
        "children_max_rss_mb": round(kids.ru_maxrss * scale / 2**20, 1),
        "cpu_user_s": round(own.ru_utime, 2),
        "cpu_system_s": round(own.ru_stime, 2),
        "children_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
    }
    try:
        import psutil

        out["rss_now_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    except Exception:  # psutil is optional
        pass
    return out

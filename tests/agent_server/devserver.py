"""Start and stop ``langgraph dev`` (the in-memory Agent Server) for the tests, offline.

The server runs in a directory of its own (it keeps its threads, runs and,
with its built-in checkpointer, its checkpoints in ``.langgraph_api/``
there), on a free loopback port, with every switch that keeps it off the
network: no browser (which would also look up a LangSmith organization),
no CLI analytics, no check for a newer version on the package index, no
tracing, and no LangSmith key or license key in its environment (without
them it skips its usage-metadata loop).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 120.0  # seconds; two shared cores, a cold import of the server takes a while
STOP_TIMEOUT = 60.0

OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
# Settings a developer's shell may carry that would send data out or change the server.
_DROPPED_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "OTEL_")

_URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def environment(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without LangSmith/LangGraph settings, then OFFLINE, ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    env.update(OFFLINE)
    env.update(extra)
    return env


@contextmanager
def running(directory: Path, extra_env: dict[str, str], log: Path) -> Iterator[str]:
    """Run ``langgraph dev`` in ``directory`` until the block ends; yields its base URL.

    Stopped with SIGINT, as Ctrl-C would, so that the server shuts down
    cleanly (its in-memory runtime writes its files then, and the
    checkpointer factory's context is left).
    """
    command = [
        str(Path(sys.executable).with_name("langgraph")),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    start = log.stat().st_size if log.exists() else 0  # a restart appends to the same log
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, cwd=directory, env=environment(extra_env), stdout=out, stderr=out
        )
    try:
        url = _wait_until_ready(process, log, start)
        yield url
    finally:
        _stop(process)


def _wait_until_ready(process: subprocess.Popen[bytes], log: Path, start: int) -> str:
    # The server moves to another port if the one asked for was taken meanwhile:
    # the address comes from its own welcome line.
    deadline = time.monotonic() + START_TIMEOUT
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"langgraph dev exited with {process.returncode}:\n{tail(log)}")
        if url is None:
            with log.open("rb") as text:
                text.seek(start)
                found = _URL.search(text.read().decode(errors="replace"))
            url = found and found.group(0)
        if url is not None:
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=5) as response:
                    if response.status == 200:
                        return url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
        time.sleep(0.2)
    raise RuntimeError(f"langgraph dev not ready after {START_TIMEOUT:.0f} s:\n{tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError("langgraph dev did not stop on SIGINT") from None


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

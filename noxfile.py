"""The single entry point for tests, lint, type checks and benchmarks."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"

PYTHONS = ["3.11", "3.12", "3.13"]


def install_test_tooling(session: nox.Session) -> None:
    # Dependency groups (PEP 735) need pip >= 25.1; a fresh venv may ship older.
    session.install("--upgrade", "pip>=25.1")
    session.install("--group", "test", "-e", ".")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Run the test suite (PostgreSQL tests start a throwaway server)."""
    install_test_tooling(session)
    session.run("pytest", *session.posargs)


@nox.session(python="3.11", default=False)
def langgraph_suite(session: nox.Session) -> None:
    """Run LangGraph's checkpointer tests (its sdist's) on SwarmStateSaver beside its own saver."""
    session.install("--upgrade", "pip>=25.1")
    session.install("-e", ".[langgraph,disk]")
    # The plugin and fetcher: tests/README.md says what they do and how to run one test.
    here = Path("tests/langgraph_suite").resolve()
    work = Path(session.create_tmp()) / "langgraph-sdist"
    fetched = session.run("python", here / "fetch_suite.py", work, silent=True)
    suite = str(fetched).strip().splitlines()[-1]
    # Reruns: a few of their tests assert the order of events 10 ms apart, and
    # fail now and then on a busy machine, on their own saver too.
    rerun = "pytest-rerunfailures>=14"
    session.install("-r", work / "requirements.txt", rerun, "-c", work / "constraints.txt")
    env = {"NO_DOCKER": "true", "PYTHONPATH": str(here)}  # NO_DOCKER: no PostgreSQL/Redis params
    with session.chdir(suite):
        args = ["-p", "swarmstate_checkpointers", "-n", "2", "--reruns", "2", *session.posargs]
        session.run("python", "-m", "pytest", *args, env=env)


@nox.session(python="3.11", default=False)
def agent_server(session: nox.Session) -> None:
    """Run examples/agent_server on the LangGraph Agent Server against its built-in checkpointer."""
    install_test_tooling(session)
    session.install("langgraph-cli[inmem]>=0.4", "langgraph-api>=0.16", "langgraph-sdk>=0.4")
    session.run("pytest", "tests/agent_server", "-m", "agent_server", *session.posargs)


@nox.session(python=PYTHONS, default=False)
def matrix(session: nox.Session) -> None:
    """Run the test suite on every supported Python (each python3.X must be on PATH)."""
    install_test_tooling(session)
    session.run("pytest", *session.posargs)


@nox.session(python="3.11", default=False)
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "swarmstate", "tests", "benchmarks", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "swarmstate", "tests", "benchmarks", "examples")


@nox.session(python="3.11", default=False)
def imports(session: nox.Session) -> None:
    """Check the import layers and that no module imports one that imports it (import-linter)."""
    session.install("import-linter>=2.6", "-e", ".")
    session.run("lint-imports", *session.posargs)


@nox.session(python="3.11", default=False)
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy --strict."""
    session.install("mypy>=1.10", "-e", ".[all]")
    session.run("mypy", "--strict", "swarmstate")


@nox.session(python="3.11", default=False)
def perf(session: nox.Session) -> None:
    """Run the performance regression gates (ratios against a peer in the same run)."""
    install_test_tooling(session)
    session.run("pytest", "tests/perf", "-m", "benchmark", "-p", "no:randomly", *session.posargs)


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Run the benchmark suite and regenerate results, charts and docs tables."""
    install_test_tooling(session)
    args = session.posargs or ["--quick", "--seed", "7", "--out", "benchmarks/results-quick.json"]
    session.run("python", "-m", "benchmarks.run", *args)

"""Fetch the tests of the installed LangGraph: its sdist from the package index, unpacked.

Usage: ``python fetch_suite.py FOLDER`` (run by ``nox -s langgraph_suite``).

Downloads the sdist of the ``langgraph`` version installed in this
interpreter into FOLDER, unpacks it there (once per version), and writes
beside it:

* ``requirements.txt``: the ``test`` dependency group of its
  ``pyproject.toml``, less the entries in ``NOT_FOR_THESE_TESTS``;
* ``constraints.txt``: every distribution installed now, at its installed
  version, so that installing their test dependencies never replaces
  LangGraph, its checkpoint libraries or anything else under test.

Prints the unpacked folder as the last line.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

# Tools of LangGraph's own development loop that no checkpointer test
# imports: coverage, a file watcher, profilers, and their CLI with its
# in-memory server (which pins a LangGraph of its own).
NOT_FOR_THESE_TESTS = frozenset(
    {"pytest-cov", "pytest-watcher", "py-spy", "pyperf", "uvloop", "langgraph-cli"}
)


def main(folder: Path) -> Path:
    version = importlib.metadata.version("langgraph")
    suite = folder / f"langgraph-{version}"
    if not (suite / "tests" / "conftest.py").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        sdist = folder / f"langgraph-{version}.tar.gz"
        if not sdist.is_file():
            pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            subprocess.run(
                [*pip, "--no-binary", ":all:", "--dest", str(folder), f"langgraph=={version}"],
                check=True,
            )
        with tarfile.open(sdist) as archive:
            archive.extractall(folder, filter="data")
    groups = tomllib.loads((suite / "pyproject.toml").read_text())["dependency-groups"]
    (folder / "requirements.txt").write_text("".join(f"{r}\n" for r in _group(groups, "test")))
    installed = sorted(
        f"{d.metadata['Name']}=={d.version}\n"
        for d in importlib.metadata.distributions()
        if d.metadata["Name"] and not _editable(d)
    )
    (folder / "constraints.txt").write_text("".join(installed))
    return suite


def _group(groups: dict[str, list[object]], name: str) -> list[str]:
    """The requirements of a dependency group (PEP 735), included groups too."""
    out: list[str] = []
    for entry in groups[name]:
        if isinstance(entry, dict):
            out += _group(groups, entry["include-group"])
        elif _name(str(entry)) not in NOT_FOR_THESE_TESTS:
            out.append(str(entry))
    return out


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def _editable(dist: importlib.metadata.Distribution) -> bool:
    # An editable install (this project) cannot be a constraint.
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    return bool(direct_url.get("dir_info", {}).get("editable"))


if __name__ == "__main__":
    print(main(Path(sys.argv[1]).resolve()))

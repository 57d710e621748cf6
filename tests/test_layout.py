"""The package's layout: no import circle, no LangGraph behind the core and the backends.

Also the house rules a newcomer relies on: no folder of more than twelve
modules, the database drivers imported by their backends alone, modules
imported by their own name (never a one- to three-letter alias), one class
per name in the package, and no test or benchmark editing ``sys.path``.

The layers themselves are import-linter contracts (``[tool.importlinter]`` in
``pyproject.toml``, run by ``nox -s imports``); their ``acyclic_siblings``
contract finds circles between the modules of one package. This test also
covers what that contract does not compare: a package's ``__init__`` and its
own modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp


def test_no_module_imports_a_module_that_imports_it() -> None:
    graph = grimp.build_graph("swarmstate", exclude_type_checking_imports=False, cache_dir=None)
    circles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )
    assert circles == []


def test_the_package_and_its_backends_import_no_langgraph() -> None:
    code = (
        "import sys, swarmstate, swarmstate.backends.disk, swarmstate.backends.postgres\n"
        "import swarmstate._bench\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(roots & {'langgraph', 'langchain_core'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


ROOT = Path(__file__).resolve().parent.parent
_PACKAGE = ROOT / "swarmstate"
_SAVER = _PACKAGE / "integrations" / "langgraph"  # regrouped by its own redesign


def _python_files(*folders: Path) -> list[Path]:
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[ast.Import | ast.ImportFrom, ast.alias]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield node, alias


def test_no_folder_holds_more_than_twelve_modules() -> None:
    folders = [p for p in (*_PACKAGE.rglob("*"), *(ROOT / "benchmarks").rglob("*")) if p.is_dir()]
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [*folders, _PACKAGE, ROOT / "benchmarks", ROOT / "tests"]
        if folder != _SAVER and (count := len(list(folder.glob("*.py")))) > 12
    }
    assert crowded == {}


def test_the_drivers_are_imported_only_by_their_backends() -> None:
    backends = _PACKAGE / "backends"
    outside = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _python_files(_PACKAGE)
        if backends not in path.parents
        for node, alias in _imports(path)
        if (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        in {"apsw", "psycopg", "psycopg_pool"}
    )
    assert outside == []


def test_modules_are_imported_by_their_own_name() -> None:
    short = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno} {alias.name} as {alias.asname}"
        for path in _python_files(_PACKAGE, ROOT / "tests", ROOT / "benchmarks", ROOT / "examples")
        for node, alias in _imports(path)
        if alias.asname is not None and len(alias.asname) <= 3
    )
    assert short == []


def test_no_two_classes_of_the_package_share_a_name() -> None:
    where: dict[str, list[str]] = {}
    for path in _python_files(_PACKAGE):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert {name: found for name, found in where.items() if len(found) > 1} == {}


def test_tests_and_benchmarks_do_not_edit_sys_path() -> None:
    editing = sorted(
        str(path.relative_to(ROOT))
        for path in _python_files(ROOT / "tests", ROOT / "benchmarks")
        if "sys.path" in path.read_text().replace("``sys.path``", "")
        and path != Path(__file__).resolve()
    )
    assert editing == []

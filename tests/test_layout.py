"""The package's layout: no import circle, and no LangGraph behind the core and the backends.

The layers themselves are import-linter contracts (``[tool.importlinter]`` in
``pyproject.toml``, run by ``nox -s imports``); their ``acyclic_siblings``
contract finds circles between the modules of one package. This test also
covers what that contract does not compare: a package's ``__init__`` and its
own modules.
"""

from __future__ import annotations

import subprocess
import sys

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

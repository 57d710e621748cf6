"""The public surface: exactly what is exported, sorted, and importable."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import swarmstate

EXPECTED = {
    "ABSENT",
    "PRESENT",
    "Absent",
    "BaseStore",
    "Empty",
    "Holds",
    "Present",
    "Tags",
    "Transaction",
    "WriteResult",
    "ConflictError",
    "CheckpointDeletedError",
    "FencedError",
    "ThreadDeletedError",
    "CorruptDataError",
    "DecodeError",
    "Diff",
    "Ext",
    "IncompatibleStoreError",
    "InvalidArgumentError",
    "InvalidKeyError",
    "MissingDependencyError",
    "ReadOnlyStoreError",
    "ReclaimReport",
    "Snapshot",
    "SnapshotError",
    "StorageError",
    "Store",
    "StoreClosedError",
    "SwarmStateError",
    "UnsupportedTypeError",
    "ValueOutOfRangeError",
    "dumps",
    "loads",
    "transfer",
}


def _isort(names: list[str]) -> list[str]:
    """isort-style, as ruff keeps ``__all__``: constants, then classes, then functions."""
    return sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))


def test_all_is_sorted_and_exact() -> None:
    assert swarmstate.__all__ == _isort(swarmstate.__all__)
    assert set(swarmstate.__all__) == EXPECTED
    for name in swarmstate.__all__:
        assert hasattr(swarmstate, name)


def test_every_error_derives_from_the_root_and_a_builtin() -> None:
    builtins = (TypeError, ValueError, RuntimeError, ImportError, OSError)
    for name in swarmstate.__all__:
        obj = getattr(swarmstate, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, swarmstate.SwarmStateError)
            assert obj is swarmstate.SwarmStateError or issubclass(obj, builtins), name


def test_documented_import_paths() -> None:
    disk = importlib.import_module("swarmstate.backends.disk")
    postgres = importlib.import_module("swarmstate.backends.postgres")
    langgraph = importlib.import_module("swarmstate.integrations.langgraph")
    assert issubclass(disk.DiskStore, swarmstate.BaseStore)
    assert issubclass(postgres.PostgresStore, swarmstate.BaseStore)
    assert langgraph.SwarmStateSaver.__name__ == "SwarmStateSaver"


def test_the_langgraph_module_exports_exactly_its_surface() -> None:
    langgraph = importlib.import_module("swarmstate.integrations.langgraph")
    assert langgraph.__all__ == sorted(langgraph.__all__)
    assert set(langgraph.__all__) == {
        "Retention",
        "RetentionReport",
        "SwarmStateSaver",
        "ThreadActivity",
        "strict_serializer",
    }
    for name in langgraph.__all__:
        assert hasattr(langgraph, name)


def test_package_is_typed() -> None:
    from importlib.resources import files

    assert files("swarmstate").joinpath("py.typed").is_file()


def _imported_from(module: str) -> set[str]:
    """Every name any module of the package imports from ``module``."""
    import ast
    from importlib.resources import files

    names: set[str] = set()
    root = files("swarmstate")
    for path in Path(str(root)).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("name", ["_base", "_checks"])
def test_the_contract_modules_export_what_they_define_sorted(name: str) -> None:
    import ast

    module = importlib.import_module(f"swarmstate.{name}")
    exported = module.__all__
    # isort-style, as ruff keeps it: constants, then classes, then functions.
    order = _isort(exported)
    assert exported == order
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    defined = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    assert set(exported) == {n for n in defined if not n.startswith("_")}
    assert _imported_from(f"swarmstate.{name}") <= set(exported)


def test_docs_exceptions_has_a_row_for_every_exported_error() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "exceptions.md").read_text()
    rows = {line.split("`")[1] for line in doc.splitlines() if line.startswith("| `")}
    errors = {
        name for name in swarmstate.__all__ if name.endswith("Error") and name != "SwarmStateError"
    }
    assert errors <= rows, f"docs/exceptions.md lacks {sorted(errors - rows)}"

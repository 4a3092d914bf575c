"""The controller core is pure: no asyncio, sockets, kazoo, files or clock anywhere in
what its modules import (followed through strandline's own modules), and no open()."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

CORE_MODULES = [
    "strandline.controller.context",
    "strandline.controller.decisions",
    "strandline.controller.reassignment",
    "strandline.controller.effects",
    "strandline.controller.procedures",
    "strandline.replication.controller_fencing",
]
FORBIDDEN = {
    "asyncio",
    "socket",
    "ssl",
    "selectors",
    "kazoo",
    "os",
    "pathlib",
    "io",
    "shutil",
    "tempfile",
    "time",
    "datetime",
    "threading",
    "subprocess",
    "random",
}


def _source(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin)


def _imports(module: str) -> set[str]:
    tree = ast.parse(_source(module).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
            # `from strandline.controller import effects` names a module too.
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(node.module) and _is_module(candidate):
                    found.add(candidate)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _closure(start: str) -> dict[str, str]:
    """Every module reachable from `start` through strandline's own imports -> who
    imported it first (for the error message)."""
    seen: dict[str, str] = {start: "(root)"}
    todo = [start]
    while todo:
        module = todo.pop()
        for imported in _imports(module):
            if imported in seen:
                continue
            seen[imported] = module
            if imported.startswith("strandline."):
                todo.append(imported)
    return seen


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_nothing_impure(module: str) -> None:
    reached = _closure(module)
    impure = {
        name: importer for name, importer in reached.items() if name.split(".")[0] in FORBIDDEN
    }
    assert not impure, f"{module} reaches {impure} (module -> imported by)"


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_opens_no_file(module: str) -> None:
    for name in [m for m in _closure(module) if m.startswith("strandline.")]:
        tree = ast.parse(_source(name).read_text())
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "open"
        ]
        assert not calls, f"{name} (reached from {module}) calls open()"


def test_the_check_sees_an_impure_module() -> None:
    # The shell imports asyncio and kazoo (through ZkClient): the check must say so.
    reached = _closure("strandline.controller.controller")
    assert "asyncio" in reached and "kazoo" in {n.split(".")[0] for n in reached}

"""The package cycles protocol -> controller -> server are gone. The imports of
every module are read with `ast`, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import strandline

ROOT = Path(strandline.__file__).parent


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules.add(node.module)
            # `from strandline import controller` names the package in the alias.
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def offenders(package: str, forbidden: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = sorted(
            m for m in imported_modules(path) if m == forbidden or m.startswith(forbidden + ".")
        )
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


def test_the_checker_sees_imports() -> None:
    # The check would pass vacuously if it read nothing: the controller does import
    # the protocol package, and the server imports the controller.
    assert offenders("controller", "strandline.protocol")
    assert offenders("server", "strandline.controller")


def test_protocol_does_not_import_the_controller() -> None:
    assert offenders("protocol", "strandline.controller") == {}


def test_controller_does_not_import_the_server() -> None:
    assert offenders("controller", "strandline.server") == {}

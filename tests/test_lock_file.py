"""requirements.lock is what `make setup` installs: it must pin every package the
project asks for at pyproject.toml's version, and this environment must be exactly it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
# Installed by the venv itself or as the project; never in a lock.
NOT_LOCKED = {"pip", "setuptools", "wheel", "strandline"}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[_name(name)] = version.strip()
    return pins


def test_lock_pins_what_pyproject_asks_for() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    lock = _lock()
    for text in wanted:
        req = Requirement(text)
        assert _name(req.name) in lock, f"{req.name} is in pyproject.toml, not in the lock"
        assert req.specifier.contains(lock[_name(req.name)]), (
            f"pyproject.toml asks {text}, the lock pins {lock[_name(req.name)]}: run make lock"
        )


def test_environment_is_the_lock() -> None:
    lock = _lock()
    installed = {
        _name(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions()
        if _name(d.metadata["Name"]) not in NOT_LOCKED
    }
    assert installed == lock, {
        "installed, not locked": sorted(set(installed) - set(lock)),
        "locked, not installed": sorted(set(lock) - set(installed)),
        "other version": sorted(n for n in set(lock) & set(installed) if lock[n] != installed[n]),
    }

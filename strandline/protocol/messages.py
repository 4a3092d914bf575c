"""Version-aware construction of kio messages.

kio has one generated class per (API, version, message). Handlers build responses by
field name; `build` keeps the fields the chosen version has, so one handler serves
every version it advertises.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """Instantiate `cls` with the subset of `values` it has fields for."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def response_class(api_key: int, version: int, name: str) -> type:
    """A nested or top-level response class of one version, by its kio name."""
    cls: type = getattr(response_module(api_key, version), name)
    return cls

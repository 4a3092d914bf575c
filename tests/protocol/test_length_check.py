"""The length check walks every advertised request exactly as kio lays it out, and turns
a count that claims more bytes than the request holds into a ProtocolError (kio's native
reader would abort the broker process on it)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

import strandline.server.apis  # noqa: F401  (registers every handler)
from strandline.protocol.codec import request_type
from strandline.protocol.framing import ProtocolError
from strandline.protocol.length_check import check_lengths
from strandline.server.apis.registry import REGISTRY

ADVERTISED = sorted(
    (spec.api_key, version)
    for spec in REGISTRY.values()
    for version in range(spec.min_version, spec.max_version + 1)
)

_UTC = datetime.UTC
_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "bool": st.booleans(),
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "error_code": st.sampled_from(list(ErrorCode)),
    "uuid": st.uuids(),
    "timedelta_i32": st.integers(0, 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms)),
    "timedelta_i64": st.integers(0, 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms)),
    "datetime_i64": st.integers(0, 2**40).map(
        lambda ms: datetime.datetime.fromtimestamp(ms / 1000, _UTC)
    ),
    "string": st.text(max_size=4),
    "bytes": st.binary(max_size=4),
    "records": st.binary(max_size=4),
}


@functools.cache
def entities(cls: type[Any], depth: int = 0) -> st.SearchStrategy[Any]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            inner = entities(kind.type_, depth + 1)
            value = st.lists(inner, max_size=2 if depth < 2 else 0).map(tuple)
        elif isinstance(kind, EntityField):
            value = entities(kind.type_, depth + 1)
        else:
            primitive = _PRIMITIVES[get_schema_field_type(field)]
            is_array = isinstance(kind, PrimitiveTupleField)
            value = st.lists(primitive, max_size=3).map(tuple) if is_array else primitive
        if is_optional(field) and (get_field_tag(field) is None or field.default is None):
            value = st.none() | value
        fields[field.name] = value
    return st.builds(cls, **fields)


def encode(cls: type[Any], request: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    return out.getvalue()


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_walk_ends_where_kio_ends(api_key: int, version: int, data: st.DataObject) -> None:
    cls = request_type(api_key, version)
    body = encode(cls, data.draw(entities(cls)))
    assert check_lengths(cls, body, 0) == len(body)
    assert check_lengths(cls, b"pad" + body, 3) == len(body) + 3


HUGE_LENGTHS = (
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x08",
    b"\x7f\xff\xff\xff",
    b"\x10\x00\x00\x00",
)


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_length_past_the_end_never_reaches_kio(
    api_key: int, version: int, data: st.DataObject
) -> None:
    """A valid body cut anywhere and followed by an absurd length (compact or legacy) is
    either refused by the check or, having passed it, read by kio without bringing the
    process down (kio's native reader aborts on an unchecked ~2^32 count: were the check
    to let one through, this test process would die)."""
    cls = request_type(api_key, version)
    body = encode(cls, data.draw(entities(cls)))
    cut = data.draw(st.integers(0, len(body)))
    frame = body[:cut] + data.draw(st.sampled_from(HUGE_LENGTHS))
    try:
        end = check_lengths(cls, frame, 0)
    except ProtocolError:
        return
    assert end <= len(frame)
    try:
        entity_reader(cls)(frame, 0)
    except Exception:  # kio's own errors for malformed input are fine; an abort is not
        pass

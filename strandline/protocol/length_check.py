"""Every length in a request checked against the bytes that follow it, before kio reads it.

kio's native reader trusts an array count: a compact array claiming ~2^32 elements makes
it reserve that many slots, and the failed allocation aborts the whole broker process (no
Python exception to catch). This walk follows the same schema kio decodes with, reads
only lengths and counts, and refuses any that claims more bytes than the request has
left. Produce and Fetch never come here: their own decoders (`produce_codec`,
`fetch_codec`) bound every length as they read.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, cast

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from strandline.protocol.framing import ProtocolError
from strandline.protocol.primitives import I16, I32, MALFORMED, read_uvarint, skip_tags

_FIXED_WIDTH = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "datetime_i64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_VARIABLE = {"string", "bytes", "records"}

# One step of a walk: (kind, argument). Kinds: fixed width, variable-length bytes,
# an array of fixed width elements, of variable ones, of entities, a nested entity
# (optionally behind a null marker).
_Step = tuple[str, Any]


@cache
def _steps(entity: type[Any]) -> tuple[_Step, ...]:
    steps: list[_Step] = []
    for field in dataclasses.fields(entity):
        if get_field_tag(field) is not None:
            continue  # tagged fields live in the tagged-field section, skipped whole
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            steps.append(("entities", kind.type_))
        elif isinstance(kind, EntityField):
            steps.append(("nullable-entity" if is_optional(field) else "entity", kind.type_))
        else:
            kafka_type = get_schema_field_type(field)
            is_array = isinstance(kind, PrimitiveTupleField)
            if kafka_type in _FIXED_WIDTH:
                width = _FIXED_WIDTH[kafka_type]
                steps.append(("fixed-array" if is_array else "fixed", width))
            elif kafka_type in _VARIABLE:
                steps.append(("variable-array" if is_array else "variable", kafka_type))
            else:
                raise TypeError(f"{entity.__name__}.{field.name}: unknown type {kafka_type}")
    return tuple(steps)


class _Walk:
    def __init__(self, buf: bytes, flexible: bool) -> None:
        self.buf = buf
        self.end = len(buf)
        self.flexible = flexible

    def _claim(self, pos: int, size: int, what: str) -> int:
        if size > self.end - pos:
            raise ProtocolError(
                f"{what} claims {size} bytes at position {pos}, "
                f"but only {self.end - pos} remain in the request"
            )
        return pos + size

    def _length(self, pos: int, legacy: Any) -> tuple[int, int]:
        """(length, position after it); -1 for null."""
        if self.flexible:
            value, pos = read_uvarint(self.buf, pos)
            return value - 1, pos
        return legacy.unpack_from(self.buf, pos)[0], pos + legacy.size

    def _count(self, pos: int, per_element: int, what: str) -> tuple[int, int]:
        count, pos = self._length(pos, I32)
        if count > 0:
            self._claim(pos, count * per_element, f"{what} of {count} elements")
        return max(count, 0), pos

    def _variable(self, pos: int, kafka_type: str) -> int:
        length, pos = self._length(pos, I16 if kafka_type == "string" else I32)
        return self._claim(pos, length, kafka_type) if length > 0 else pos

    def entity(self, entity: type[Any], pos: int) -> int:
        for kind, arg in _steps(cast(Any, entity)):
            if kind == "fixed":
                pos = self._claim(pos, arg, "a field")
            elif kind == "variable":
                pos = self._variable(pos, arg)
            elif kind == "fixed-array":
                count, pos = self._count(pos, arg, "an array")
                pos += count * arg
            elif kind == "variable-array":
                count, pos = self._count(pos, 1, "an array")
                for _ in range(count):
                    pos = self._variable(pos, arg)
            elif kind == "entities":
                count, pos = self._count(pos, 1, f"an array of {arg.__name__}")
                for _ in range(count):
                    pos = self.entity(arg, pos)
            elif kind == "nullable-entity":
                marker = self.buf[pos]
                pos += 1
                if marker != 0xFF:
                    pos = self.entity(arg, pos)
            else:
                pos = self.entity(arg, pos)
        if self.flexible:
            pos = skip_tags(self.buf, pos)
        return pos


def check_lengths(entity: type[Any], buf: bytes, pos: int) -> int:
    """Where `entity`'s body starting at `pos` ends; ProtocolError if any length or count
    in it claims more bytes than `buf` holds."""
    try:
        return _Walk(buf, bool(entity.__flexible__)).entity(entity, pos)
    except ProtocolError:
        raise
    except MALFORMED as e:
        raise ProtocolError(f"{entity.__name__} ends early: {e}") from e

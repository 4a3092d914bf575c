"""The values of `strandline groups`' flags, read as kafka-consumer-groups.sh reads them:
--topic's partitions, --by-duration's ISO-8601 duration, --from-file's CSV. A value that
cannot be read is a GroupToolError naming the flag."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from pathlib import Path

from strandline.client.groups import GroupToolError
from strandline.types import TopicPartition

_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> datetime.timedelta:
    """--by-duration as Kafka reads it: ISO-8601 PnDTnHnMnS, e.g. PT1H30M or P1D."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groupdict().values()):
        raise GroupToolError(f"--by-duration {text!r}: expected PnDTnHnMnS, e.g. PT30M or P1DT2H")
    parts = {k: float(v or 0) for k, v in match.groupdict().items()}
    return datetime.timedelta(
        days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"]
    )


def parse_offsets_csv(path: Path, text: str) -> dict[str, dict[TopicPartition, int]]:
    """--from-file (what --export wrote): `topic,partition,offset` lines for one group, or
    `group,topic,partition,offset` for several; group "" is the one of the first kind."""
    out: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3:
                group, (topic, partition, offset) = "", cells
            elif len(cells) == 4:
                group, topic, partition, offset = cells
            else:
                raise ValueError(f"{len(cells)} fields")
            out.setdefault(group, {})[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError as e:
            raise GroupToolError(
                f"--from-file {path}: line {number} is not topic,partition,offset ({e})"
            ) from e
    if not out:
        raise GroupToolError(f"--from-file {path}: no offsets in it")
    return out


def parse_topic_partitions(values: Iterable[str]) -> dict[str, list[int] | None]:
    """Kafka's --topic values: `t` (every partition) or `t:0,2`."""
    out: dict[str, list[int] | None] = {}
    for value in values:
        topic, sep, spec = value.partition(":")
        try:
            partitions = sorted({int(p) for p in spec.split(",")}) if sep else None
        except ValueError:
            partitions = []
        if not topic or partitions == [] or any(p < 0 for p in partitions or ()):
            raise GroupToolError(
                f"--topic expects TOPIC or TOPIC:PARTITION,PARTITION, got {value!r}"
            )
        previous = out.get(topic, [])
        merged = None if previous is None or partitions is None else {*previous, *partitions}
        out[topic] = None if merged is None else sorted(merged)
    return out

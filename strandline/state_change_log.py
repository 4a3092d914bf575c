"""`state-change.log`: every leadership/ISR decision and controller request, as Kafka keeps it.

One JSON object per line (timestamp, broker, event, topic/partition, details) so that
`merge-state-logs` and people can both read it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strandline.types import TopicPartition


class StateChangeLog:
    def __init__(self, path: Path | None, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._file = None
        # Told each event's name (the broker's metrics count some of them).
        self.listeners: list[Callable[[str], None]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", buffering=1, encoding="utf-8")

    def record(self, event: str, tp: TopicPartition | None = None, **details: Any) -> None:
        now = time.time()  # one clock read for both parts of the timestamp
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            + f".{int(now * 1000) % 1000:03d}Z",
            "broker": self.broker_id,
            "event": event,
        }
        if tp is not None:
            entry["topic"] = tp.topic
            entry["partition"] = tp.partition
        entry.update(details)
        for listener in self.listeners:
            listener(event)
        if self._file is not None:
            with self._lock:
                self._file.write(json.dumps(entry, default=str) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

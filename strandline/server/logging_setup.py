"""Structured logs: one `key=value` line per event, to stderr and `server.log`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


class KeyValueFormatter(logging.Formatter):
    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self.broker_id = broker_id

    def format(self, record: logging.LogRecord) -> str:
        ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}"
        message = record.getMessage().replace('"', "'")
        line = (
            f"ts={ts} level={record.levelname} broker={self.broker_id} "
            f'logger={record.name} msg="{message}"'
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(logs_dir: Path, broker_id: int, level: int = logging.INFO) -> None:
    logs_dir.mkdir(parents=True, exist_ok=True)
    formatter = KeyValueFormatter(broker_id)
    handlers: list[logging.Handler] = [
        logging.StreamHandler(sys.stderr),
        logging.FileHandler(logs_dir / "server.log"),
    ]
    root = logging.getLogger()
    root.handlers.clear()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level)
    # kazoo is chatty at INFO about every reconnect attempt.
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    logging.getLogger("strandline.server.replica_fetcher").setLevel(logging.DEBUG)

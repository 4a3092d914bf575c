"""replica_verify's reading of who wrote which batches, from a real log's segment files."""

from __future__ import annotations

import os
from pathlib import Path

from strandline.storage.config import LogConfig
from strandline.storage.log import Log
from strandline.storage.replica_verify import producer_batches
from strandline.types import TopicPartition

from .batches import build_batch

TP = TopicPartition("chaos", 2)


def test_producer_batches_names_the_writer_of_each_idempotent_batch(tmp_path: Path) -> None:
    log = Log.open(
        tmp_path / TP.dir_name,
        TP,
        LogConfig(),
        recovery_point=0,
        log_start_offset=0,
        now_ms=0,
        clean_shutdown=False,
        writer=os.pwrite,
    )
    try:
        values = [b"p0-0001058", b"p0-0001061", b"p0-0001064"]
        # As in chaos seed 29177: a batch as first written under epoch 0, a plain
        # producer's record, then the same records again after the client bumped its
        # epoch and renumbered them from 0. The log accepts both: a new epoch starts at
        # sequence 0, and duplicates are only matched within one epoch.
        log.append_as_leader(
            build_batch(values, producer_id=1000, producer_epoch=0, base_sequence=0), 0, 0
        )
        log.append_as_leader(build_batch([b"p2-0001058"]), 0, 0)
        log.append_as_leader(
            build_batch(values, producer_id=1000, producer_epoch=1, base_sequence=0), 0, 0
        )
        assert log.log_end_offset == 7
        directory = tmp_path / TP.dir_name
        assert producer_batches(directory, 7) == [
            (0, 2, 1000, 0, 0),
            (4, 6, 1000, 1, 0),
        ]
        # Only batches that end below the bound (the HW) are named.
        assert producer_batches(directory, 6) == [(0, 2, 1000, 0, 0)]
    finally:
        log.close()

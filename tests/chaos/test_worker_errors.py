"""A schedule that fails in a pool process must say why in the parent: librdkafka's
KafkaException pickles but does not unpickle there (its module is `cimpl`), which turned
three schedules' real errors into "PicklingError" in a long run."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from strandline.chaos import runner
from strandline.chaos.runner import ChaosConfig


def test_a_worker_error_reaches_the_parent_with_its_text(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def failing(config: ChaosConfig) -> runner.ScheduleResult:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "final read: broker down"))

    monkeypatch.setattr(runner, "run_schedule", failing)
    with pytest.raises(RuntimeError) as raised:
        runner.run_schedule_in_worker(ChaosConfig(seed=1, out_dir=tmp_path))
    error = pickle.loads(pickle.dumps(raised.value))
    assert "final read: broker down" in str(error)
    assert "Traceback" in str(error)  # where it was raised, for the run's report

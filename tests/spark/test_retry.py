"""The driver's offset queries retry while leadership moves, and only then."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from strandline.spark import offset_reader
from strandline.spark.offset_reader import retry_transient


class Flaky:
    """Fails with `code` for the first `failures` calls, then answers."""

    def __init__(self, code: int, failures: int) -> None:
        self.code = code
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code))
        return "answer"


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offset_reader, "RETRY_BACKOFF_S", 0.0)


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,
    ],
)
def test_leadership_moving_errors_are_retried_until_an_answer(code: int) -> None:
    call = Flaky(code, failures=3)
    assert retry_transient(call) == "answer"
    assert call.calls == 4


def test_a_permanent_error_is_raised_at_once() -> None:
    call = Flaky(KafkaError.TOPIC_AUTHORIZATION_FAILED, failures=1)
    with pytest.raises(KafkaException) as err:
        retry_transient(call)
    assert err.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert call.calls == 1


def test_transient_errors_give_up_at_the_deadline() -> None:
    call = Flaky(KafkaError.NOT_LEADER_FOR_PARTITION, failures=10**9)
    with pytest.raises(KafkaException) as err:
        retry_transient(call, deadline_s=0.05)
    assert err.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert call.calls > 1

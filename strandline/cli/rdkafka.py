"""confluent-kafka clients for the tools, quiet and honest about why they fail.

librdkafka prints its own `%3|…|FAIL|` lines to stderr and retries a dead or refusing
cluster until the caller's timeout: an operator sees hundreds of lines and then
"Broker transport failure". Here its log lines go to the `strandline.librdkafka` logger
(shown with `strandline --verbose`), its error callbacks are kept, and a wait on the
cluster gives up at once when librdkafka says every broker is down or authentication
failed, naming that root cause in one line.
"""

from __future__ import annotations

import logging
import sys
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

LOG = logging.getLogger("strandline.librdkafka")
# Without a handler Python's last-resort handler would print librdkafka's errors anyway.
LOG.addHandler(logging.NullHandler())
LOG.propagate = False

POLL_S = 0.05


class ClientError(RuntimeError):
    """One line for the user: what failed and why."""


def set_verbose(verbose: bool) -> None:
    """--verbose: librdkafka's log lines (and our own debug lines) on stderr."""
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)


def cause(detail: str) -> str:
    """The root cause in librdkafka's wording, said plainly."""
    text = detail.lower()
    if "connection refused" in text:
        return "connection refused"
    if "failed to resolve" in text or "name or service not known" in text:
        return "unknown host"
    if "authentication failed" in text or "invalid username or password" in text:
        return "authentication failed: invalid credentials"
    if "ssl handshake failed" in text or "certificate verify failed" in text:
        return "TLS handshake failed"
    if "disconnected" in text and "sasl" in text:
        return "the broker closed the connection during SASL (wrong sasl.mechanism?)"
    if "timed out" in text:
        return "connection timed out"
    return detail


class Pollable(Protocol):
    def poll(self, timeout: float) -> Any: ...


class Watch:
    """One client's error callback and logger; `wait` fails fast with the root cause."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.errors: list[KafkaError] = []
        self.fatal: KafkaError | None = None

    def config(self, config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "logger": LOG, "error_cb": self._on_error}

    def _on_error(self, error: KafkaError) -> None:
        LOG.debug("error callback: %s", error.str())
        self.errors.append(error)
        if error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION) or (
            error.fatal()
        ):
            self.fatal = self.fatal or error

    def reason(self) -> str | None:
        """Why the cluster cannot be used, from what librdkafka reported; None if it
        reported nothing that says so."""
        for error in self.errors:
            if error.code() == KafkaError._AUTHENTICATION:
                return cause(error.str())
        for error in reversed(self.errors):
            if error.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._SSL):
                return f"cannot reach {self.bootstrap}: {cause(error.str())}"
        if self.fatal is not None:
            return f"cannot reach {self.bootstrap}: {cause(self.fatal.str())}"
        return None

    def check(self, client: Pollable) -> None:
        client.poll(0)
        if self.fatal is not None:
            raise ClientError(self.reason() or self.fatal.str())

    def wait(self, client: Pollable, future: Future[Any], timeout_s: float) -> Any:
        """future.result(), serving the client's callbacks meanwhile; a dead cluster or
        refused credentials end the wait at once."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check(client)
            try:
                return future.result(POLL_S)
            except FutureTimeout:
                if time.monotonic() > deadline:
                    raise ClientError(
                        self.reason() or f"no answer from {self.bootstrap} within {timeout_s:g} s"
                    ) from None

    def call(self, client: Pollable, blocking: Any, timeout_s: float) -> Any:
        """A blocking librdkafka call such as list_topics(timeout=…), retried in short
        slices so that a dead cluster is reported as soon as librdkafka knows."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check(client)
            try:
                return blocking(min(0.5, max(0.05, deadline - time.monotonic())))
            except KafkaException as e:
                error = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                transient = error is not None and error.code() in (
                    KafkaError._TRANSPORT,
                    KafkaError._TIMED_OUT,
                    KafkaError._ALL_BROKERS_DOWN,
                )
                if not transient:
                    raise
                self.check(client)
                if time.monotonic() > deadline:
                    raise ClientError(
                        self.reason() or f"no answer from {self.bootstrap} within {timeout_s:g} s"
                    ) from None


def create(factory: Any, config: dict[str, Any], given: str = "client settings") -> Any:
    """factory(config), a bad setting reported in one line naming what was given."""
    try:
        return factory(config)
    except KafkaException as e:
        error = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
        detail = error.str() if error is not None else str(e)
        raise ClientError(f"invalid {given}: {detail}") from None
    except (TypeError, ValueError) as e:
        raise ClientError(f"invalid {given}: {e}") from None

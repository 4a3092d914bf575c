"""Errors raised by the ZooKeeper layer."""

from __future__ import annotations

import enum

from kazoo.exceptions import BadVersionError, NoNodeError, SessionExpiredError
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError, TopicExistsError

__all__ = [
    "BrokerIdInUseError",
    "ZkFailure",
    "ControllerMovedError",
    "TopicExistsError",
    "ZkVersionConflictError",
    "classify_zk_failure",
]


class ZkFailure(enum.Enum):
    """A ZooKeeper call's failure, as a shell sends it back to a sans-I/O core
    (`replication/isr_update.py`)."""

    BAD_VERSION = "BADVERSION"
    CONNECTION_LOSS = "CONNECTIONLOSS"  # the request may or may not have been applied
    NO_NODE = "NONODE"
    SESSION_EXPIRED = "SESSIONEXPIRED"


class BrokerIdInUseError(KafkaError):
    """Another live ZooKeeper session holds /brokers/ids/<id>."""

    code = ErrorCode.inconsistent_cluster_id


class ZkVersionConflictError(BadVersionError):
    """A conditional write lost: the znode's zkVersion (or existence) was not what we expected.

    Subclasses kazoo's BadVersionError so callers may catch either.
    """

    def __init__(self, path: str, expected_version: int | None, detail: str = "") -> None:
        self.path = path
        self.expected_version = expected_version
        message = f"conditional write to {path} failed (expected zkVersion {expected_version})"
        super().__init__(f"{message}: {detail}" if detail else message)


class ControllerMovedError(KafkaError):
    """A controller write was fenced: /controller_epoch changed under us."""

    code = ErrorCode.not_controller


def classify_zk_failure(exc: Exception) -> ZkFailure:
    """A kazoo failure as the ISR update core sees it. Anything not known to have left
    ZooKeeper untouched counts as ConnectionLoss (the request may have been applied)."""
    if isinstance(exc, BadVersionError):
        return ZkFailure.BAD_VERSION
    if isinstance(exc, NoNodeError):
        return ZkFailure.NO_NODE
    if isinstance(exc, SessionExpiredError):
        return ZkFailure.SESSION_EXPIRED
    return ZkFailure.CONNECTION_LOSS

"""Errors raised by the ZooKeeper layer."""

from __future__ import annotations

from kazoo.exceptions import BadVersionError
from kio.schema.errors import ErrorCode

from strandline.errors import KafkaError, TopicExistsError

__all__ = [
    "BrokerIdInUseError",
    "ControllerMovedError",
    "TopicExistsError",
    "ZkVersionConflictError",
]


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

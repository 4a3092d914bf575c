"""ZooKeeper writes as data, for a multi-op fenced by the controller epoch.

Every write a controller makes must fail once another controller has been elected
(Kafka: each write is a multi-op with a check of /controller_epoch's zkVersion).
`zk_effects` builds the writes; `ZkClient.fenced_multi` (kazoo) and
`SimZkClient.fenced_multi` (the simulator) commit them with the check in front.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CreateWrite:
    path: str
    data: bytes


@dataclass(frozen=True)
class SetWrite:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteWrite:
    path: str
    version: int = -1


ZkWrite = CreateWrite | SetWrite | DeleteWrite

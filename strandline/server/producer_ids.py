"""Producer ids for InitProducerId, claimed in blocks from ZooKeeper (Kafka's ZK-era
ProducerIdManager).

Each broker claims a block of ids by a conditional write of `/latest_producer_id_block`
(zkVersion check; on conflict it rereads the newer block and tries again), then hands out
ids from it locally. Ids are unique across the cluster and never reused, even across
restarts: an unused rest of a block is simply skipped.
"""

from __future__ import annotations

import asyncio
import logging

from strandline.coordination.zk_client import ZkClient
from strandline.storage.producer_state import ProducerIdAllocator, ProducerIdBlock

log = logging.getLogger(__name__)


class ProducerIdManager:
    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._allocator = ProducerIdAllocator()
        # One block claim at a time; concurrent requests wait for it instead of racing.
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        async with self._lock:
            producer_id = self._allocator.allocate()
            if producer_id is None:
                block = await asyncio.to_thread(self.claim_block)
                self._allocator.install(block)
                producer_id = self._allocator.allocate()
                assert producer_id is not None  # a fresh block is never empty
            return producer_id

    def claim_block(self) -> ProducerIdBlock:
        """Blocking: claim the block after the latest one in ZooKeeper."""
        block = self._zk.allocate_producer_id_block(self._broker_id)
        log.info(
            "broker %d claimed producer id block [%d, %d]",
            self._broker_id,
            block.first_id,
            block.last_id,
        )
        return block

"""One module per Kafka API; `REGISTRY` is what ApiVersions advertises and dispatch uses."""

from __future__ import annotations

from strandline.server.apis import (
    acls,
    admin_elect,
    api_versions,
    configs,
    controller_apis,
    delete_records,
    describe_cluster,
    describe_producers,
    fetch,
    groups,
    init_producer_id,
    list_offsets,
    log_dirs,
    metadata,
    offset_for_leader_epoch,
    produce,
    reassignments,
    sasl,
    scram_credentials,
    topics,
    transactions,
    txn_offset_commit,
    write_txn_markers,
)
from strandline.server.apis.registry import REGISTRY, ApiSpec

# Importing the modules registers their handlers.
__all__ = [
    "REGISTRY",
    "ApiSpec",
    "acls",
    "admin_elect",
    "api_versions",
    "configs",
    "controller_apis",
    "delete_records",
    "describe_producers",
    "describe_cluster",
    "fetch",
    "groups",
    "init_producer_id",
    "list_offsets",
    "log_dirs",
    "metadata",
    "offset_for_leader_epoch",
    "produce",
    "reassignments",
    "sasl",
    "scram_credentials",
    "topics",
    "transactions",
    "txn_offset_commit",
    "write_txn_markers",
]

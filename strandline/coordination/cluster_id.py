"""/cluster/id: the cluster's identity, created by the first broker that starts (as Kafka does)."""

from __future__ import annotations

import base64
import json
import uuid

from kazoo.exceptions import NodeExistsError

from strandline.coordination.zk_client import ZkClient

CLUSTER_ID_PATH = "/cluster/id"


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def get_or_create_cluster_id(zk: ZkClient) -> str:
    kazoo = zk.kazoo
    if not kazoo.exists(CLUSTER_ID_PATH):
        try:
            data = json.dumps({"version": "1", "id": new_cluster_id()}).encode()
            kazoo.create(CLUSTER_ID_PATH, data, makepath=True)
        except NodeExistsError:
            pass  # another broker won the race; read its id
    data, _ = kazoo.get(CLUSTER_ID_PATH)
    return str(json.loads(data)["id"])

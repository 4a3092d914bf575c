"""Kafka's ZooKeeper layout: znode paths and their JSON codecs.

Pure: no ZooKeeper access and no clock reads (timestamps are passed in). Every
encoder writes the exact JSON shape Kafka writes, and every decoder accepts what
Kafka's ZooKeeper writers write, ignoring fields it does not know.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_plus

from strandline.topic_ids import topic_id_from_str, topic_id_to_str
from strandline.types import TopicPartition

# Persistent parents Kafka creates at start-up (KafkaZkClient.createTopLevelPaths).
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
ADMIN_PATH = "/admin"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
DELETE_TOPICS_PATH = "/admin/delete_topics"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
CONFIG_USERS_PATH = "/config/users"
# The keys of a user's config znode that hold SCRAM credentials (the rest are quotas).
SCRAM_CONFIG_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# The entity name of the cluster-wide broker defaults (Kafka's ConfigEntityName.Default).
BROKER_CONFIG_DEFAULT = "<default>"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    DELETE_TOPICS_PATH,
    CONFIG_TOPICS_PATH,
    CONFIG_BROKERS_PATH,
    CONFIG_CHANGES_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{topic_partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def broker_config_path(entity: str) -> str:
    """`entity` is a broker id or BROKER_CONFIG_DEFAULT."""
    return f"{CONFIG_BROKERS_PATH}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def _dumps(obj: Any) -> bytes:
    # Compact, like Kafka's Json.encodeAsBytes.
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


# --- /brokers/ids/<id> -------------------------------------------------------------

BROKER_REGISTRATION_VERSION = 4  # v4 adds rack, as Kafka 2.x+ writes it


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker's znode. `epoch` is the znode's czxid (KIP-380), not in the JSON."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[str, ...] = ()
    timestamp_ms: int = 0
    jmx_port: int = -1
    epoch: int = -1
    # listener name -> security protocol (listener_security_protocol_map).
    security_protocols: tuple[tuple[str, str], ...] = ()

    @property
    def listener_endpoints(self) -> tuple[str, ...]:
        return self.endpoints or (f"PLAINTEXT://{self.host}:{self.port}",)

    def parsed_endpoints(self) -> tuple[tuple[str, str, int, str], ...]:
        """(listener, host, port, security protocol) for each advertised listener."""
        protocols = dict(self.security_protocols)
        parsed = []
        for endpoint in self.listener_endpoints:
            name, _, host_port = endpoint.partition("://")
            host, _, port = host_port.rpartition(":")
            parsed.append((name, host.strip("[]"), int(port), protocols.get(name, name)))
        return tuple(parsed)


def encode_broker_registration(reg: BrokerRegistration) -> bytes:
    endpoints = list(reg.listener_endpoints)
    protocols = {ep.split("://", 1)[0]: ep.split("://", 1)[0] for ep in endpoints}
    protocols.update(dict(reg.security_protocols))
    return _dumps(
        {
            "features": {},
            "listener_security_protocol_map": protocols,
            "endpoints": endpoints,
            "jmx_port": reg.jmx_port,
            "port": reg.port,
            "host": reg.host,
            "version": BROKER_REGISTRATION_VERSION,
            "timestamp": str(reg.timestamp_ms),
            "rack": reg.rack,
        }
    )


def decode_broker_registration(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    obj = _loads(data)
    endpoints = tuple(obj.get("endpoints") or ())
    host = obj.get("host")
    port = obj.get("port", -1)
    # Kafka writes host=null/port=-1 when the first listener is not PLAINTEXT.
    if (not host or port in (None, -1)) and endpoints:
        host_port = endpoints[0].split("://", 1)[1]
        host, _, port_text = host_port.rpartition(":")
        port = int(port_text)
    return BrokerRegistration(
        broker_id=broker_id,
        host=str(host),
        port=int(port),
        rack=obj.get("rack"),
        endpoints=endpoints,
        timestamp_ms=int(obj.get("timestamp", 0)),
        jmx_port=int(obj.get("jmx_port", -1)),
        epoch=epoch,
        security_protocols=tuple(
            sorted(
                (str(k), str(v))
                for k, v in (obj.get("listener_security_protocol_map") or {}).items()
            )
        ),
    )


# --- /brokers/topics/<topic> -------------------------------------------------------

Assignment = dict[int, list[int]]


# Kafka 2.8+ (TopicZNode.encode) writes version 3: the topic id and the (here always
# empty) adding/removing replica maps of KIP-455.
TOPIC_ZNODE_VERSION = 3


def encode_topic_assignment(assignment: Assignment, topic_id: uuid.UUID | None = None) -> bytes:
    obj: dict[str, Any] = {
        "version": TOPIC_ZNODE_VERSION,
        "partitions": {str(p): list(replicas) for p, replicas in sorted(assignment.items())},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    if topic_id is not None:
        obj["topic_id"] = topic_id_to_str(topic_id)
    return _dumps(obj)


def decode_topic_assignment(data: bytes) -> Assignment:
    obj = _loads(data)
    return {int(p): [int(r) for r in replicas] for p, replicas in obj["partitions"].items()}


def decode_topic_id(data: bytes) -> uuid.UUID | None:
    """The znode's `topic_id`, None when it has none (written before Kafka 2.8, or by a
    tool that does not set one; the controller then assigns one)."""
    text = _loads(data).get("topic_id")
    return None if text is None else topic_id_from_str(str(text))


# --- /brokers/topics/<topic>/partitions/<p>/state ----------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR as the controller last wrote them, and
    the zkVersion of the znode they were read from or written as (not in the JSON; -1
    when unknown). The one partition-state type of the controller and ZooKeeper."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...] = ()
    controller_epoch: int = 0
    zk_version: int = -1

    NO_LEADER = -1

    def __post_init__(self) -> None:
        if not isinstance(self.isr, tuple):  # JSON and callers hand lists
            object.__setattr__(self, "isr", tuple(self.isr))

    def with_leader(self, leader: int, isr: tuple[int, ...], controller_epoch: int) -> LeaderAndIsr:
        """A new leadership decision: every change of leader or ISR by the controller
        bumps the leader epoch, so brokers can tell newer decisions from older ones."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, isr, controller_epoch, self.zk_version)

    def at_version(self, zk_version: int) -> LeaderAndIsr:
        return LeaderAndIsr(
            self.leader, self.leader_epoch, self.isr, self.controller_epoch, zk_version
        )


def encode_leader_and_isr(state: LeaderAndIsr) -> bytes:
    return _dumps(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_leader_and_isr(data: bytes) -> LeaderAndIsr:
    obj = _loads(data)
    return LeaderAndIsr(
        leader=int(obj["leader"]),
        leader_epoch=int(obj["leader_epoch"]),
        isr=tuple(int(r) for r in obj["isr"]),
        controller_epoch=int(obj["controller_epoch"]),
    )


# --- /controller and /controller_epoch ---------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    text = data.decode("utf-8").strip()
    # Kafka 0.8 wrote a bare integer here; later versions write JSON.
    obj = json.loads(text)
    return int(obj) if isinstance(obj, int) else int(obj["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    # As Kafka writes it: a plain integer, not JSON.
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("ascii").strip())


# --- /config/{topics,brokers}/<entity> and /config/changes -------------------------


def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_topic_config(data: bytes) -> dict[str, str]:
    obj = _loads(data)
    return {str(k): str(v) for k, v in (obj.get("config") or {}).items()}


# Kafka writes every entity type's config znode in the same shape.
encode_broker_config = encode_topic_config
decode_broker_config = decode_topic_config
encode_user_config = encode_topic_config
decode_user_config = decode_topic_config


def sanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a znode name (Java's URLEncoder, with
    ' ' as %20 and '*' as %2A), e.g. `CN=a b` -> `CN%3Da%20b`."""
    # Java leaves A-Za-z0-9 . - _ * alone and encodes '~'; '*' is then encoded anyway.
    return quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(sanitized: str) -> str:
    return unquote_plus(sanitized)


def user_config_path(name: str) -> str:
    """/config/users/<sanitized user name>."""
    return f"{CONFIG_USERS_PATH}/{sanitize_entity_name(name)}"


def encode_config_change(entity_path: str) -> bytes:
    # Kafka's version-2 change notification: {"version":2,"entity_path":"topics/foo"}
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    obj = _loads(data)
    return str(obj["entity_path"])


# --- /admin/* and /isr_change_notification -----------------------------------------


def encode_reassignment(reassignment: dict[TopicPartition, list[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(reassignment.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[TopicPartition, list[int]]:
    obj = _loads(data)
    return {
        TopicPartition(str(p["topic"]), int(p["partition"])): [int(r) for r in p["replicas"]]
        for p in obj["partitions"]
    }


def _encode_partition_list(tps: list[TopicPartition] | set[TopicPartition]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(tps)],
        }
    )


def _decode_partition_list(data: bytes) -> list[TopicPartition]:
    obj = _loads(data)
    return [TopicPartition(str(p["topic"]), int(p["partition"])) for p in obj["partitions"]]


def encode_preferred_replica_election(tps: list[TopicPartition] | set[TopicPartition]) -> bytes:
    return _encode_partition_list(tps)


def decode_preferred_replica_election(data: bytes) -> list[TopicPartition]:
    return _decode_partition_list(data)


def encode_isr_change_notification(tps: list[TopicPartition] | set[TopicPartition]) -> bytes:
    return _encode_partition_list(tps)


def decode_isr_change_notification(data: bytes) -> list[TopicPartition]:
    return _decode_partition_list(data)


def encode_delete_topics(topics: list[str]) -> bytes:
    """The older single-znode form of /admin/delete_topics (Kafka now uses children)."""
    return _dumps({"version": 1, "topics": list(topics)})


def decode_delete_topics(data: bytes) -> list[str]:
    return [str(t) for t in _loads(data)["topics"]]

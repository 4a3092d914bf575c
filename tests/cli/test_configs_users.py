"""`strandline configs --entity-type users`: SCRAM credentials through a real broker
(AlterUserScramCredentials / DescribeUserScramCredentials via librdkafka), with
ZooKeeper as the second witness: librdkafka salts the password on the client side, and
the credential the broker stores must verify that password (the hash, salt and
iterations all agree), in Kafka's /config/users layout with its change notifications."""

from __future__ import annotations

import json

from strandline.coordination.zk_client import ZkClient
from strandline.launcher.local_cluster import LocalCluster
from strandline.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, verify_password
from tests.cli.support import tool
from tests.conftest import ClusterFactory

_run, _ok, _fails = tool("configs")


def ok(cluster: LocalCluster, *args: str) -> str:
    return _ok("--bootstrap-server", cluster.bootstrap, *args)


def fails(cluster: LocalCluster, *args: str) -> str:
    return _fails("--bootstrap-server", cluster.bootstrap, *args)


def alter_user(cluster: LocalCluster, name: str, *args: str) -> str:
    return ok(cluster, "--entity-type", "users", "--entity-name", name, "--alter", *args)


def stored(cluster: LocalCluster, name: str) -> dict[str, ScramCredential]:
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        return {
            mechanism: ScramCredential.parse(text)
            for mechanism, text in zk.get_user_scram_credentials(name).items()
        }


def test_scram_users_alter_describe_and_delete(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1)
    assert "Completed updating config for user alice." in alter_user(
        cluster,
        "alice",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=a,b=c]",
    )
    credentials = stored(cluster, "alice")
    assert credentials["SCRAM-SHA-256"].iterations == 8192
    assert credentials["SCRAM-SHA-512"].iterations == 4096
    assert verify_password(SCRAM_SHA_256, credentials["SCRAM-SHA-256"], "alice-secret")
    # The password runs to the end of the brackets, commas and '=' included.
    assert verify_password(SCRAM_SHA_512, credentials["SCRAM-SHA-512"], "a,b=c")
    assert cluster.zk_connect is not None
    with ZkClient(cluster.zk_connect).connect() as zk:
        data, _ = zk.kazoo.get("/config/users/alice")
        assert json.loads(data)["version"] == 1
        assert list(zk.get_config_changes().values()) == ["users/alice"]

    described = ok(cluster, "--entity-type", "users", "--entity-name", "alice", "--describe")
    assert described.strip() == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )
    assert "alice-secret" not in described and "salt" not in described

    alter_user(cluster, "CN=bob,O=x", "--add-config", "SCRAM-SHA-512=[password=bob-pw]")
    everyone = ok(cluster, "--entity-type", "users", "--describe").strip().splitlines()
    assert everyone == [
        "SCRAM credential configs for user-principal 'CN=bob,O=x' are "
        "SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
    ]

    alter_user(cluster, "alice", "--delete-config", "SCRAM-SHA-512")
    assert set(stored(cluster, "alice")) == {"SCRAM-SHA-256"}
    assert ok(
        cluster, "--entity-type", "users", "--entity-name", "alice", "--describe"
    ).strip() == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
    )
    assert ok(
        cluster, "--entity-type", "users", "--entity-name", "ghost", "--describe"
    ).strip() == ("No SCRAM credentials for user-principal 'ghost'.")

    # Errors: one line, exit 1, never the password.
    def user_fails(*args: str) -> str:
        return fails(cluster, "--entity-type", "users", "--entity-name", "alice", *args)

    assert (
        "user 'alice': RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"
        in (user_fails("--alter", "--delete-config", "SCRAM-SHA-512"))
    )
    assert "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256" in (
        user_fails("--alter", "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]")
    )
    assert "more than the maximum 16384" in (
        user_fails("--alter", "--add-config", "SCRAM-SHA-512=[iterations=16385,password=x]")
    )
    assert "only SCRAM credential configs" in user_fails(
        "--alter", "--add-config", "producer_byte_rate=1024"
    )
    message = user_fails("--alter", "--add-config", "SCRAM-SHA-256=[passwort=hunter2]")
    assert "expected [iterations=N,]password=" in message and "hunter2" not in message
    message = user_fails("--alter", "--add-config", "SCRAM-SHA-256=[password=hunter2")
    assert "hunter2" not in message
    assert "both added and deleted" in user_fails(
        "--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--delete-config", "SCRAM-SHA-256"
    )
    assert "--all does not go with --entity-type users" in user_fails("--describe", "--all")
    assert "only goes with --entity-type brokers" in fails(
        cluster, "--entity-type", "users", "--entity-default", "--describe"
    )
    # Nothing above changed alice.
    assert set(stored(cluster, "alice")) == {"SCRAM-SHA-256"}

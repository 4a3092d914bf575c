"""What `strandline cluster up --security ssl|sasl_plaintext|sasl_ssl` sets up.

A CA and one certificate per broker under DIR/tls (TLS modes), an `admin` super user
(SCRAM-SHA-256/512 credentials in ZooKeeper, SASL modes; a client certificate `CN=admin`
in `ssl` mode), the broker settings (listener, authorizer with
allow.everyone.if.no.acl.found=false, inter-broker traffic authenticated as admin or
with the broker's certificate) and the client settings a client needs: written to
DIR/client.properties and cluster.json["client_config"], librdkafka's key names.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from strandline.coordination.zk_client import ZkClient
from strandline.security.certs import create_ca, issue
from strandline.security.protocol import SecurityProtocol
from strandline.security.scram import SCRAM_MECHANISMS, make_credential

MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
ADMIN = "admin"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@dataclass
class ClusterSecurity:
    protocol: SecurityProtocol
    tls_dir: Path
    admin_password: str = ""
    ca_cert: Path | None = None
    broker_keystores: dict[int, Path] = field(default_factory=dict)
    admin_cert: Path | None = None
    admin_key: Path | None = None

    @classmethod
    def create(
        cls, mode: str, data_dir: Path, broker_hosts: dict[int, str], zk_connect: str
    ) -> ClusterSecurity:
        if mode not in MODES:
            raise ValueError(f"--security must be one of {', '.join(MODES)}, not {mode!r}")
        protocol = SecurityProtocol(mode.upper())
        security = cls(protocol, data_dir / "tls")
        if protocol.uses_tls:
            ca = create_ca(security.tls_dir, "strandline-ca")
            security.ca_cert = ca.cert
            for broker_id, host in broker_hosts.items():
                files = issue(ca, security.tls_dir, f"broker-{broker_id}", [host], client=True)
                security.broker_keystores[broker_id] = files.keystore
            if not protocol.uses_sasl:  # the admin logs in with its certificate
                admin = issue(ca, security.tls_dir, ADMIN, [], client=True)
                security.admin_cert, security.admin_key = admin.cert, admin.key
        if protocol.uses_sasl:
            security.admin_password = secrets.token_urlsafe(18)
            with ZkClient(zk_connect).connect() as zk:
                zk.alter_user_scram_credentials(
                    ADMIN,
                    {
                        name: make_credential(m, security.admin_password).format()
                        for name, m in SCRAM_MECHANISMS.items()
                    },
                )
        return security

    def super_users(self, broker_ids: list[int]) -> str:
        if self.protocol.uses_sasl:
            return f"User:{ADMIN}"
        # SSL: principals are the certificates' subjects.
        return ";".join([f"User:CN={ADMIN}", *(f"User:CN=broker-{b}" for b in broker_ids)])

    def broker_settings(
        self, broker_id: int, host: str, port: int, brokers: list[int]
    ) -> dict[str, str]:
        name = self.protocol.value
        settings = {
            "listeners": f"{name}://{host}:{port}",
            "advertised.listeners": f"{name}://{host}:{port}",
            "security.inter.broker.protocol": name,
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": self.super_users(brokers),
        }
        if self.protocol.uses_tls:
            assert self.ca_cert is not None
            settings["ssl.keystore.type"] = "PEM"
            settings["ssl.keystore.location"] = str(self.broker_keystores[broker_id])
            settings["ssl.truststore.type"] = "PEM"
            settings["ssl.truststore.location"] = str(self.ca_cert)
            if not self.protocol.uses_sasl:
                settings["ssl.client.auth"] = "required"
        if self.protocol.uses_sasl:
            settings["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
            settings["sasl.mechanism.inter.broker.protocol"] = INTER_BROKER_MECHANISM
            settings["sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{ADMIN}" password="{self.admin_password}";'
            )
        return settings

    def client_config(self) -> dict[str, str]:
        """librdkafka's keys (the Java client's differ only in the TLS file names)."""
        config = {"security.protocol": self.protocol.value}
        if self.protocol.uses_tls:
            assert self.ca_cert is not None
            config["ssl.ca.location"] = str(self.ca_cert)
            if self.admin_cert is not None and self.admin_key is not None:
                config["ssl.certificate.location"] = str(self.admin_cert)
                config["ssl.key.location"] = str(self.admin_key)
        if self.protocol.uses_sasl:
            config["sasl.mechanism"] = INTER_BROKER_MECHANISM
            config["sasl.username"] = ADMIN
            config["sasl.password"] = self.admin_password
        return config


def write_client_properties(path: Path, config: dict[str, str]) -> None:
    """client.properties for --command-config; it holds a password: owner-only."""
    text = "# the admin super user of this cluster (strandline cluster up --security)\n"
    text += "".join(f"{k}={v}\n" for k, v in config.items())
    write_private(path, text)


def write_private(path: Path, text: str) -> None:
    """Write a file that may hold a secret (client.properties, server.properties,
    cluster.json): created 0600 rather than chmod-ed after, so it is never readable by
    others, and an existing file loses any wider mode it had."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)  # O_CREAT keeps an existing file's mode
        f.write(text)

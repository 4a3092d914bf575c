"""SCRAM users in a real ZooKeeper, laid out as Kafka lays them out: ZkClient's
credential methods and change notifications, the broker's CredentialCache following
them, and the wire handlers (AlterUserScramCredentials, DescribeUserScramCredentials,
SaslHandshake, SaslAuthenticate) called through the protocol codec with a stand-in
broker context. Each test has its own chroot of the session's ZooKeeper."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from strandline.coordination import znodes
from strandline.coordination.zk_client import ZkClient
from strandline.protocol.codec import (
    decode_request,
    encode_request,
    encode_response,
    parse_header,
)
from strandline.protocol.messages import build, request_module
from strandline.security.credentials import CredentialCache
from strandline.security.principal import ANONYMOUS, user
from strandline.security.sasl_server import SaslServer
from strandline.security.scram import (
    SCRAM_SHA_512,
    ScramCredential,
    make_credential,
    verify_password,
)
from strandline.server.apis import REGISTRY
from strandline.server.session import CURRENT_SESSION, SecurityProtocol, Session
from tests.security.test_scram import ScramClient
from tests.waiting import wait_until

SHA256, SHA512 = 1, 2


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect, session_timeout_ms=4000).connect()
    yield client
    client.close()


def raw(zk: ZkClient, path: str) -> Any:
    data, _ = zk.kazoo.get(path)
    return json.loads(data)


def notifications(zk: ZkClient) -> list[str]:
    return list(zk.get_config_changes().values())


# --- ZkClient ----------------------------------------------------------------------


def test_credentials_are_stored_as_kafka_stores_them(zk: ZkClient) -> None:
    c256 = make_credential("SCRAM-SHA-256", "pw")
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", c256.format())
    assert raw(zk, "/config/users/alice") == {
        "version": 1,
        "config": {"SCRAM-SHA-256": c256.format()},
    }
    assert notifications(zk) == ["users/alice"]
    (child,) = zk.kazoo.get_children(znodes.CONFIG_CHANGES_PATH)
    assert child.startswith("config_change_") and child[len("config_change_") :].isdigit()
    assert raw(zk, f"{znodes.CONFIG_CHANGES_PATH}/{child}") == {
        "version": 2,
        "entity_path": "users/alice",
    }
    assert zk.get_user_scram_credentials("alice") == {"SCRAM-SHA-256": c256.format()}
    assert zk.get_user_scram_credentials("nobody") == {}


def test_mechanisms_are_set_and_deleted_one_by_one(zk: ZkClient) -> None:
    c256 = make_credential("SCRAM-SHA-256", "a").format()
    c512 = make_credential("SCRAM-SHA-512", "b", 8192).format()
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", c256)
    zk.set_user_scram_credential("alice", "SCRAM-SHA-512", c512)
    assert zk.get_user_scram_credentials("alice") == {"SCRAM-SHA-256": c256, "SCRAM-SHA-512": c512}
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", None)
    assert zk.get_user_scram_credentials("alice") == {"SCRAM-SHA-512": c512}
    zk.set_user_scram_credential("alice", "SCRAM-SHA-512", None)
    # Empty: the znode is gone, and each change was announced.
    assert zk.kazoo.exists("/config/users/alice") is None
    assert notifications(zk) == ["users/alice"] * 4
    # Deleting what is not there changes nothing and announces nothing.
    zk.set_user_scram_credential("alice", "SCRAM-SHA-512", None)
    assert notifications(zk) == ["users/alice"] * 4


def test_user_names_are_sanitized_like_kafkas(zk: ZkClient) -> None:
    name = "CN=app one,O=Example*"
    credential = make_credential("SCRAM-SHA-512", "pw").format()
    zk.set_user_scram_credential(name, "SCRAM-SHA-512", credential)
    assert zk.kazoo.get_children("/config/users") == ["CN%3Dapp%20one%2CO%3DExample%2A"]
    assert notifications(zk) == ["users/CN%3Dapp%20one%2CO%3DExample%2A"]
    assert zk.get_user_scram_credentials(name) == {"SCRAM-SHA-512": credential}
    assert zk.list_scram_users() == [name]


def test_other_user_configs_are_kept(zk: ZkClient) -> None:
    # A user's quotas share the znode (Kafka writes both there).
    zk.kazoo.create(
        "/config/users/alice",
        b'{"version":1,"config":{"producer_byte_rate":"1024"}}',
        makepath=True,
    )
    credential = make_credential("SCRAM-SHA-256", "pw").format()
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", credential)
    assert raw(zk, "/config/users/alice")["config"] == {
        "SCRAM-SHA-256": credential,
        "producer_byte_rate": "1024",
    }
    assert zk.get_user_scram_credentials("alice") == {"SCRAM-SHA-256": credential}
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", None)
    assert raw(zk, "/config/users/alice")["config"] == {"producer_byte_rate": "1024"}
    assert zk.list_scram_users() == []


def test_a_user_znode_with_client_quotas_below_stays_empty(zk: ZkClient) -> None:
    credential = make_credential("SCRAM-SHA-256", "pw").format()
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", credential)
    zk.kazoo.create("/config/users/alice/clients/app", b'{"version":1,"config":{}}', makepath=True)
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", None)
    assert raw(zk, "/config/users/alice") == {"version": 1, "config": {}}
    assert zk.get_user_scram_credentials("alice") == {}


def test_several_mechanisms_in_one_write_and_one_notification(zk: ZkClient) -> None:
    c256 = make_credential("SCRAM-SHA-256", "a").format()
    c512 = make_credential("SCRAM-SHA-512", "a").format()
    zk.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": c256, "SCRAM-SHA-512": c512})
    assert notifications(zk) == ["users/bob"]
    zk.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": None, "SCRAM-SHA-512": None})
    assert zk.kazoo.exists("/config/users/bob") is None


def test_list_scram_users(zk: ZkClient) -> None:
    assert zk.list_scram_users() == []  # not even /config/users yet
    for name in ("carol", "alice", "bob"):
        zk.set_user_scram_credential(
            name, "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "x").format()
        )
    # Quota-only users and an empty parent znode are not SCRAM users.
    zk.kazoo.create("/config/users/quota-only", b'{"version":1,"config":{"a":"1"}}')
    zk.kazoo.create("/config/users/empty", b"")
    assert zk.list_scram_users() == ["alice", "bob", "carol"]


def test_concurrent_alterations_of_one_user_lose_nothing(zk_connect: str) -> None:
    # Two brokers altering one user: the conditional write makes each see the other's.
    clients = [ZkClient(zk_connect, session_timeout_ms=4000).connect() for _ in range(2)]
    try:
        credentials = {
            "SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "a").format(),
            "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "b").format(),
        }
        start = threading.Barrier(2)

        def alter(zk: ZkClient, mechanism: str) -> None:
            start.wait()
            for _ in range(5):
                zk.set_user_scram_credential("alice", mechanism, credentials[mechanism])

        threads = [
            threading.Thread(target=alter, args=(c, m))
            for c, m in zip(clients, credentials, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert clients[0].get_user_scram_credentials("alice") == credentials
    finally:
        for c in clients:
            c.close()


# --- CredentialCache ---------------------------------------------------------------


def test_cache_load_all_and_refresh(zk: ZkClient) -> None:
    c_alice = make_credential("SCRAM-SHA-256", "alice-pw")
    c_bob = make_credential("SCRAM-SHA-512", "bob-pw", 8192)
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", c_alice.format())
    zk.set_user_scram_credential("bob", "SCRAM-SHA-512", c_bob.format())
    cache = CredentialCache()
    assert cache.load_all(zk) == 2
    assert cache.users() == ["alice", "bob"]
    assert cache.get("alice", "SCRAM-SHA-256") == c_alice
    assert cache.get("alice", "SCRAM-SHA-512") is None
    assert cache.mechanisms("bob") == {"SCRAM-SHA-512": 8192}

    c_new = make_credential("SCRAM-SHA-256", "new-pw")
    zk.set_user_scram_credential("alice", "SCRAM-SHA-256", c_new.format())
    assert cache.get("alice", "SCRAM-SHA-256") == c_alice  # until told
    cache.refresh_user(zk, "alice")
    assert cache.get("alice", "SCRAM-SHA-256") == c_new
    zk.set_user_scram_credential("bob", "SCRAM-SHA-512", None)
    cache.refresh_user(zk, "bob")
    assert cache.users() == ["alice"]


def test_cache_skips_a_corrupt_credential(zk: ZkClient) -> None:
    good = make_credential("SCRAM-SHA-512", "pw")
    zk.alter_user_scram_credentials(
        "alice", {"SCRAM-SHA-256": "salt=oops", "SCRAM-SHA-512": good.format()}
    )
    cache = CredentialCache()
    cache.load_all(zk)
    assert cache.get("alice", "SCRAM-SHA-256") is None
    assert cache.get("alice", "SCRAM-SHA-512") == good


@pytest.mark.parametrize(
    "entity_path",
    ["topics/t", "brokers/0", "users/<default>", "users/alice/clients/app", "users/"],
)
def test_cache_ignores_other_change_notifications(zk: ZkClient, entity_path: str) -> None:
    cache = CredentialCache()
    assert not cache.refresh_from_change(zk, entity_path)


def test_cache_follows_change_notifications_as_the_broker_does(zk: ZkClient) -> None:
    """The broker's /config/changes watch: each new notification's entity path goes to
    `refresh_from_change` (here on kazoo's thread; the broker marshals it to its loop)."""
    cache = CredentialCache()
    cache.load_all(zk)
    seen: set[str] = set()

    def on_changes(children: list[str]) -> None:
        new = [c for c in children if c not in seen]
        seen.update(new)
        changes = zk.get_config_changes()
        for name in new:
            cache.refresh_from_change(zk, changes.get(name, ""))

    zk.watch_children(znodes.CONFIG_CHANGES_PATH, on_changes)
    name = "CN=svc,O=x"
    credential = make_credential("SCRAM-SHA-512", "pw")
    zk.set_user_scram_credential(name, "SCRAM-SHA-512", credential.format())
    wait_until(
        "the cache to see the new credential",
        lambda: cache.get(name, "SCRAM-SHA-512") == credential,
        5.0,
    )
    zk.set_topic_config("orders", {"retention.ms": "1"})  # not a user: ignored
    zk.set_user_scram_credential(name, "SCRAM-SHA-512", None)
    wait_until("the cache to drop the user", lambda: cache.users() == [], 5.0)


# --- wire handlers -----------------------------------------------------------------


class Broker:
    """What the handlers use of the broker."""

    def __init__(self, zk: ZkClient, props: dict[str, str] | None = None) -> None:
        self.config = SimpleNamespace(props=props or {"sasl.plain.users": "admin:admin-pw"})
        self.topic_configs = SimpleNamespace(zk=zk)
        self.credentials = CredentialCache()
        self.credentials.load_all(zk)
        self.authorizer = None  # no authorizer.class.name: every principal may


def call(
    broker: Broker,
    api_key: int,
    version: int,
    message: str,
    session: Session | None = None,
    **fields: Any,
) -> Any:
    """Encode the request, decode it as the socket server does, run the handler in the
    session's context, and check the response encodes."""
    frame = encode_request(
        7, "test", build(getattr(request_module(api_key, version), message), **fields)
    )
    header, pos = parse_header(frame[4:])
    request = decode_request(header, frame[4:], pos)

    async def run() -> Any:
        CURRENT_SESSION.set(session)
        return await REGISTRY[api_key].handler(broker, header, request)  # type: ignore[arg-type]

    response = asyncio.run(run())
    assert encode_response(header.correlation_id, response)
    return response


def salted(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def upsertion(name: str, mechanism: int, password: str, iterations: int = 4096) -> Any:
    salt = os.urandom(24)
    hash_name = "sha256" if mechanism == SHA256 else "sha512"
    return build(
        request_module(51, 0).ScramCredentialUpsertion,
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=salted(hash_name, password, salt, iterations),
    )


def deletion(name: str, mechanism: int) -> Any:
    return build(request_module(51, 0).ScramCredentialDeletion, name=name, mechanism=mechanism)


def alter(
    broker: Broker, upsertions: list[Any], deletions: tuple[Any, ...] | list[Any] = ()
) -> list[tuple[str, ErrorCode, str | None]]:
    response = call(
        broker,
        51,
        0,
        "AlterUserScramCredentialsRequest",
        upsertions=tuple(upsertions),
        deletions=tuple(deletions),
    )
    return [(r.user, r.error_code, r.error_message) for r in response.results]


def describe(broker: Broker, names: list[str] | None) -> Any:
    users = (
        None
        if names is None
        else tuple(build(request_module(50, 0).UserName, name=n) for n in names)
    )
    return call(broker, 50, 0, "DescribeUserScramCredentialsRequest", users=users)


def test_alter_stores_keys_derived_from_the_clients_salted_password(zk: ZkClient) -> None:
    broker = Broker(zk)
    u = upsertion("alice", SHA512, "alice-secret", 8192)
    assert alter(broker, [u]) == [("alice", ErrorCode.none, None)]
    stored = ScramCredential.parse(zk.get_user_scram_credentials("alice")["SCRAM-SHA-512"])
    assert stored.salt == u.salt and stored.iterations == 8192
    assert verify_password(SCRAM_SHA_512, stored, "alice-secret")
    assert base64.b64encode(u.salted_password).decode() not in json.dumps(
        raw(zk, "/config/users/alice")
    )
    # This broker's cache has it at once; the notification is there for the others.
    assert broker.credentials.get("alice", "SCRAM-SHA-512") == stored
    assert notifications(zk) == ["users/alice"]


def test_alter_errors_are_kafkas(zk: ZkClient) -> None:
    broker = Broker(zk)
    alter(broker, [upsertion("keep", SHA256, "pw")])
    results = alter(
        broker,
        [
            upsertion("few", SHA256, "pw", 4095),
            upsertion("many", SHA512, "pw", 16385),
            upsertion("mech", 7, "pw"),
            upsertion("", SHA256, "pw"),
            upsertion("twice", SHA256, "a"),
            upsertion("twice", SHA256, "b"),
            upsertion("ok", SHA256, "pw"),
        ],
        [deletion("keep", SHA512), deletion("del-mech", 0)],
    )
    assert results == [
        ("del-mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("many", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        (
            "twice",
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        (
            "keep",
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        ("ok", ErrorCode.none, None),
    ]
    assert zk.list_scram_users() == ["keep", "ok"]


def test_a_user_with_an_error_is_not_altered_at_all(zk: ZkClient) -> None:
    broker = Broker(zk)
    results = alter(broker, [upsertion("alice", SHA256, "pw"), upsertion("alice", SHA512, "pw", 1)])
    assert results == [("alice", ErrorCode.unacceptable_credential, "Too few iterations")]
    assert zk.list_scram_users() == []


def test_alter_deletes_and_upserts_in_one_request(zk: ZkClient) -> None:
    broker = Broker(zk)
    alter(broker, [upsertion("alice", SHA256, "pw"), upsertion("alice", SHA512, "pw")])
    assert alter(broker, [upsertion("alice", SHA256, "new")], [deletion("alice", SHA512)]) == [
        ("alice", ErrorCode.none, None)
    ]
    assert set(zk.get_user_scram_credentials("alice")) == {"SCRAM-SHA-256"}
    assert broker.credentials.mechanisms("alice") == {"SCRAM-SHA-256": 4096}
    assert alter(broker, [], [deletion("alice", SHA256)]) == [("alice", ErrorCode.none, None)]
    assert broker.credentials.users() == []


def test_describe(zk: ZkClient) -> None:
    broker = Broker(zk)
    alter(
        broker,
        [
            upsertion("bob", SHA512, "pw", 8192),
            upsertion("alice", SHA512, "pw", 4096),
            upsertion("alice", SHA256, "pw", 10000),
        ],
    )
    everyone = describe(broker, None)
    assert everyone.error_code == ErrorCode.none and everyone.error_message is None
    assert [
        (r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
        for r in everyone.results
    ] == [
        ("alice", ErrorCode.none, [(SHA256, 10000), (SHA512, 4096)]),
        ("bob", ErrorCode.none, [(SHA512, 8192)]),
    ]
    assert [r.user for r in describe(broker, []).results] == ["alice", "bob"]

    some = describe(broker, ["bob", "ghost", "", "alice", "alice"])
    assert [(r.user, r.error_code, r.error_message) for r in some.results] == [
        ("bob", ErrorCode.none, None),
        (
            "ghost",
            ErrorCode.resource_not_found,
            "Attempt to describe a user credential that does not exist: ghost",
        ),
        ("", ErrorCode.resource_not_found, "Username must not be empty"),
        (
            "alice",
            ErrorCode.duplicate_resource,
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        ),
    ]


def sasl_session(protocol: SecurityProtocol = SecurityProtocol.SASL_PLAINTEXT) -> Session:
    return Session("SASL_PLAINTEXT", protocol, "127.0.0.1", authenticated=not protocol.uses_sasl)


def test_scram_login_through_the_handlers(zk: ZkClient) -> None:
    broker = Broker(zk, {"connections.max.reauth.ms": "60000"})
    alter(broker, [upsertion("alice", SHA512, "alice-secret", 8192)])
    session = sasl_session()
    hs = call(broker, 17, 1, "SaslHandshakeRequest", session, mechanism="SCRAM-SHA-512")
    assert hs.error_code == ErrorCode.none
    assert hs.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert isinstance(session.sasl, SaslServer)

    client = ScramClient("sha512", "alice", "alice-secret")
    first = call(broker, 36, 2, "SaslAuthenticateRequest", session, auth_bytes=client.first())
    assert first.error_code == ErrorCode.none and not session.authenticated
    before = time.monotonic()
    final = call(
        broker, 36, 2, "SaslAuthenticateRequest", session, auth_bytes=client.final(first.auth_bytes)
    )
    assert final.error_code == ErrorCode.none and final.error_message is None
    assert client.verify(final.auth_bytes)
    assert final.session_lifetime.total_seconds() == 60
    assert session.authenticated and session.principal == user("alice")
    assert session.session_expires_at is not None
    assert before + 59 < session.session_expires_at < time.monotonic() + 61


def test_failed_login_through_the_handlers(zk: ZkClient) -> None:
    broker = Broker(zk)
    alter(broker, [upsertion("alice", SHA256, "right")])
    session = sasl_session()
    call(broker, 17, 1, "SaslHandshakeRequest", session, mechanism="SCRAM-SHA-256")
    client = ScramClient("sha256", "alice", "wrong")
    first = call(broker, 36, 1, "SaslAuthenticateRequest", session, auth_bytes=client.first())
    final = call(
        broker, 36, 1, "SaslAuthenticateRequest", session, auth_bytes=client.final(first.auth_bytes)
    )
    assert final.error_code == ErrorCode.sasl_authentication_failed
    assert final.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert final.auth_bytes == b""
    assert not session.authenticated and session.principal == ANONYMOUS
    assert session.sasl.failed  # the socket server closes the connection


def test_plain_login_with_a_scram_user_and_a_static_user(zk: ZkClient) -> None:
    broker = Broker(zk)
    alter(broker, [upsertion("alice", SHA256, "alice-pw")])
    for name, password in (("alice", "alice-pw"), ("admin", "admin-pw")):
        session = sasl_session()
        call(broker, 17, 1, "SaslHandshakeRequest", session, mechanism="PLAIN")
        step = call(
            broker,
            36,
            0,
            "SaslAuthenticateRequest",
            session,
            auth_bytes=f"\x00{name}\x00{password}".encode(),
        )
        assert step.error_code == ErrorCode.none, step.error_message
        assert session.authenticated and session.principal == user(name)
        assert session.session_expires_at is None


def test_unsupported_mechanism_through_the_handler(zk: ZkClient) -> None:
    broker = Broker(zk, {"sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    session = sasl_session()
    for version in (0, 1):
        hs = call(broker, 17, version, "SaslHandshakeRequest", sasl_session(), mechanism="GSSAPI")
        assert hs.error_code == ErrorCode.unsupported_sasl_mechanism
        assert hs.mechanisms == ("SCRAM-SHA-256",)
    step = call(broker, 36, 2, "SaslAuthenticateRequest", session, auth_bytes=b"x")
    assert step.error_code == ErrorCode.illegal_sasl_state
    assert session.sasl.failed and not session.authenticated


def test_a_new_user_can_log_in_as_soon_as_it_is_created(zk: ZkClient) -> None:
    broker = Broker(zk)
    session = sasl_session()
    call(broker, 17, 1, "SaslHandshakeRequest", session, mechanism="PLAIN")
    alter(broker, [upsertion("late", SHA512, "pw")])
    step = call(broker, 36, 2, "SaslAuthenticateRequest", session, auth_bytes=b"\x00late\x00pw")
    assert step.error_code == ErrorCode.none and session.principal == user("late")


def test_sasl_requests_on_a_plaintext_listener(zk: ZkClient) -> None:
    broker = Broker(zk)
    session = sasl_session(SecurityProtocol.PLAINTEXT)
    hs = call(broker, 17, 1, "SaslHandshakeRequest", session, mechanism="PLAIN")
    assert hs.error_code == ErrorCode.illegal_sasl_state and hs.mechanisms == ()
    step = call(broker, 36, 1, "SaslAuthenticateRequest", session, auth_bytes=b"\x00a\x00b")
    assert step.error_code == ErrorCode.illegal_sasl_state
    assert step.error_message == "SaslAuthenticate request received after successful authentication"
    assert session.authenticated and session.sasl is None
    # No session at all (an in-process call) is a PLAINTEXT client.
    assert call(broker, 17, 1, "SaslHandshakeRequest", None, mechanism="PLAIN").error_code == (
        ErrorCode.illegal_sasl_state
    )

"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as Kafka's
ZooKeeper-mode broker answers them (ZkAdminManager), errors and messages included.

The credentials live in /config/users/<sanitized name> (see ZkClient's SCRAM section).
An alteration carries what the client computed, the salt and the salted password; the
broker derives the stored and server keys from them and never sees the password. Each
altered user's znode is written once, with one change notification, so every broker's
CredentialCache rereads it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from strandline.coordination.zk_retry import until_connected, zk_request
from strandline.errors import KafkaError
from strandline.protocol.codec import RequestHeader
from strandline.protocol.messages import build, response_class
from strandline.security.acl import AclOperation
from strandline.security.scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    mechanism_by_type,
)
from strandline.server.apis.api_versions import NO_THROTTLE
from strandline.server.apis.registry import api
from strandline.server.apis.sasl import broker_credentials
from strandline.server.authz import cluster_authorized, require_cluster
from strandline.server.context import BrokerContext

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"


class ScramCredentialStore(Protocol):
    """The ZkClient methods used here."""

    def get_user_scram_credentials(self, name: str) -> dict[str, str]: ...

    def list_scram_users(self) -> list[str]: ...

    def alter_user_scram_credentials(self, name: str, changes: dict[str, str | None]) -> None: ...


@dataclass(frozen=True)
class UserResult:
    user: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    # (mechanism type id, iterations), by type id.
    credentials: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


# --- DescribeUserScramCredentials --------------------------------------------------


def _describe_one(store: ScramCredentialStore, user: str) -> UserResult | None:
    """None when the user has no SCRAM credential."""
    stored = store.get_user_scram_credentials(user)
    if not stored:
        return None
    infos = []
    try:
        for name, text in stored.items():
            mechanism = SCRAM_MECHANISMS.get(name)
            if mechanism is not None:
                infos.append((mechanism.type_id, ScramCredential.parse(text).iterations))
    except ValueError as e:
        return UserResult(user, ErrorCode.unknown_server_error, str(e))
    return UserResult(user, credentials=tuple(sorted(infos)))


def describe_scram_credentials(
    store: ScramCredentialStore, users: Sequence[str] | None
) -> list[UserResult]:
    """Blocking (ZooKeeper reads). `users` None or empty: every user with a credential."""
    if not users:
        found = (_describe_one(store, user) for user in store.list_scram_users())
        return sorted((r for r in found if r is not None), key=lambda r: r.user)
    counts = Counter(users)
    results: dict[str, UserResult] = {}
    for user in dict.fromkeys(users):
        if not user:
            results[user] = UserResult(
                user, ErrorCode.resource_not_found, USERNAME_MUST_NOT_BE_EMPTY
            )
        elif counts[user] > 1:
            results[user] = UserResult(
                user,
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}",
            )
        else:
            result = _describe_one(store, user)
            results[user] = result or UserResult(
                user,
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {user}",
            )
    return [results[user] for user in dict.fromkeys(users)]


@api(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def describe_user_scram_credentials(
    ctx: BrokerContext, header: RequestHeader, request: Any
) -> Any:
    v = header.api_version
    result_cls = response_class(
        DESCRIBE_USER_SCRAM_CREDENTIALS, v, "DescribeUserScramCredentialsResult"
    )
    info_cls = response_class(DESCRIBE_USER_SCRAM_CREDENTIALS, v, "CredentialInfo")
    users = [u.name for u in request.users] if request.users else None
    error, message, results = ErrorCode.none, None, []
    try:
        require_cluster(ctx, AclOperation.DESCRIBE)
        results = await zk_request(describe_scram_credentials, ctx.topic_configs.zk, users)
    except KafkaError as e:
        error, message = e.code, str(e)
    except Exception as e:  # noqa: BLE001 - e.g. ZooKeeper unreachable: a top-level error
        error = ErrorCode.unknown_server_error
        message = f"Error processing describe user SCRAM credential configs request: {e}"
    return build(
        response_class(DESCRIBE_USER_SCRAM_CREDENTIALS, v, "DescribeUserScramCredentialsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        results=tuple(
            build(
                result_cls,
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
                credential_infos=tuple(
                    build(info_cls, mechanism=m, iterations=i) for m, i in r.credentials
                ),
            )
            for r in results
        ),
    )


# --- AlterUserScramCredentials -----------------------------------------------------


def _illegal_upsertion(u: Upsertion) -> str | None:
    if not u.name:
        return USERNAME_MUST_NOT_BE_EMPTY
    mechanism = mechanism_by_type(u.mechanism)
    if mechanism is None:
        return UNKNOWN_SCRAM_MECHANISM
    if u.iterations < mechanism.min_iterations:
        return "Too few iterations"
    if u.iterations > mechanism.max_iterations:
        return "Too many iterations"
    return None


def _illegal_deletion(d: Deletion) -> str | None:
    if not d.name:
        return USERNAME_MUST_NOT_BE_EMPTY
    return UNKNOWN_SCRAM_MECHANISM if mechanism_by_type(d.mechanism) is None else None


def alter_scram_credentials(
    store: ScramCredentialStore,
    upsertions: Sequence[Upsertion],
    deletions: Sequence[Deletion],
) -> list[UserResult]:
    """Blocking. One result per user named, in Kafka's order: illegal requests, users
    altering one mechanism twice, deletions of missing credentials, failed writes,
    then successes. A user with any error is not altered at all."""
    results: list[UserResult] = []
    # Upsertion errors win over deletion errors for one user, as in Kafka's map merge.
    illegal: dict[str, str] = {}
    for d in deletions:
        if (why := _illegal_deletion(d)) is not None:
            illegal[d.name] = why
    for u in upsertions:
        if (why := _illegal_upsertion(u)) is not None:
            illegal[u.name] = why
    for user, why in illegal.items():
        code = (
            ErrorCode.unsupported_sasl_mechanism
            if why == UNKNOWN_SCRAM_MECHANISM
            else ErrorCode.unacceptable_credential
        )
        results.append(UserResult(user, code, why))

    pairs = [(u.name, u.mechanism) for u in upsertions if u.name not in illegal] + [
        (d.name, d.mechanism) for d in deletions if d.name not in illegal
    ]
    duplicated = list(dict.fromkeys(user for (user, _), n in Counter(pairs).items() if n > 1))
    for user in duplicated:
        results.append(
            UserResult(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        )
    candidates = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))

    current = {user: store.get_user_scram_credentials(user) for user in candidates}
    missing = list(
        dict.fromkeys(
            d.name
            for d in deletions
            if d.name in current and _mechanism_name(d.mechanism) not in current[d.name]
        )
    )
    for user in missing:
        results.append(
            UserResult(
                user,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        )

    succeeded = []
    for user in (u for u in candidates if u not in missing):
        try:
            changes: dict[str, str | None] = {
                _mechanism_name(d.mechanism): None for d in deletions if d.name == user
            }
            for u in upsertions:
                if u.name == user:
                    mechanism = mechanism_by_type(u.mechanism)
                    assert mechanism is not None
                    credential = mechanism.credential(u.salt, u.salted_password, u.iterations)
                    changes[mechanism.name] = credential.format()
            until_connected(store.alter_user_scram_credentials, user, changes)
        except KafkaError as e:  # REQUEST_TIMED_OUT when ZooKeeper stayed unreachable
            results.append(UserResult(user, e.code, str(e)))
        except Exception as e:  # noqa: BLE001 - reported per user, as Kafka does
            results.append(UserResult(user, ErrorCode.unknown_server_error, str(e) or repr(e)))
        else:
            succeeded.append(user)
    results.extend(UserResult(user) for user in succeeded)
    return results


def _mechanism_name(type_id: int) -> str:
    mechanism = mechanism_by_type(type_id)
    assert mechanism is not None  # illegal mechanisms were answered before
    return mechanism.name


@api(ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def alter_user_scram_credentials(
    ctx: BrokerContext, header: RequestHeader, request: Any
) -> Any:
    v = header.api_version
    upsertions = [
        Upsertion(
            u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
        )
        for u in request.upsertions
    ]
    deletions = [Deletion(d.name, int(d.mechanism)) for d in request.deletions]
    zk = ctx.topic_configs.zk
    if not cluster_authorized(ctx, AclOperation.ALTER):
        names = sorted({u.name for u in upsertions} | {d.name for d in deletions})
        results = [
            UserResult(n, ErrorCode.cluster_authorization_failed, "ALTER on the cluster needed")
            for n in names
        ]
    else:
        results = await zk_request(alter_scram_credentials, zk, upsertions, deletions)
    credentials = broker_credentials(ctx)
    if credentials is not None:
        # The change notification will do it too; this broker answers its own
        # client's next login with the new credential at once.
        altered = [r.user for r in results if r.error_code == ErrorCode.none]
        for user in altered:
            await zk_request(credentials.refresh_user, zk, user)
    result_cls = response_class(ALTER_USER_SCRAM_CREDENTIALS, v, "AlterUserScramCredentialsResult")
    return build(
        response_class(ALTER_USER_SCRAM_CREDENTIALS, v, "AlterUserScramCredentialsResponse"),
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(result_cls, user=r.user, error_code=r.error_code, error_message=r.error_message)
            for r in results
        ),
    )

"""The replication quota alone: a token bucket and Kafka's throttled-replica lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strandline.quotas import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    QuotaConfigError,
    ReplicationQuota,
    parse_throttled_replicas,
    reassignment_throttles,
    render_throttled_replicas,
)


def test_an_unlimited_quota_is_never_exceeded() -> None:
    quota = ReplicationQuota()
    quota.record(10**12, now=0.0)
    assert not quota.exceeded(0.0) and quota.delay_s(0.0) == 0.0


def test_an_overdraft_waits_until_paid_back() -> None:
    quota = ReplicationQuota()
    quota.set_rate(1000.0, now=0.0)
    assert not quota.exceeded(0.0)
    quota.record(3000, now=0.0)  # one second of burst plus 2 s of debt
    assert quota.exceeded(0.0)
    assert quota.delay_s(0.0) == pytest.approx(2.0, abs=0.01)
    assert quota.exceeded(1.9)
    assert not quota.exceeded(2.01)


@given(
    rate=st.floats(min_value=100, max_value=1e8),
    sizes=st.lists(st.integers(min_value=1, max_value=10**6), min_size=50, max_size=200),
)
def test_sending_whenever_allowed_averages_the_rate(rate: float, sizes: list[int]) -> None:
    """A sender that sends whenever the quota allows, in batches of any size, moves
    bytes at the rate: within one burst plus one batch of it over the whole run."""
    quota = ReplicationQuota()
    quota.set_rate(rate, now=0.0)
    now = 0.0
    for size in sizes:
        now += quota.delay_s(now)
        assert not quota.exceeded(now)
        quota.record(size, now)
    sent = sum(sizes)
    # Sent by `now`: at most a burst (rate * 1 s) plus the last batch beyond rate * now.
    assert sent <= rate * now + rate * 1.0 + sizes[-1] + 1e-6 * sent
    # ...and not much less: each wait ended as soon as the debt was paid.
    assert sent >= rate * now - 1e-3 * rate * len(sizes)


def test_throttled_replica_lists() -> None:
    listed = parse_throttled_replicas("0:1, 0:2,3:1")
    assert listed.throttles(0, 2) and listed.throttles(3, 1) and not listed.throttles(1, 1)
    assert parse_throttled_replicas("*").throttles(7, 9)
    assert not parse_throttled_replicas("").throttles(0, 1)
    assert render_throttled_replicas({(1, 2), (0, 3)}) == "0:3,1:2"
    for bad in ("0", "a:1", "0:b", "0:1,x"):
        with pytest.raises(QuotaConfigError):
            parse_throttled_replicas(bad)


def test_reassignment_throttles_name_old_replicas_for_leaders_and_new_for_followers() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    target = {("t", 0): [1, 2], ("t", 1): [2, 4], ("u", 0): [3, 1]}
    configs, brokers = reassignment_throttles(current, target)
    assert configs == {
        "t": {LEADER_REPLICAS: "1:2,1:3", FOLLOWER_REPLICAS: "1:4"},
        "u": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:3"},
    }
    assert brokers == {1, 2, 3, 4}

"""The nemesis's plans are pure: zk-blip's cuts stay under the session timeout and leave
the session time to reconnect, and the ISR has room to shrink and grow inside it."""

from __future__ import annotations

import random

import pytest

from strandline.chaos.nemesis import (
    BLIP_MAX_FRACTION,
    FAULT_KINDS,
    ZK_BLIP_MIN_S,
    plan_schedule,
    zk_blip_target,
)


@pytest.mark.parametrize("seed", range(50))
def test_zk_blip_cuts_stay_under_the_session_timeout(seed: int) -> None:
    session_s = 2.0
    target = zk_blip_target(random.Random(seed), 6.0, session_s)
    blips = target["blips"]
    assert blips, target
    end = 0.0
    for at, length in blips:
        assert 0 < length <= BLIP_MAX_FRACTION * session_s
        # A gap after each cut, so the client reconnects before the next one.
        assert at >= end + (0.6 * session_s if end else 0)
        end = at + length
    assert end <= 6.0
    assert 2.0 < target["follower_pause_s"] < 6.0
    assert target["broker"] == "leader"


def test_plans_draw_zk_blip_with_room_and_are_reproducible() -> None:
    assert "zk-blip" in FAULT_KINDS
    plan = plan_schedule(3, 60, ["zk-blip"], session_timeout_s=2.0)
    assert plan and all(s.kind == "zk-blip" and s.duration_s >= ZK_BLIP_MIN_S for s in plan)
    assert plan == plan_schedule(3, 60, ["zk-blip"], session_timeout_s=2.0)
    for step in plan:
        assert all(at + length <= step.duration_s for at, length in step.target["blips"])

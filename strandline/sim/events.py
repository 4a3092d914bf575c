"""The events a simulated schedule is made of: client traffic, replication rounds, faults."""

from __future__ import annotations

from typing import NamedTuple

PRODUCE = "produce"  # value; flag: acks=all (else acks=1)
FETCH = "fetch"  # replica; one fetcher round trip (OffsetForLeaderEpoch while truncating)
FETCH_LOST = "fetch_lost"  # replica; the leader processes the request, the response is lost
FETCH_DELAYED = "fetch_delayed"  # replica; the response is held back until DELIVER
DELIVER = "deliver"  # replica; the held response finally arrives (maybe stale)
CRASH = "crash"  # replica; flag: lose unflushed data. The controller notices.
RESTART = "restart"  # replica; a crashed broker comes back and registers
BOUNCE = "bounce"  # replica; a follower restarts faster than the ZK session timeout
POWER_FAILURE = "power_failure"  # every broker at once; flag: lose unflushed data
FLUSH = "flush"  # replica; fsync: what is in the log survives a crash
ELECT = "elect"  # replica; controller moves leadership to this live ISR replica
TICK = "tick"  # time passes by half of replica.lag.time.max.ms; ISR expiration runs

KINDS = (
    PRODUCE,
    FETCH,
    FETCH_LOST,
    FETCH_DELAYED,
    DELIVER,
    CRASH,
    RESTART,
    BOUNCE,
    POWER_FAILURE,
    FLUSH,
    ELECT,
    TICK,
)


class Event(NamedTuple):
    kind: str
    replica: int = -1
    flag: bool = False
    value: str = ""

    def describe(self, names: str) -> str:
        who = names[self.replica] if 0 <= self.replica < len(names) else "?"
        if self.kind == PRODUCE:
            return f"produce {self.value} (acks={'all' if self.flag else '1'})"
        if self.kind in (CRASH, BOUNCE):
            suffix = ", losing unflushed data" if self.flag else ""
            return f"{self.kind} {who}{suffix}"
        if self.kind == POWER_FAILURE:
            return "power failure (all brokers)" + (", losing unflushed data" if self.flag else "")
        if self.kind == TICK:
            return "tick (ISR expiration check)"
        return f"{self.kind} {who}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind}
        if self.replica >= 0:
            out["replica"] = self.replica
        if self.flag:
            out["flag"] = True
        if self.value:
            out["value"] = self.value
        return out

    @staticmethod
    def from_json(data: dict[str, object]) -> Event:
        replica = data.get("replica", -1)
        return Event(
            str(data["kind"]),
            int(replica) if isinstance(replica, int) else -1,
            bool(data.get("flag", False)),
            str(data.get("value", "")),
        )

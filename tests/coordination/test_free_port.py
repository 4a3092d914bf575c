"""Ports for our servers come from outside the kernel's ephemeral range."""

from __future__ import annotations

from pathlib import Path

from strandline.coordination.zookeeper_server import free_port, port_free


def test_free_port_is_bindable_and_below_the_ephemeral_range() -> None:
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1  # drawn, not a fixed port
    for port in ports:
        assert 10_000 <= port < ephemeral_low
        assert port_free(port)

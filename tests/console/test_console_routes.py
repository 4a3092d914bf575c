"""The console's pages and JSON endpoints against a real cluster, without a browser
(Starlette's TestClient, in-process), and its error paths as users hit them (a
subprocess: one clear line, exit 1).

One cluster serves every route check, since starting one costs more than the checks.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from starlette.testclient import TestClient

from strandline.console import render
from strandline.console.app import create_app
from strandline.console.gather import (
    HW_STUCK_S,
    Alert,
    ClusterView,
    Gatherer,
    Reassignment,
    ReassignmentsView,
    StuckHighWatermarks,
    group_alerts,
)
from strandline.console.history import History, rates
from strandline.console.metrics import MESSAGES_IN, BrokerScrape, Scraper
from strandline.console.sources import resolve
from strandline.coordination.zookeeper_server import free_port
from strandline.launcher.local_cluster import LocalCluster
from tests.cluster.support import create_topic, producer
from tests.conftest import ClusterFactory
from tests.console.support import console_process, one_error_line, run_console
from tests.waiting import wait_until

RECORDS = 300


@pytest.fixture
def client(cluster_factory: ClusterFactory) -> Iterator[tuple[TestClient, LocalCluster]]:
    cluster = cluster_factory(brokers=3)
    gatherer = Gatherer(resolve(None, None, cluster.data_dir)).start()
    try:
        with TestClient(create_app(gatherer)) as test_client:
            yield test_client, cluster
    finally:
        gatherer.close()


def _produce(cluster: LocalCluster, topic: str, partition: int, count: int) -> None:
    p = producer(cluster)
    for i in range(count):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0, "records left unacknowledged"


def _commit(cluster: LocalCluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[CkTopicPartition(topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def test_pages_and_json_against_a_real_cluster(
    client: tuple[TestClient, LocalCluster],
) -> None:
    http, cluster = client
    create_topic(cluster, "orders", partitions=2, rf=3, min_insync_replicas="2")
    _produce(cluster, "orders", 0, RECORDS)

    view = http.get("/api/cluster").json()
    assert [b["id"] for b in view["brokers"]] == [1, 2, 3]
    assert all(b["alive"] and b["metrics_url"] for b in view["brokers"])
    assert view["controller"] in (1, 2, 3) and view["controller_epoch"] >= 1
    assert [b["id"] for b in view["brokers"] if b["controller"]] == [view["controller"]]
    orders = [p for p in view["partitions"] if p["topic"] == "orders"]
    assert [(p["partition"], p["min_isr"], p["leader_epoch"]) for p in orders] == [
        (0, 2, 0),
        (1, 2, 0),
    ]
    assert view["alerts"] == []
    page = http.get("/")
    assert page.status_code == 200 and 'id="controller"' in page.text
    assert "No alerts" in page.text
    assert http.get("/live").text.startswith('<p class="headline">')

    topics = {t["name"]: t for t in http.get("/api/topics").json()}
    assert topics["orders"]["partitions"] == 2
    assert topics["orders"]["replication_factor"] == 3
    assert topics["orders"]["under_replicated"] == 0
    assert 'href="/topics/orders"' in http.get("/topics").text
    assert 'href="/topics/orders/1"' in http.get("/topics/orders").text

    # Every replica catches up: LEO = HW = what was produced, on every broker's metrics.
    def caught_up() -> dict[str, object] | None:
        p = http.get("/api/topics/orders/0").json()
        leos = {r["broker"]: r["log_end_offset"] for r in p["replicas"]}
        hws = {r["broker"]: r["high_watermark"] for r in p["replicas"]}
        if p["high_watermark"] == RECORDS and set(leos.values()) == set(hws.values()) == {RECORDS}:
            return p
        return None

    partition = wait_until(f"every replica of orders-0 at {RECORDS}", caught_up, timeout_s=20)
    assert {r["broker"] for r in partition["replicas"]} == {1, 2, 3}
    assert all(r["in_isr"] and r["alive"] and r["error"] is None for r in partition["replicas"])
    assert [r["leader"] for r in partition["replicas"]].count(True) == 1
    page = http.get("/topics/orders/0")
    assert page.status_code == 200
    assert f'id="hw" data-value="{RECORDS}"' in page.text
    assert page.text.count('class="replica isr"') == 3
    assert 'data-src="/live/topics/orders/0"' in page.text

    # A group with committed offsets: lag is the HW minus the committed offset.
    _commit(cluster, "billing", "orders", {0: 100})
    groups = wait_until(
        "the billing group to be listed",
        lambda: [g for g in http.get("/api/groups").json()["groups"] if g["group_id"] == "billing"],
    )
    [offset] = [o for o in groups[0]["offsets"] if o["partition"] == 0]
    assert (offset["committed"], offset["end"], offset["lag"]) == (100, RECORDS, RECORDS - 100)
    assert groups[0]["total_lag"] == RECORDS - 100
    assert "billing" in http.get("/groups").text

    # The broker page: what it leads and hosts, its log dir, its request rates.
    broker_1 = wait_until(
        "broker 1's request rates",
        lambda: (b := http.get("/api/brokers/1").json()) and b["rates"] and b,
        timeout_s=20,
    )
    assert broker_1["broker"]["answering"] is True
    assert set(broker_1["replicas"]) >= {"orders-0", "orders-1"}
    assert set(broker_1["leaders"]) <= set(broker_1["replicas"])
    assert broker_1["under_replicated"] == broker_1["out_of_isr"] == []
    [log_dir] = broker_1["log_dirs"]
    assert log_dir["error"] is None and log_dir["size_bytes"] > 0 and log_dir["replicas"] >= 2
    assert log_dir["usable_bytes"] is None or log_dir["usable_bytes"] > 0
    assert any(k.startswith("requests/s ") for k in broker_1["rates"])
    page = http.get("/brokers/1").text
    assert 'id="log-dirs"' in page and 'class="rate"' in page
    assert http.get("/api/brokers/9").status_code == 404

    # Charts: every gather adds a point.
    charted = wait_until(
        "two points on the cluster's charts",
        lambda: (
            (v := http.get("/api/cluster").json())
            and len(v["charts"]["ISR size (all partitions)"]) >= 2
            and v
        ),
        timeout_s=15,
    )
    assert charted["charts"]["ISR size (all partitions)"][-1][1] == sum(
        len(p["isr"]) for p in charted["partitions"]
    )
    assert 'id="chart-isr-size--all-partitions"' in http.get("/").text
    assert "<svg" in http.get("/topics/orders/0").text

    # Topic configs (min.insync.replicas set on the topic) and, with no authorizer, why
    # there are no ACLs to show.
    configs = http.get("/api/topics/orders/configs").json()
    by_name = {c["name"]: c for c in configs["configs"]}
    assert by_name["min.insync.replicas"]["value"] == "2"
    assert by_name["min.insync.replicas"]["source"] == "topic"
    assert by_name["cleanup.policy"]["source"] != "topic"
    assert "SECURITY_DISABLED" in configs["acls"]["unavailable"]
    page = http.get("/topics/orders/configs").text
    assert 'data-name="min.insync.replicas" data-source="topic"' in page
    assert "SECURITY_DISABLED" in http.get("/acls").text
    assert http.get("/api/topics/nope/configs").status_code == 404

    assert http.get("/api/reassignments").json()["reassignments"] == []
    assert "No reassignment in progress" in http.get("/reassignments").text

    timeline = http.get("/api/timeline", params={"topic": "orders", "partition": "0"}).json()
    assert timeline["total"] > 0 and len(timeline["logs"]) == 3
    assert all((e["topic"], e["partition"]) == ("orders", 0) for e in timeline["entries"]), (
        timeline["entries"]
    )
    assert any(e["event"] == "become-leader" for e in timeline["entries"])
    everything = http.get("/api/timeline").json()["total"]
    assert everything > timeline["total"]
    # Filters: broker, event kind; internal topics (the billing commit made
    # __consumer_offsets) hidden unless asked for.
    default = http.get("/api/timeline").json()
    assert default["hidden_internal"] > 0
    assert not any(str(e.get("topic") or "").startswith("__") for e in default["entries"])
    with_internal = http.get("/api/timeline", params={"internal": "1"}).json()
    assert with_internal["total"] == default["total"] + default["hidden_internal"]
    assert any(e.get("topic") == "__consumer_offsets" for e in with_internal["entries"])
    of_broker_2 = http.get("/api/timeline", params={"broker": "2"}).json()
    assert of_broker_2["total"] > 0 and {e["broker"] for e in of_broker_2["entries"]} == {2}
    leaders = http.get("/api/timeline", params={"event": "become-leader"}).json()
    assert leaders["total"] == default["kinds"]["become-leader"] > 0
    assert {e["event"] for e in leaders["entries"]} == {"become-leader"}
    some_leader = str(leaders["entries"][0]["broker"])
    page = http.get("/timeline", params={"event": "become-leader", "broker": some_leader}).text
    assert 'name="event" value="become-leader"' in page and 'data-kind="become-leader"' in page
    assert "of internal topics hidden" in http.get("/timeline").text
    assert http.get("/timeline", params={"broker": "x"}).status_code == 404
    page = http.get("/timeline", params={"topic": "orders", "partition": "0"})
    assert page.status_code == 200 and 'name="topic" value="orders"' in page.text
    assert "become-leader" in page.text

    # Unknown things: a 404 page (or JSON) that says what is missing.
    missing = http.get("/topics/nope/0")
    assert missing.status_code == 404
    assert "topic &#x27;nope&#x27; is not in the cluster" in missing.text
    assert "does not exist, or the console" in missing.text  # ACLs may hide a topic
    assert 'data-src="' not in missing.text  # nothing to poll
    assert http.get("/topics/nope").status_code == 404
    assert (
        http.get("/api/topics/nope/0")
        .json()["error"]
        .startswith("topic 'nope' is not in the cluster's metadata: it does not exist, or")
    )
    no_partition = http.get("/api/topics/orders/7")
    assert no_partition.status_code == 404
    assert "has no partition 7" in no_partition.json()["error"]
    assert http.get("/timeline", params={"partition": "x"}).status_code == 404
    assert http.get("/no/such/page").status_code == 404

    # A dead broker: shown down, its partitions under-replicated, its last LEO kept.
    cluster.kill(3, "KILL")
    view = wait_until(
        "broker 3 down with both orders partitions under-replicated",
        lambda: (
            (v := http.get("/api/cluster").json())
            and {(a["kind"], a["subject"]) for a in v["alerts"]}
            >= {
                ("broker-down", "broker 3"),
                ("under-replicated", "orders-0"),
                ("under-replicated", "orders-1"),
            }
            and v
        ),
        timeout_s=20,
    )
    assert [b["alive"] for b in view["brokers"]] == [True, True, False]
    grouped = {(g["kind"], g["topic"]): g for g in view["alert_groups"]}
    orders_urp = grouped[("under-replicated", "orders")]
    assert (orders_urp["count"], orders_urp["brokers"]) == (2, [3])
    assert orders_urp["subjects"] == ["orders-0", "orders-1"]
    assert view["alerts_by_broker"]["3"]["under-replicated"] >= 2
    [dead] = [r for r in http.get("/api/topics/orders/0").json()["replicas"] if r["broker"] == 3]
    assert not dead["alive"] and not dead["in_isr"]
    assert dead["log_end_offset"] == RECORDS  # from the last scrape that worked
    assert "last seen" in (dead["error"] or "")
    dead_page = wait_until(
        "broker 3's page to show it down",
        lambda: (b := http.get("/api/brokers/3").json()) and not b["broker"]["alive"] and b,
        timeout_s=20,
    )
    assert dead_page["log_dirs"] == [] and dead_page["log_dirs_unknown"]
    assert dead_page["rates"] == {} and "does not answer" in dead_page["rates_unknown"]
    assert set(dead_page["out_of_isr"]) >= {"orders-0", "orders-1"}


def test_alerts_are_grouped_by_kind_topic_and_brokers() -> None:
    """110 partitions under-replicated by one dead broker: one row with a count."""
    alerts = [
        Alert("under-replicated", f"orders-{i}", "ISR [1,2]", "orders", (3,)) for i in range(110)
    ]
    alerts += [Alert("under-replicated", "audit-0", "ISR [2,3]", "audit", (1,))]
    alerts += [Alert("broker-down", "broker 3", "not registered", brokers=(3,))]
    groups, by_broker = group_alerts(alerts)
    assert [(g.kind, g.topic, g.brokers, g.count) for g in groups] == [
        ("broker-down", None, (3,), 1),
        ("under-replicated", "audit", (1,), 1),
        ("under-replicated", "orders", (3,), 110),
    ]
    assert by_broker == {1: {"under-replicated": 1}, 3: {"under-replicated": 110}}
    view = ClusterView([], 1, 1, [], alerts, [], time.time(), groups, by_broker)
    html = render.cluster_fragment(view)
    assert html.count('class="alarm alert-group"') == 3
    assert 'data-count="110"' in html and "and 102 more" in html


def test_reassignment_rendering() -> None:
    """The reassignment table (a real one completes faster than a poll can catch it)."""
    html = render.reassignments_fragment(
        ReassignmentsView(
            [Reassignment("orders", 0, [1, 2, 3], [2, 3, 4], [1, 2, 3, 4], [4], [1])],
            True,
            [],
            time.time(),
        )
    )
    assert 'data-tp="orders-0"' in html
    assert "<td>4</td><td>1</td>" in html  # adding, removing
    assert "3/3 target replicas in ISR" in html
    assert "--zookeeper" in render.reassignments_fragment(ReassignmentsView([], False, [], 0.0))


def test_bad_input_is_one_clear_line(cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    closed = free_port()  # nobody listens there
    line = one_error_line(run_console("--bootstrap-server", f"127.0.0.1:{closed}"))
    assert f"cannot reach --bootstrap-server 127.0.0.1:{closed}" in line

    assert "not found" in one_error_line(run_console("--data-dir", str(tmp_path)))
    assert "--bootstrap-server" in one_error_line(run_console())
    assert "BROKER_ID=URL" in one_error_line(
        run_console("--bootstrap-server", "127.0.0.1:1", "--metrics-url", "nonsense")
    )

    cluster = cluster_factory(brokers=1)
    assert cluster.zk_connect is not None
    wrong_chroot = cluster.zk_connect.rsplit("/", 1)[0] + "/no-such-chroot"
    line = one_error_line(
        run_console("--bootstrap-server", cluster.bootstrap, "--zookeeper", wrong_chroot)
    )
    assert "wrong chroot?" in line

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_error_line(run_console("--data-dir", str(cluster.data_dir), "--port", str(port)))
        assert f"cannot listen on 127.0.0.1:{port}" in line

    # And the happy path of the same command line: it serves the cluster page.
    with console_process("--bootstrap-server", cluster.bootstrap) as url:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = answer.read().decode()
        assert 'data-broker="1"' in body


def test_a_dead_leader_is_flagged_before_zookeeper_notices(
    cluster_factory: ClusterFactory,
) -> None:
    """The longest session the test ZooKeeper allows (4 s): for that long the state znode
    still names the SIGKILLed leader and its ISR. The console must not show it green, must
    show no sentinel as a number, and must answer promptly throughout."""
    cluster = cluster_factory(brokers=3, zookeeper_session_timeout_ms=4000)
    create_topic(cluster, "orders", partitions=1, rf=3)
    _produce(cluster, "orders", 0, RECORDS)
    gatherer = Gatherer(resolve(None, None, cluster.data_dir)).start()
    try:
        with TestClient(create_app(gatherer)) as http:
            first = wait_until(
                "every replica of orders-0 fresh and caught up",
                lambda: (
                    (v := http.get("/api/topics/orders/0").json())
                    and all(r["fresh"] and r["log_end_offset"] == RECORDS for r in v["replicas"])
                    and v
                ),
                timeout_s=20,
            )
            assert first["partition"]["problems"] == []
            assert all(r["behind"] == 0 for r in first["replicas"] if not r["leader"])
            leader = first["partition"]["leader"]
            cluster.kill(leader, "KILL")
            killed_at = time.time()
            flagged_in: float | None = None
            seen_in_isr = False
            slowest = 0.0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                asked = time.monotonic()
                view = http.get("/api/topics/orders/0").json()
                slowest = max(slowest, time.monotonic() - asked)
                assert view["taken_at"] >= killed_at  # stamped with when it was gathered
                for r in view["replicas"]:
                    for key in ("log_start_offset", "log_end_offset", "high_watermark", "behind"):
                        assert r[key] is None or r[key] >= 0, (key, r)
                    if r["broker"] != leader:
                        continue
                    assert r["answering"] is False and not r["fresh"], r
                    if r["in_isr"]:
                        seen_in_isr = True
                        # In ZooKeeper's ISR, but never shown as a healthy member.
                        assert r["problems"], r
                p = view["partition"]
                for key in ("high_watermark", "log_start_offset"):
                    assert view[key] is None or view[key] >= 0
                if p["leader"] == leader:
                    assert any("leader not answering" in x for x in p["problems"]), p
                    flagged_in = flagged_in or time.time() - killed_at
                if p["leader"] not in (leader, -1) and leader not in p["isr"]:
                    break
            else:
                raise AssertionError("the controller never moved the leadership")
            print(
                f"dead leader in ZooKeeper's ISR seen: {seen_in_isr}; flagged "
                f"{flagged_in if flagged_in is None else round(flagged_in, 2)} s after the "
                f"kill; slowest answer {slowest:.2f} s"
            )
            assert slowest < 5.0
            cluster_view = http.get("/api/cluster").json()
            [dead] = [b for b in cluster_view["brokers"] if b["id"] == leader]
            assert dead["answering"] is False
            page = http.get("/topics/orders/0").text
            assert "-1001" not in page and "-1 " not in page
    finally:
        gatherer.close()


def test_acls_read_only(cluster_factory: ClusterFactory) -> None:
    """ACLs of a cluster with an authorizer: all of them on /acls, those that can apply to
    a topic (literal, prefixed) beside its configs."""
    cluster = cluster_factory(
        brokers=1,
        config={
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    create_topic(cluster, "audit", partitions=1, rf=1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "audit",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            "aud",
            ResourcePatternType.PREFIXED,
            "User:mallory",
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        ),
        AclBinding(
            ResourceType.GROUP,
            "billing",
            ResourcePatternType.LITERAL,
            "User:bob",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    # The console connects as ANONYMOUS: once a topic has ACLs, it needs its own.
    bindings.append(
        AclBinding(
            ResourceType.TOPIC,
            "audit",
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
    )
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    gatherer = Gatherer(resolve(None, None, cluster.data_dir)).start()
    try:
        with TestClient(create_app(gatherer)) as http:
            every = wait_until(
                "the four ACLs listed",
                lambda: len((v := http.get("/api/acls").json())["acls"]) == 4 and v,
                timeout_s=15,
            )
            assert every["unavailable"] is None
            assert {(a["principal"], a["operation"], a["permission"]) for a in every["acls"]} == {
                ("User:alice", "READ", "ALLOW"),
                ("User:mallory", "WRITE", "DENY"),
                ("User:bob", "READ", "ALLOW"),
                ("User:ANONYMOUS", "ALL", "ALLOW"),
            }
            on_topic = http.get("/api/topics/audit/configs").json()["acls"]["acls"]
            assert {a["principal"] for a in on_topic} == {
                "User:alice",
                "User:mallory",
                "User:ANONYMOUS",
            }
            page = http.get("/acls").text
            assert page.count('class="acl"') == 4 and 'data-principal="User:bob"' in page
    finally:
        gatherer.close()


def test_message_browser(cluster_factory: ClusterFactory) -> None:
    """Records by offset and by time, with key, value and headers; an aborted
    transaction's records shown under read_uncommitted and not under read_committed."""
    cluster = cluster_factory(brokers=1)
    create_topic(cluster, "events", partitions=1, rf=1)
    p = producer(cluster)
    for i in range(5):
        p.produce(
            "events",
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=0,
            headers=[("source", b"test"), ("n", str(i).encode())],
        )
    p.produce("events", key=None, value=b"\xff\x00binary", partition=0)
    assert p.flush(30) == 0
    between = int(time.time() * 1000)
    txn = producer(cluster, **{"transactional.id": "console-browser"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("events", value=b"aborted-1", partition=0)
    txn.produce("events", value=b"aborted-2", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    txn.begin_transaction()
    txn.produce("events", value=b"committed-1", partition=0)
    txn.commit_transaction(30)

    gatherer = Gatherer(resolve(None, None, cluster.data_dir)).start()
    try:
        with TestClient(create_app(gatherer)) as http:
            first = http.get("/api/topics/events/0/messages", params={"offset": "0"}).json()
            assert "messages" in first, first
            values = [m["value"]["text"] for m in first["messages"]]
            assert values[:5] == ["v0", "v1", "v2", "v3", "v4"]
            assert "aborted-1" in values and "committed-1" in values
            m0 = first["messages"][0]
            assert (m0["offset"], m0["key"]["text"]) == (0, "k0")
            assert m0["headers"] == [
                ["source", {"text": "test", "size": 4, "binary": False, "cut": False}],
                ["n", {"text": "0", "size": 1, "binary": False, "cut": False}],
            ]
            binary = first["messages"][5]
            assert binary["key"]["text"] is None and binary["value"]["binary"]
            assert binary["value"]["text"].startswith("ff 00")

            committed = http.get(
                "/api/topics/events/0/messages",
                params={"offset": "0", "isolation": "read_committed"},
            ).json()
            values = [m["value"]["text"] for m in committed["messages"]]
            assert "aborted-1" not in values and "aborted-2" not in values
            assert values[-1] == "committed-1" and values[:5] == ["v0", "v1", "v2", "v3", "v4"]

            by_time = http.get(
                "/api/topics/events/0/messages", params={"timestamp": str(between)}
            ).json()
            assert by_time["start"] >= 6
            assert by_time["messages"][0]["value"]["text"] == "aborted-1"

            page = http.get("/topics/events/0/messages", params={"offset": "1", "limit": "2"})
            assert page.status_code == 200 and 'data-src="' not in page.text  # not polled
            assert page.text.count('class="message"') == 2
            assert '<code class="key">k1</code>' in page.text and 'id="next"' in page.text
            bad = http.get("/topics/events/0/messages", params={"offset": "x"})
            assert bad.status_code == 400 and "offset must be a number" in bad.text
            assert 'id="browse"' in bad.text  # the form stays, to fix the field
            assert http.get("/api/topics/events/3/messages").status_code == 404
            when = http.get("/api/topics/events/0/messages", params={"timestamp": "yesterday"})
            assert when.status_code == 400 and "ISO 8601" in when.json()["error"]
    finally:
        gatherer.close()


def test_history_and_charts() -> None:
    history = History(window_s=60)
    history.add("hw", 100.0, 0)
    history.add("hw", 100.2, 5)  # too close to the previous point: dropped
    history.add("hw", 101.0, 50)
    history.add("hw", 103.0, 250)
    history.add("hw", 104.0, 100)  # a new leader with a shorter log
    history.add("hw", 170.0, 400)  # the first points fall out of the window
    assert history.points("hw") == [(170.0, 400)]
    assert rates([(100.0, 0), (101.0, 50), (103.0, 250), (104.0, 100)]) == [
        (101.0, 50.0),
        (103.0, 100.0),
    ]
    svg = render.chart("records/s", [(100.0, 1.0), (101.0, 3.0)], now=102.0)
    assert 'data-points="2"' in svg and "<polyline" in svg and "max 3" in svg
    assert "collecting" in render.chart("ISR size", [], now=102.0)


def test_rates_from_counters() -> None:
    """Per-second rates over at least RATE_WINDOW_S; a counter that appears between two
    scrapes (a follower that became leader) counts from 0; a reset is not negative."""
    scraper = Scraper({})

    def scraped(at: float, counters: dict[str, float]) -> BrokerScrape:
        done = BrokerScrape(1, counters=counters, scraped_at=at, fresh=True)
        scraper._rate(1, done)
        return done

    assert scraped(100.0, {"requests:Fetch": 10.0}).rates == {}
    assert scraped(101.0, {"requests:Fetch": 20.0}).rates == {}  # under the window
    later = scraped(102.0, {"requests:Fetch": 30.0, MESSAGES_IN: 50.0})
    assert later.rates == {"requests:Fetch": 10.0, MESSAGES_IN: 25.0}
    assert scraped(104.0, {"requests:Fetch": 1.0, MESSAGES_IN: 60.0}).rates == {
        "requests:Fetch": 0.0,
        MESSAGES_IN: 5.0,
    }
    scraper.close()


def test_a_paused_follower_in_the_isr_is_flagged_at_once(
    cluster_factory: ClusterFactory,
) -> None:
    """A SIGSTOPped follower keeps its connections open and answers nothing; ZooKeeper
    keeps it in the ISR until its session (4 s) expires. The console flags it from the
    first page after the pause, and its pages keep answering: a silent connection is
    not allowed to turn a page into an error."""
    cluster = cluster_factory(
        brokers=3, zookeeper_session_timeout_ms=4000, replica_lag_time_max_ms=30000
    )
    create_topic(cluster, "orders", partitions=1, rf=3)
    _produce(cluster, "orders", 0, RECORDS)
    gatherer = Gatherer(resolve(None, None, cluster.data_dir)).start()
    stopped: int | None = None
    try:
        with TestClient(create_app(gatherer)) as http:
            first = wait_until(
                "orders-0 fully in sync",
                lambda: (
                    (v := http.get("/api/topics/orders/0").json())
                    and len(v["partition"]["isr"]) == 3
                    and all(r["fresh"] and r["log_end_offset"] == RECORDS for r in v["replicas"])
                    and v
                ),
                timeout_s=20,
            )
            leader = first["partition"]["leader"]
            # It may be the broker the console bootstraps from: its pages must answer.
            stopped = next(b for b in first["partition"]["isr"] if b != leader)
            cluster.kill(stopped, "STOP")
            stopped_at = time.monotonic()
            views = []
            while time.monotonic() - stopped_at < 8:
                view = http.get("/api/topics/orders/0").json()
                assert "partition" in view, view
                views.append((time.monotonic() - stopped_at, view))
            flagged_in_isr = [
                at
                for at, v in views
                if stopped in v["partition"]["isr"]
                and any(
                    f"broker {stopped} is in ZooKeeper's ISR but not answering" in x
                    for x in v["partition"]["problems"]
                )
            ]
            unflagged_in_isr = [
                at
                for at, v in views
                if stopped in v["partition"]["isr"] and not v["partition"]["problems"]
            ]
            print(f"flagged while in ZooKeeper's ISR at {[round(a, 1) for a in flagged_in_isr]}")
            assert flagged_in_isr, [v["partition"] for _at, v in views]
            assert unflagged_in_isr == []
            assert stopped not in views[-1][1]["partition"]["isr"], "the session never expired"
    finally:
        if stopped is not None:
            cluster.kill(stopped, "CONT")
        gatherer.close()


def test_a_stuck_high_watermark_is_flagged_after_hw_stuck_s() -> None:
    stuck = StuckHighWatermarks()
    tp = ("orders", 0)
    assert stuck.observe(tp, hw=10, leo=12, now=100.0) is None  # first sight
    assert stuck.observe(tp, hw=10, leo=13, now=100.0 + HW_STUCK_S - 0.1) is None
    assert stuck.observe(tp, hw=10, leo=14, now=100.0 + HW_STUCK_S) == HW_STUCK_S
    # The HW moved: the clock starts again.
    assert stuck.observe(tp, hw=11, leo=14, now=104.0) is None
    assert stuck.observe(tp, hw=11, leo=14, now=104.0 + HW_STUCK_S + 1) == HW_STUCK_S + 1
    # Caught up (nothing above the HW): not stuck, however long it stays.
    assert stuck.observe(tp, hw=14, leo=14, now=110.0) is None
    assert stuck.observe(tp, hw=14, leo=14, now=200.0) is None
    # Another partition has its own clock.
    assert stuck.observe(("orders", 1), hw=0, leo=5, now=200.0) is None

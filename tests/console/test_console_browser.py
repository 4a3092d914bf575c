"""The console in a real headless Chromium against a real 3-broker cluster (docs/console.md).

The partition page's HW must move while a producer writes — read from the DOM twice
with no reload in between, so it is the page's own polling that updates it — and after
a SIGKILL the cluster page must list the partition as under-replicated within seconds.
Screenshots of each moment go to the test's tmp_path (paths printed).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.cluster.support import create_topic, producer
from tests.conftest import ClusterFactory
from tests.console.support import console_process
from tests.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The cluster's session timeout is 2 s and replica.lag.time.max.ms 1 s: either way the
# ISR loses the killed broker within a few seconds; this leaves room for a busy machine.
URP_WITHIN_S = 20.0


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        pytest.fail(
            f"this test needs Debian's chromium and chromium-driver ({', '.join(missing)} "
            "missing): `apt-get install -y chromium chromium-driver` (or `make system-deps`)",
            pytrace=False,
        )
    # Selenium Manager must never try to download a browser or a driver.
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # we run as root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        pytest.fail(f"headless chromium did not start: {exc.msg}", pytrace=False)
    try:
        yield driver
    finally:
        driver.quit()


def _dom(driver: WebDriver, css: str, attribute: str) -> str | None:
    """An attribute of the element now in the DOM (the live part is swapped every second,
    so an element found a moment ago may be gone)."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].get_attribute(attribute) if found else None
    except StaleElementReferenceException:
        return None


def _hw(driver: WebDriver) -> int | None:
    value = _dom(driver, "#hw", "data-value")
    return int(value) if value else None


def _shot(driver: WebDriver, path: Path) -> None:
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    print(f"screenshot: {path}")


def test_partition_page_live_hw_and_urp_after_kill(
    cluster_factory: ClusterFactory, browser: WebDriver, tmp_path: Path
) -> None:
    cluster = cluster_factory(brokers=3, replica_lag_time_max_ms=1000)
    create_topic(cluster, "orders", partitions=1, rf=3)

    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        p = producer(cluster)
        while not stop.is_set():
            p.produce("orders", value=os.urandom(64), partition=0)
            sent[0] += 1
            p.poll(0)
            time.sleep(0.005)
        p.flush(30)

    writer = threading.Thread(target=produce, daemon=True)
    with console_process("--data-dir", str(cluster.data_dir)) as url:
        writer.start()
        try:
            browser.get(url + "topics/orders/0")
            first = wait_until("the partition page to show a HW", lambda: _hw(browser))
            wait_until(
                "all three replicas drawn with their LEO",
                lambda: all(
                    _dom(browser, f'.replica[data-broker="{b}"]', "data-leo") for b in (1, 2, 3)
                ),
                timeout_s=15,
            )
            _shot(browser, tmp_path / "partition-1.png")
            # No reload: only the page's own polling can change the number.
            second = wait_until(
                f"the HW on the page to grow past {first}",
                lambda: (hw := _hw(browser)) is not None and hw > first and hw,
                timeout_s=15,
            )
            _shot(browser, tmp_path / "partition-2.png")
            assert sent[0] > 0
            print(f"HW on the page: {first} -> {second} ({sent[0]} records sent so far)")

            browser.get(url)
            assert _dom(browser, "#alerts", "id") == "alerts"
            urp_alerts = '.alert-group[data-kind="under-replicated"]'
            assert not browser.find_elements(By.CSS_SELECTOR, urp_alerts)
            cluster.kill(3, "KILL")
            killed_at = time.monotonic()
            wait_until(
                "the cluster page to list orders-0 as under-replicated",
                lambda: (
                    _dom(
                        browser,
                        '.alert-group[data-kind="under-replicated"][data-topic="orders"]'
                        '[data-brokers="3"]',
                        "data-count",
                    )
                    == "1"
                ),
                timeout_s=URP_WITHIN_S,
            )
            print(f"under-replicated on the page {time.monotonic() - killed_at:.1f}s after SIGKILL")
            wait_until(
                "broker 3 shown down",
                lambda: _dom(browser, 'tr[data-broker="3"]', "data-alive") == "false",
                timeout_s=URP_WITHIN_S,
            )
            _shot(browser, tmp_path / "cluster-after-kill.png")

            browser.get(url + "topics/orders/0")
            wait_until(
                "the partition page to show broker 3 out of the ISR",
                lambda: _dom(browser, '.replica[data-broker="3"]', "data-isr") == "false",
                timeout_s=10,
            )
            after = _hw(browser)
            assert after is not None and after >= second
            _shot(browser, tmp_path / "partition-after-kill.png")
        finally:
            stop.set()
            writer.join(timeout=40)


def _leader_of(driver: WebDriver) -> int | None:
    value = _dom(driver, "#leader", "data-value")
    return int(value) if value and int(value) >= 0 else None


def _taken_at(driver: WebDriver) -> float:
    value = _dom(driver, "#taken-at", "data-value")
    return float(value) if value else 0.0


def _timed_get(driver: WebDriver, url: str) -> float:
    started = time.monotonic()
    driver.get(url)
    return time.monotonic() - started


# A page must render this fast even with a broker SIGKILLed (or its znode still there):
# the per-source timeouts are 1.5 s (metrics) and 3 s (protocol), asked side by side.
PROMPT_S = 6.0


def test_new_pages_during_a_broker_kill(
    cluster_factory: ClusterFactory, browser: WebDriver, tmp_path: Path
) -> None:
    """The broker, message, configs, timeline and partition pages in a real browser, and
    the partition page while its leader is SIGKILLed: the dead leader is flagged while
    ZooKeeper (4 s session) still names it, and every page keeps rendering promptly."""
    cluster = cluster_factory(brokers=3, zookeeper_session_timeout_ms=4000)
    create_topic(cluster, "orders", partitions=1, rf=3)
    stop = threading.Event()

    def produce() -> None:
        p = producer(cluster)
        i = 0
        while not stop.is_set():
            p.produce(
                "orders",
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                partition=0,
                headers=[("n", str(i).encode())],
            )
            i += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(30)

    writer = threading.Thread(target=produce, daemon=True)
    with console_process("--data-dir", str(cluster.data_dir)) as url:
        writer.start()
        try:
            browser.get(url + "brokers/1")
            wait_until(
                "broker 1's log dir and request rates",
                lambda: (
                    browser.find_elements(By.CSS_SELECTOR, "tr.log-dir")
                    and browser.find_elements(By.CSS_SELECTOR, "tr.rate")
                ),
                timeout_s=20,
            )
            _shot(browser, tmp_path / "broker-1.png")

            browser.get(url + "topics/orders/0/messages?offset=0&limit=5")
            rows = browser.find_elements(By.CSS_SELECTOR, "tr.message")
            assert [r.get_attribute("data-offset") for r in rows] == ["0", "1", "2", "3", "4"]
            assert browser.find_element(By.CSS_SELECTOR, "code.key").text == "k0"
            browser.find_element(By.CSS_SELECTOR, 'input[value="read_committed"]').click()
            browser.find_element(By.CSS_SELECTOR, "#browse button").click()
            wait_until(
                "the read_committed page", lambda: "isolation=read_committed" in browser.current_url
            )
            assert browser.find_elements(By.CSS_SELECTOR, "tr.message")
            _shot(browser, tmp_path / "messages.png")

            browser.get(url + "topics/orders/configs")
            assert browser.find_elements(By.CSS_SELECTOR, 'tr.config[data-name="retention.ms"]')
            assert "SECURITY_DISABLED" in browser.find_element(By.ID, "acls").text

            browser.get(url + "timeline?event=become-leader")
            events = {
                r.get_attribute("data-event")
                for r in browser.find_elements(By.CSS_SELECTOR, "#timeline tr[data-event]")
            }
            assert events == {"become-leader"}

            browser.get(url + "topics/orders/0")
            wait_until(
                "all three replicas fresh",
                lambda: all(
                    _dom(browser, f'.replica[data-broker="{b}"]', "data-fresh") == "true"
                    for b in (1, 2, 3)
                ),
                timeout_s=20,
            )
            wait_until(
                "the records/s chart to have points",
                lambda: int(_dom(browser, "#chart-records-s--hw-growth", "data-points") or 0) >= 2,
                timeout_s=20,
            )
            leader = wait_until("a leader on the page", lambda: _leader_of(browser))
            _shot(browser, tmp_path / "partition-before-kill.png")

            cluster.kill(leader, "KILL")
            killed_at = time.time()
            wait_until(
                f"broker {leader} flagged not answering on the partition page",
                lambda: (
                    _dom(browser, f'.replica[data-broker="{leader}"]', "data-answering") == "false"
                ),
                timeout_s=PROMPT_S,
            )
            flagged_after = time.time() - killed_at
            problems = _dom(browser, f'.replica[data-broker="{leader}"]', "data-problems") or ""
            shown_leader = _leader_of(browser)
            print(
                f"broker {leader} flagged {flagged_after:.1f}s after SIGKILL; page leader "
                f"{shown_leader}; problems {problems!r}"
            )
            if shown_leader == leader:  # ZooKeeper still names it: it must not look healthy
                assert "leader not answering" in problems
                assert "in sync" not in browser.find_element(By.ID, "status").text
            _shot(browser, tmp_path / "partition-after-kill.png")
            # The page keeps refreshing with current data (not blocked on the dead broker).
            wait_until(
                "the partition page stamped after the kill",
                lambda: _taken_at(browser) > killed_at + 1,
                timeout_s=PROMPT_S,
            )
            new_leader = wait_until(
                "a new leader on the page",
                lambda: (x := _leader_of(browser)) is not None and x != leader and x,
                timeout_s=30,
            )
            _shot(browser, tmp_path / "partition-new-leader.png")

            for page in ("", f"brokers/{leader}", "topics/orders", "topics/orders/0/messages"):
                took = _timed_get(browser, url + page)
                print(f"/{page} rendered in {took:.2f}s with broker {leader} dead")
                assert took < PROMPT_S, f"/{page} took {took:.1f}s"
                assert not browser.find_elements(By.ID, "error"), page
            browser.get(url + f"brokers/{leader}")
            assert _dom(browser, "#broker-state", "data-alive") == "false" or (
                _dom(browser, "#broker-state", "data-answering") == "false"
            )
            browser.get(url)
            wait_until(
                f"the cluster page grouping the alerts on broker {leader}",
                lambda: (
                    _dom(
                        browser,
                        f'.alert-group[data-kind="under-replicated"][data-topic="orders"]'
                        f'[data-brokers="{leader}"]',
                        "data-count",
                    )
                    == "1"
                ),
                timeout_s=20,
            )
            _shot(browser, tmp_path / "cluster-after-kill.png")
            print(f"leader moved {leader} -> {new_leader}")
        finally:
            stop.set()
            writer.join(timeout=40)

# Everything a fresh Debian machine needs, installed by the project itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PIP_VERSION := 26.3
# Every broker and tool the tests start is a new Python process: let it read the
# project's compiled modules instead of compiling them again (some shells set this).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup system-deps demo test test-fast lint bench clean lock

setup: system-deps $(STAMP)

# Debian's zookeeper (never zookeeperd: it starts a system service) and stock kcat;
# prometheus for promtool and the alerting test (tests/monitoring).
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v promtool >/dev/null 2>&1 || ! command -v kcat >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper kcat default-jre-headless nftables iproute2 chromium chromium-driver prometheus systemd >/dev/null; \
	fi

# The locked versions first, then the project itself without resolving anything again.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

# Re-resolve pyproject.toml's pins in a scratch venv and write what it installed.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q pip==$(PIP_VERSION)
	.lock-venv/bin/python -m pip install -q '.[test,bench]'
	head -3 requirements.lock > requirements.lock.new
	.lock-venv/bin/python -m pip freeze --exclude strandline >> requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf .lock-venv

demo: setup
	$(VENV)/bin/strandline demo

# Every tier, its modules spread over three pytest-xdist workers (a module stays on one
# worker, loadfile, so its fixtures are built once): ~12 min on two cores instead of ~25
# one test at a time (TEST_WORKERS=0).
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The pure tier only: the sans-I/O cores, codecs and storage, no processes (under 2 min).
test-fast: setup
	$(PY) -m pytest -q -m pure

lint: setup
	$(VENV)/bin/ruff check strandline tests bench
	$(VENV)/bin/mypy strandline
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

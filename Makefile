# Everything a fresh Debian machine needs, installed by the project itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps demo test lint bench clean

setup: system-deps $(STAMP)

# Debian's zookeeper (never zookeeperd: it starts a system service) and stock kcat.
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v kcat >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper kcat default-jre-headless nftables iproute2 >/dev/null; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/strandline demo

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check strandline tests bench
	$(VENV)/bin/mypy strandline

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Commands of the project; README.md documents them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' deps/kafka/pom.xml)
KAFKA_LIBS := .cache/kafka-$(KAFKA_VERSION)/libs
SPARK_VERSION := $(shell sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' deps/spark/pom.xml)
SPARK_JARS := .cache/spark-kafka-$(SPARK_VERSION)/jars
# What pyspark's wheel lacks: the connector, its token provider, the Kafka client, commons-pool2.
SPARK_JAR_IDS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
PYTEST_ARGS ?=
# pytest-xdist workers of `make test` (0: one process). Each worker starts its own broker; the scheduler in
# tests/conftest.py keeps each test file, and all of tests/spark (one SparkSession), on one worker.
TEST_WORKERS ?= 2

.PHONY: setup lint test test-unit test-streams-protocol demo broker clean chromium bench-peers

setup: $(VENV)/.installed $(KAFKA_LIBS)/.complete $(SPARK_JARS)/.complete chromium

# The dashboard's browser test drives the system chromium (Playwright downloads no browser): installed
# with apt-get when missing and we are root; otherwise that test is skipped (non-fatal).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	    || echo "chromium is missing (not root, or apt-get failed): the dashboard's browser test will be skipped"

$(VENV)/.installed: pyproject.toml streams_core/common/_murmur2.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $@

# Broker jars from Maven Central, copied into a git-ignored cache; re-run only when the pom changes.
$(KAFKA_LIBS)/.complete: deps/kafka/pom.xml
	rm -rf $(KAFKA_LIBS)
	mvn -B -q -f deps/kafka/pom.xml dependency:copy-dependencies \
	    -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	touch $@

# Spark's Kafka connector jars (spark.jars for the Spark runner), the same way; see docs/spark.md.
$(SPARK_JARS)/.complete: deps/spark/pom.xml
	rm -rf $(SPARK_JARS)
	mvn -B -q -f deps/spark/pom.xml dependency:copy-dependencies \
	    -DincludeScope=runtime -DincludeArtifactIds=$(SPARK_JAR_IDS) -DoutputDirectory=$(CURDIR)/$(SPARK_JARS)
	touch $@

# The typing and lint gate: mypy --strict over streams_core/ and api/, ruff over everything.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: setup lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The Python-only integration tests again under group.protocol=streams (KIP-1071; docs/streams-groups.md,
# "The test suite under the streams protocol"); classic-only tests skip with their reason. Not in `test`.
# Left out: the tests that run Java (Kafka Streams itself, Kafka's tools).
STREAMS_PROTOCOL_IGNORE := tests/integration/java tests/integration/test_streams_group_java_parity.py \
    tests/integration/test_streams_group_mixed.py tests/integration/test_streams_group_tool.py
test-streams-protocol: setup
	STREAMS_TEST_GROUP_PROTOCOL=streams $(PY) -m pytest tests/integration -n $(TEST_WORKERS) --dist loadgroup \
	    $(addprefix --ignore=,$(STREAMS_PROTOCOL_IGNORE)) $(PYTEST_ARGS)

broker: setup
	$(PY) -m streams_core.broker --port 9092 --data-dir .cache/demo-broker

demo: setup
	$(PY) -m app demo

# Benchmarks against the peers (bench/peers/, bench/README.md); installs them into .cache/peers. Not in `test`.
# PEERS_ARGS=--quick for a small run.
bench-peers: setup
	$(PY) bench/peers/harness.py $(PEERS_ARGS)

clean:
	rm -rf $(VENV) .cache

"""Shared pytest fixtures.

Kept lean on purpose: unit tests must never start a broker. The local Kafka broker starts lazily,
once per session, only when a test (or a fixture it uses) asks for ``kafka_broker`` or
``bootstrap_servers``; such tests get the ``broker`` marker automatically, so
``pytest -m 'not broker'`` runs everything that needs no broker.

Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) every worker is its own session with
its own broker and, if it runs Spark tests, its own SparkSession; ``xdist_group`` keeps a file's tests
on one worker (module fixtures start once) and all Spark tests on one worker (one SparkSession, started
first as the longest group), and the files of the SASL/SSL broker on one worker too.

``STREAMS_TEST_BOOTSTRAP_SERVERS=host:port`` makes ``bootstrap_servers`` use an already running
broker (e.g. ``python -m streams_core.broker --port 9092 ...``) instead of starting one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from streams_core.broker import LocalKafkaBroker

BROKER_FIXTURES = frozenset({"kafka_broker", "bootstrap_servers", "secure_broker"})
ENV_BOOTSTRAP = "STREAMS_TEST_BOOTSTRAP_SERVERS"


SPARK_DIR = "tests/spark/"
SECURE_FIXTURE = "secure_broker"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that (directly or through other fixtures) uses the broker; group them for xdist."""
    for item in items:
        if BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _group_for_xdist(items)


def _group_for_xdist(items: list[pytest.Item]) -> None:
    """``xdist_group`` of each test (for ``--dist loadgroup``): its file, all of tests/spark as one
    group, the files that use the SASL/SSL broker as another; the Spark group first, so that the
    longest unit of work starts at once and the other worker spreads the rest around it.

    Runs on each worker (xdist collects there); the order must be the same on every worker.
    """
    secured = {item.nodeid.split("::")[0] for item in items if SECURE_FIXTURE in getattr(item, "fixturenames", ())}
    for item in items:
        path = item.nodeid.split("::")[0]
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if path.startswith(SPARK_DIR):
            group = "spark"
        elif path in secured:
            group = "secure-broker"
        else:
            group = path
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: not item.nodeid.startswith(SPARK_DIR))  # stable: the order within stays


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaBroker]:
    """One local KRaft broker for the whole session, always stopped at the end."""
    from streams_core.broker import LocalKafkaBroker

    broker = LocalKafkaBroker(tmp_path_factory.mktemp("kafka-broker"), port=0)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(request: pytest.FixtureRequest) -> str:
    """``host:port`` of the test broker (an external one if $STREAMS_TEST_BOOTSTRAP_SERVERS)."""
    external = os.environ.get(ENV_BOOTSTRAP)
    if external:
        return external
    broker: LocalKafkaBroker = request.getfixturevalue("kafka_broker")
    return broker.bootstrap_servers


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaBroker]:
    """A second local broker that requires SASL/SSL and enforces ACLs (tests/integration/security_kit.py),
    started only by the tests that ask for it."""
    from streams_core.broker import LocalKafkaBroker
    from tests.integration.security_kit import SECURITY

    broker = LocalKafkaBroker(tmp_path_factory.mktemp("secure-broker"), port=0, security=SECURITY)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()

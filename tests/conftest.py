"""Shared pytest fixtures.

Kept lean on purpose: unit tests must never start a broker. The local Kafka broker starts lazily,
once per session, only when a test (or a fixture it uses) asks for ``kafka_broker`` or
``bootstrap_servers``; such tests get the ``broker`` marker automatically, so
``pytest -m 'not broker'`` runs everything that needs no broker.

Under pytest-xdist (``-n 2 --dist loadgroup``) every worker is its own session with its own broker
(and SASL/SSL broker, if its tests ask for one); ``pytest_xdist_make_scheduler`` below keeps a file's
tests on one worker and all Spark tests on one worker (one SparkSession), started first.

``STREAMS_TEST_BOOTSTRAP_SERVERS=host:port`` makes ``bootstrap_servers`` use an already running
broker (e.g. ``python -m streams_core.broker --port 9092 ...``) instead of starting one.
``STREAMS_TEST_GROUP_PROTOCOL=streams`` runs the tests under the streams rebalance protocol
(``make test-streams-protocol``; tests/integration/group_protocol.py says how).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from aiokafka.admin import AIOKafkaAdminClient

    from streams_core.broker import LocalKafkaBroker

BROKER_FIXTURES = frozenset({"kafka_broker", "bootstrap_servers", "secure_broker"})
ENV_BOOTSTRAP = "STREAMS_TEST_BOOTSTRAP_SERVERS"


STREAMS_GROUP_TEST_TIMINGS: dict[str, str | int | bool] = {
    "group.streams.initial.rebalance.delay.ms": 0,
    "group.streams.min.heartbeat.interval.ms": 200,
    "group.streams.heartbeat.interval.ms": 500,
    "group.streams.min.session.timeout.ms": 3000,
    "group.streams.session.timeout.ms": 10000,
}
"""The test broker's streams-group timings (KIP-1071), shorter than the broker's defaults (no initial
delay instead of 3 s, heartbeats every 0.5 s instead of 5 s, a 10 s session instead of 45 s), as the
classic tests shorten theirs with client settings: the streams protocol takes them from the broker.
docs/streams-groups.md ("The broker") gives the defaults and what they cost."""

SPARK_DIR = "tests/spark/"
SPARK_OWN_PROCESSES = frozenset({"tests/spark/test_cli_and_cluster.py", "tests/spark/test_killed_runs.py"})
"""Files of tests/spark whose Spark runs in processes of their own (the CLI, a standalone cluster,
the jobs killed with SIGKILL), never in the session's SparkSession: under xdist each is a unit of
work of its own, beside the Spark group (checked at collection)."""


def pytest_configure(config: pytest.Config) -> None:
    """``STREAMS_TEST_GROUP_PROTOCOL=streams``: this process's configs default to the streams protocol
    (tests/integration/group_protocol.py; ``make test-streams-protocol``)."""
    from tests.integration.group_protocol import use_group_protocol_under_test

    use_group_protocol_under_test()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that (directly or through other fixtures) uses the broker; under xdist, Spark first."""
    for item in items:
        if BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for item in items:
            if _file(item.nodeid) in SPARK_OWN_PROCESSES and "spark" in getattr(item, "fixturenames", ()):
                raise pytest.UsageError(f"{item.nodeid} uses the SparkSession: take its file out of SPARK_OWN_PROCESSES")
        # The longest units of work (the Spark group, see below, then the Spark CLI's) start at once;
        # the rest spreads around them. Stable sort: the order within stays; the same on every worker.
        items.sort(key=lambda item: (_scope(item.nodeid) != "spark", _file(item.nodeid) not in SPARK_OWN_PROCESSES))


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _scope(nodeid: str) -> str:
    """The xdist unit of work of a test: its file, or "spark" for the files that use the SparkSession."""
    path = _file(nodeid)
    return "spark" if path.startswith(SPARK_DIR) and path not in SPARK_OWN_PROCESSES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: a test file is a unit of work (its module fixtures start once), and so is
    all of tests/spark that uses the SparkSession (one session per run, not one per worker).

    Our own scheduler rather than ``xdist_group`` marks: xdist 3.8 names a test's group by rewriting
    ``item._nodeid``, which pytest 9.2's nodes no longer read, so the marks group nothing.
    """
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return SuiteScheduling(config, log)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaBroker]:
    """One local KRaft broker for the whole session, always stopped at the end."""
    from streams_core.broker import LocalKafkaBroker

    broker = LocalKafkaBroker(tmp_path_factory.mktemp("kafka-broker"), port=0, overrides=STREAMS_GROUP_TEST_TIMINGS)
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


@pytest.fixture
async def admin(bootstrap_servers: str) -> AsyncIterator[AIOKafkaAdminClient]:
    """A plain aiokafka admin client on the test broker (a test file may define its own `admin`)."""
    from aiokafka.admin import AIOKafkaAdminClient

    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


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


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Whatever a test configures (`app.logs.configure_logging`), the root logger and the named ones
    it sets come back: a level left behind silences another test's `caplog` on the same worker."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {name: logging.getLogger(name).level for name in ("aiokafka", "httpx")}
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
        logging.captureWarnings(False)

"""Fixtures of the Spark runner tests: one local[2] SparkSession for the whole test session.

The session is built lazily (only Spark tests pay its start-up), UI off and bound to 127.0.0.1,
with the Kafka connector jars `make setup` fetched; it is stopped at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

SPARK_TEST_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from streams_core.spark import build_session

    session = build_session(SPARK_TEST_CONF, app_name="streams-core-tests")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()

"""The Spark runner against the broker that requires SASL_SSL and ACLs: its Kafka source and sink
take `kafka.security.protocol`, `kafka.sasl.jaas.config` and the PEM truststore derived from the
same properties as the asyncio runtime's clients (docs/security.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.wordcount import build_topology
from streams_core.broker import LocalKafkaBroker
from streams_core.spark import SparkRunner
from streams_core.tools.acls import application_acls
from tests.integration.security_kit import LINES, expected_counts, grant, make_topics, produce_lines, read_counts
from tests.kafka_utils import unique_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_spark_word_count_over_sasl_ssl_with_least_privilege(
    secure_broker: LocalKafkaBroker, spark: Any, tmp_path: Path
) -> None:
    """User:dave (SCRAM-SHA-512) holding only the application's ACLs: the Spark word count is exact."""
    app_id, source, sink = unique_topic("spark-sec"), unique_topic("lines"), unique_topic("counts")
    await make_topics(secure_broker, [source, sink])
    await grant(secure_broker, application_acls(app_id, "User:dave", input_topics=[source], output_topics=[sink]))
    await produce_lines(secure_broker, source, LINES)
    config = {"application.id": app_id, **secure_broker.client_config("SASL_SSL", user="dave")}
    runner = SparkRunner(build_topology(source, sink, windowed=False), config, spark=spark)
    options = runner._kafka_options("consumer")
    assert options["kafka.security.protocol"] == "SASL_SSL" and "ScramLoginModule" in options["kafka.sasl.jaas.config"]
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    expected = expected_counts(LINES)
    assert await read_counts(secure_broker, sink, expected, timeout=20) == expected

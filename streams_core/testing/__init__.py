"""testing package."""

from streams_core.testing.fake_kafka import FakeKafkaClientSupplier, FakeKafkaCluster

__all__ = ["FakeKafkaClientSupplier", "FakeKafkaCluster"]

"""The local Kafka broker: a real single-node KRaft broker from Maven Central jars (docs/broker.md).

A product module: ``python -m app`` starts one when given no ``--bootstrap-servers``, the demo
runs on one, and users' integration tests can start one with ``LocalKafkaBroker``.
"""

from streams_core.broker.installation import BrokerError, find_kafka_libs
from streams_core.broker.local_kafka_broker import LocalKafkaBroker
from streams_core.broker.probe import probe_metadata
from streams_core.broker.security import BrokerSecurity, SecurityMaterial
from streams_core.broker.server_config import DEFAULT_JVM_OPTS

__all__ = [
    "DEFAULT_JVM_OPTS",
    "BrokerError",
    "BrokerSecurity",
    "LocalKafkaBroker",
    "SecurityMaterial",
    "find_kafka_libs",
    "probe_metadata",
]

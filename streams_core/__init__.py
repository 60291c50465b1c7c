"""streams_core: Kafka Streams for Python.

Everything a user imports comes from here: the Processor API, the DSL, stores, serdes, the
configuration, the KafkaStreams runtime and the TopologyTestDriver.
"""

from streams_core.config import StreamsConfig
from streams_core.errors import (
    ConfigError,
    DeserializationError,
    InvalidStateStoreError,
    ProcessorStateError,
    SerializationError,
    StreamsError,
    TopologyError,
    UnknownStateStoreError,
)
from streams_core.serde import Serde, Serdes

__all__ = [
    "ConfigError",
    "DeserializationError",
    "InvalidStateStoreError",
    "ProcessorStateError",
    "SerializationError",
    "Serde",
    "Serdes",
    "StreamsConfig",
    "StreamsError",
    "TopologyError",
    "UnknownStateStoreError",
]

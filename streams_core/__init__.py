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
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.processor.processor import (
    Cancellable,
    Headers,
    Processor,
    ProcessorContext,
    ProcessorSupplier,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
)
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.task_id import TaskId
from streams_core.processor.timestamp_extractor import (
    FailOnInvalidTimestamp,
    LogAndSkipOnInvalidTimestamp,
    TimestampExtractor,
    UsePartitionTimeOnInvalidTimestamp,
    WallclockTimestampExtractor,
)
from streams_core.processor.topic_name_extractor import RecordContext, TopicNameExtractor
from streams_core.processor.topology import Topology
from streams_core.processor.topology_description import TopologyDescription
from streams_core.serde import Serde, Serdes
from streams_core.state import (
    KeyValue,
    KeyValueStore,
    ReadOnlyKeyValueStore,
    ReadOnlySessionStore,
    ReadOnlyWindowStore,
    SessionStore,
    SessionWindow,
    StateStore,
    StoreBuilder,
    Stores,
    TimeWindow,
    Window,
    WindowStore,
    Windowed,
)
from streams_core.runtime.kafka_streams import KafkaStreams, State, StreamThreadExceptionResponse
from streams_core.runtime.assignment import HostInfo, KeyQueryMetadata, StreamsMetadata
from streams_core.testing.test_input_topic import TestInputTopic
from streams_core.testing.test_output_topic import TestOutputTopic
from streams_core.testing.test_record import TestRecord
from streams_core.testing.topology_test_driver import TopologyTestDriver

__all__ = [
    "Cancellable",
    "ConfigError",
    "ConsumerRecord",
    "DeserializationError",
    "FailOnInvalidTimestamp",
    "Headers",
    "HostInfo",
    "InvalidStateStoreError",
    "KafkaStreams",
    "KeyQueryMetadata",
    "KeyValue",
    "KeyValueStore",
    "LogAndSkipOnInvalidTimestamp",
    "Processor",
    "ProcessorContext",
    "ProcessorStateError",
    "ProcessorSupplier",
    "PunctuationType",
    "Punctuator",
    "ReadOnlyKeyValueStore",
    "ReadOnlySessionStore",
    "ReadOnlyWindowStore",
    "Record",
    "RecordContext",
    "RecordMetadata",
    "Serde",
    "Serdes",
    "SerializationError",
    "SessionStore",
    "SessionWindow",
    "State",
    "StateStore",
    "StoreBuilder",
    "Stores",
    "StreamPartitioner",
    "StreamThreadExceptionResponse",
    "StreamsConfig",
    "StreamsError",
    "StreamsMetadata",
    "TaskId",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TimeWindow",
    "TimestampExtractor",
    "TopicNameExtractor",
    "Topology",
    "TopologyDescription",
    "TopologyError",
    "TopologyTestDriver",
    "UnknownStateStoreError",
    "UsePartitionTimeOnInvalidTimestamp",
    "WallclockTimestampExtractor",
    "Window",
    "WindowStore",
    "Windowed",
]

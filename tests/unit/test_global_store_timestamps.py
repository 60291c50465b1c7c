"""A global store is updated with each record's own timestamp: Kafka Streams' GlobalStateUpdateTask
runs no timestamp extractor (and so drops no record for a negative extracted timestamp)."""

from __future__ import annotations

from streams_core import Materialized, Serdes, StreamsBuilder, TopologyTestDriver
from streams_core.processor.consumer_record import ConsumerRecord

S = Serdes.String()


def test_a_global_table_keeps_each_records_own_timestamp_whatever_its_extractor() -> None:
    extracted: list[int] = []

    def extractor(record: ConsumerRecord, partition_time: int) -> int:
        extracted.append(record.timestamp)
        return -1  # a stream task would drop every record with this

    builder = StreamsBuilder()
    builder.global_table("ref", Materialized.as_("ref-store"), key_serde=S, value_serde=S, timestamp_extractor=extractor)
    builder.stream("in", key_serde=S, value_serde=S).to("out")
    with TopologyTestDriver(builder.build(), {"application.id": "global-ts"}) as driver:
        driver.create_input_topic("ref", S, S).pipe_input("k", "v", timestamp=42)
        stored = driver.get_timestamped_key_value_store("ref-store").get("k")
        assert (stored.value, stored.timestamp) == ("v", 42)
        assert extracted == [], "a global store's update runs no extractor"
        assert driver.dropped_records == 0

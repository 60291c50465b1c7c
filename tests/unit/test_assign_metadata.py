"""HostInfo, StreamsMetadata and StreamsMetadataState (KIP-67 discovery)."""

from __future__ import annotations

import pytest

from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition as TP
from streams_core.errors import UnknownStateStoreError
from streams_core.runtime.assignment import HostInfo, KeyQueryMetadata, StreamsMetadata, StreamsMetadataState

H1, H2, H3 = HostInfo("h1", 7070), HostInfo("h2", 7070), HostInfo("h3", 7071)


def test_host_info_parse_and_str() -> None:
    assert HostInfo.parse("localhost:7070") == HostInfo("localhost", 7070)
    assert HostInfo.parse("[::1]:80") == HostInfo("::1", 80)
    assert str(HostInfo("::1", 80)) == "[::1]:80" and str(H1) == "h1:7070"
    for bad in ("localhost", ":80", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError, match="host:port"):
            HostInfo.parse(bad)
    assert HostInfo.unavailable() == HostInfo("unavailable", -1)


def state() -> StreamsMetadataState:
    metadata = StreamsMetadataState(
        {"counts": {"words-repartition"}, "joined": {"left", "right"}, "other": {"z"}}, this_host=H1
    )
    metadata.on_change(
        {
            H1: {TP("words-repartition", 0), TP("left", 0), TP("right", 0)},
            H2: {TP("words-repartition", 1), TP("words-repartition", 2), TP("left", 1), TP("right", 1)},
        },
        {H3: {TP("words-repartition", 0), TP("words-repartition", 1)}, H1: {TP("left", 1), TP("right", 1)}},
        {"words-repartition": 3, "left": 2, "right": 2},
    )
    return metadata


def test_not_available_before_the_first_assignment() -> None:
    metadata = StreamsMetadataState({"counts": {"t"}})
    assert not metadata.is_initialized
    assert metadata.all_metadata() == []
    assert metadata.metadata_for_key("counts", b"k") is StreamsMetadata.NOT_AVAILABLE
    assert metadata.query_metadata_for_key("counts", b"k") is KeyQueryMetadata.NOT_AVAILABLE
    assert state().metadata_for_key("counts", b"k") is not StreamsMetadata.NOT_AVAILABLE
    assert StreamsMetadata.NOT_AVAILABLE.host == "unavailable" and StreamsMetadata.NOT_AVAILABLE.port == -1


def test_all_metadata() -> None:
    metadata = state().all_metadata()
    assert [m.host_info for m in metadata] == [H1, H2, H3]
    h1, h2, h3 = metadata
    assert h1.state_store_names == {"counts", "joined"}
    assert h1.standby_state_store_names == {"joined"}
    assert h2.topic_partitions == {
        TP("words-repartition", 1), TP("words-repartition", 2), TP("left", 1), TP("right", 1)
    }
    assert h3.state_store_names == frozenset() and h3.standby_state_store_names == {"counts"}
    assert state().local_metadata() == h1


def test_all_metadata_for_store() -> None:
    metadata = state()
    assert [m.host_info for m in metadata.all_metadata_for_store("counts")] == [H1, H2, H3]
    assert [m.host_info for m in metadata.all_metadata_for_store("joined")] == [H1, H2]
    assert metadata.all_metadata_for_store("other") == []
    with pytest.raises(UnknownStateStoreError, match="nope"):
        metadata.all_metadata_for_store("nope")


def test_metadata_for_key_uses_the_producer_partition() -> None:
    metadata = state()
    seen = set()
    for i in range(40):
        key = f"word-{i}".encode()
        partition = default_partition(key, 3)
        seen.add(partition)
        query = metadata.query_metadata_for_key("counts", key)
        assert query.partition == partition
        assert query.active_host == (H1 if partition == 0 else H2)
        assert query.standby_hosts == ({H3} if partition in (0, 1) else frozenset())
        assert metadata.metadata_for_key("counts", key).host_info == query.active_host
    assert seen == {0, 1, 2}


def test_custom_partitioner_gets_topic_with_most_partitions() -> None:
    calls = []

    def partitioner(topic: str, key: object, value: object, num_partitions: int) -> int:
        calls.append((topic, key, value, num_partitions))
        return 1

    metadata = state()
    query = metadata.query_metadata_for_key("joined", "any-key", partitioner)
    assert calls == [("left", "any-key", None, 2)]
    assert query == KeyQueryMetadata(H2, frozenset({H1}), 1)


def test_key_must_be_bytes_without_partitioner() -> None:
    with pytest.raises(TypeError, match="bytes"):
        state().metadata_for_key("counts", "text")


def test_unknown_partition_count_or_owner_is_not_available() -> None:
    metadata = state()
    assert metadata.metadata_for_key("other", b"k") is StreamsMetadata.NOT_AVAILABLE
    metadata.on_change({H1: {TP("words-repartition", 0)}}, {}, {"words-repartition": 3})
    key = next(f"k{i}".encode() for i in range(100) if default_partition(f"k{i}".encode(), 3) == 2)
    assert metadata.metadata_for_key("counts", key) is StreamsMetadata.NOT_AVAILABLE
    assert metadata.query_metadata_for_key("counts", key) == KeyQueryMetadata(HostInfo.UNAVAILABLE, frozenset(), 2)


def test_unknown_store_for_key() -> None:
    with pytest.raises(UnknownStateStoreError):
        state().metadata_for_key("nope", b"k")

"""KafkaStreams on the fake cluster: processing and output, internal topics, state, client states."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams_core import (
    JoinWindows,
    KafkaStreams,
    Materialized,
    MissingSourceTopicError,
    Serdes,
    StreamsBuilder,
    TimeWindows,
)
from streams_core.common.partitioner import default_partition
from streams_core.testing import FakeKafkaCluster

from .harness import (
    APP,
    CHANGELOG,
    Instance,
    counting_topology,
    counts,
    eventually,
    passthrough_topology,
    produce_words,
    running,
    streams_config,
    unlong,
)


def cluster_with(*topics: tuple[str, int]) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for name, partitions in topics:
        cluster.create_topic(name, partitions)
    return cluster


async def test_passthrough_copies_keys_values_timestamps_and_headers(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 1), ("out", 1))
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)):
        cluster.produce("in", b"k1", b"v1", timestamp=11, headers=[("h", b"1")])
        cluster.produce("in", b"k2", b"v2", timestamp=12)
        await eventually(lambda: len(cluster.records("out")) == 2, what="output")
    out = cluster.records("out")
    assert [(r.key, r.value, r.timestamp, r.headers) for r in out] == [
        (b"k1", b"v1", 11, (("h", b"1"),)),
        (b"k2", b"v2", 12, ()),
    ]


async def test_output_is_partitioned_by_murmur2_of_the_key(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 1), ("out", 4))
    keys = [f"key-{i}".encode() for i in range(12)]
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)):
        for key in keys:
            cluster.produce("in", key, b"v")
        await eventually(lambda: len(cluster.records("out")) == 12, what="output")
    assert {r.key: r.partition for r in cluster.records("out")} == {k: default_partition(k, 4) for k in keys}


async def test_one_task_per_input_partition_and_order_kept_per_partition(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 3), ("out", 3))
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)) as app:
        assert {str(t) for t in app.tasks()} == {"0_0", "0_1", "0_2"}
        for i in range(30):
            cluster.produce("in", b"k%d" % (i % 5), b"%d" % i, timestamp=i)
        await eventually(lambda: len(cluster.records("out")) == 30, what="output")
    by_key: dict[bytes | None, list[int]] = {}
    for r in cluster.records("out"):
        by_key.setdefault(r.key, []).append(int(r.value or b"0"))
    assert all(values == sorted(values) for values in by_key.values())


async def test_counts_in_store_changelog_and_interactive_query(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 1), ("out", 1))
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        produce_words(cluster, "a b a c a")
        await eventually(lambda: len(cluster.records("out")) == 5, what="output")
        assert app.streams.store("counts").get("a") == 3
        await eventually(lambda: len(cluster.records(CHANGELOG)) == 5, what="changelog")
    assert counts(cluster) == {"a": 3, "b": 1, "c": 1}
    changelog = {(r.key or b"").decode(): unlong(r.value) for r in cluster.records(CHANGELOG)}
    assert changelog == {"a": 3, "b": 1, "c": 1}


async def test_internal_topics_are_created_with_the_source_partition_count(tmp_path: Path) -> None:
    cluster = cluster_with(("words", 2), ("counts-out", 2))
    builder = StreamsBuilder()
    (builder.stream("words", key_serde=Serdes.String(), value_serde=Serdes.String())
     .group_by(lambda key, value: value)
     .count(Materialized.as_("word-count"))
     .to_stream().to("counts-out", value_serde=Serdes.Long()))
    async with running(cluster, builder.build(), streams_config(tmp_path)):
        assert cluster.partition_count(f"{APP}-word-count-changelog") == 2
        assert cluster.topic_config(f"{APP}-word-count-changelog")["cleanup.policy"] == "compact"
        assert cluster.partition_count(f"{APP}-word-count-repartition") == 2
        for i, word in enumerate("x y x z x y".split()):
            cluster.produce("words", f"line{i}", word, timestamp=i)
        await eventually(lambda: counts(cluster, "counts-out").get("x") == 3, what="repartitioned counts")
    assert counts(cluster, "counts-out") == {"x": 3, "y": 2, "z": 1}


async def test_internal_topics_carry_kafka_streams_topic_configs(tmp_path: Path) -> None:
    """As Java's InternalTopicConfig subclasses: repartition topics kept forever in 50 MB segments,
    window changelogs compacted and deleted a day past the store's retention, join stores (which
    keep duplicates) deleted only, key-value changelogs compacted; CreateTime on all."""
    cluster = cluster_with(("words", 1), ("other", 1), ("out", 1))
    builder = StreamsBuilder()
    words = builder.stream("words", key_serde=Serdes.String(), value_serde=Serdes.String())
    other = builder.stream("other", key_serde=Serdes.String(), value_serde=Serdes.String())
    words.group_by(lambda key, value: value).count(Materialized.as_("word-count"))
    (words.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000))
     .count(Materialized.as_("windowed").with_retention(3_600_000)))  # fmt: skip
    words.join(other, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(1_000)).to("out")
    async with running(cluster, builder.build(), streams_config(tmp_path)):
        repartition = cluster.topic_config(f"{APP}-word-count-repartition")
        assert repartition == {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                               "message.timestamp.type": "CreateTime"}  # fmt: skip
        assert cluster.topic_config(f"{APP}-word-count-changelog") == {
            "cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}  # fmt: skip
        windowed = cluster.topic_config(f"{APP}-windowed-changelog")
        assert (windowed["cleanup.policy"], windowed["retention.ms"]) == ("compact,delete", str(3_600_000 + 86_400_000))
        joins = [t for t in cluster.topics() if "-JOINTHIS-" in t or "-JOINOTHER-" in t]
        assert len(joins) == 2 and all(cluster.topic_config(t)["cleanup.policy"] == "delete" for t in joins), joins


async def test_topic_prefixed_settings_configure_every_internal_topic_below_a_stores_log_config(tmp_path: Path) -> None:
    """Kafka Streams' `topic.` settings: above the library defaults, below a store's log config; a windowed
    changelog's computed retention is set unless the store's log config sets it (a `topic.` setting does not)."""
    cluster = cluster_with(("words", 1))
    builder = StreamsBuilder()
    words = builder.stream("words", key_serde=Serdes.String(), value_serde=Serdes.String())
    words.group_by(lambda key, value: value).count(Materialized.as_("word-count").with_logging_enabled({"segment.ms": "9"}))
    (words.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000))
     .count(Materialized.as_("windowed").with_retention(3_600_000)))  # fmt: skip
    topic = {"topic.segment.ms": 600_000, "topic.retention.ms": "5", "topic.cleanup.policy": "compact", "topic.preallocate": True}
    async with running(cluster, builder.build(), streams_config(tmp_path, topic)):
        assert cluster.topic_config(f"{APP}-word-count-repartition") == {
            "cleanup.policy": "compact", "segment.bytes": "52428800", "retention.ms": "5", "segment.ms": "600000",
            "preallocate": "true", "message.timestamp.type": "CreateTime"}  # fmt: skip
        assert cluster.topic_config(f"{APP}-word-count-changelog") == {
            "cleanup.policy": "compact", "segment.ms": "9", "retention.ms": "5", "preallocate": "true",
            "message.timestamp.type": "CreateTime"}  # fmt: skip
        windowed = cluster.topic_config(f"{APP}-windowed-changelog")
        assert (windowed["retention.ms"], windowed["segment.ms"]) == (str(3_600_000 + 86_400_000), "600000")


async def test_window_changelog_retention_follows_the_additional_retention_setting(tmp_path: Path) -> None:
    cluster = cluster_with(("words", 1))
    builder = StreamsBuilder()
    (builder.stream("words", key_serde=Serdes.String(), value_serde=Serdes.String()).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count(Materialized.as_("windowed").with_retention(3_600_000)))  # fmt: skip
    config = streams_config(tmp_path, {"windowstore.changelog.additional.retention.ms": 5_000})
    async with running(cluster, builder.build(), config):
        assert cluster.topic_config(f"{APP}-windowed-changelog")["retention.ms"] == str(3_600_000 + 5_000)


async def test_missing_source_topic_fails_start(tmp_path: Path) -> None:
    cluster = cluster_with(("out", 1))
    instance = Instance(cluster, passthrough_topology(), streams_config(tmp_path))
    with pytest.raises(MissingSourceTopicError):
        await instance.streams.start()
    await instance.close()


async def test_state_listener_sees_the_lifecycle(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 1), ("out", 1))
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)) as app:
        pass
    assert app.states == [
        ("CREATED", "REBALANCING"),
        ("REBALANCING", "RUNNING"),
        ("RUNNING", "PENDING_SHUTDOWN"),
        ("PENDING_SHUTDOWN", "NOT_RUNNING"),
    ]
    assert app.streams.state is KafkaStreams.State.NOT_RUNNING


async def test_close_commits_final_offsets_and_leaves_the_group(tmp_path: Path) -> None:
    cluster = cluster_with(("in", 2), ("out", 2))
    config = streams_config(tmp_path, {"commit.interval.ms": 60_000})
    async with running(cluster, passthrough_topology(), config) as app:
        for i in range(10):
            cluster.produce("in", b"k%d" % i, b"v")
        await eventually(lambda: len(cluster.records("out")) == 10, what="output")
        assert cluster.committed(APP) == {}, "no commit before the interval"
        assert cluster.members(APP) == [app.supplier.main_consumers[0].member_id]
    assert cluster.committed(APP) == cluster.end_offsets("in")
    assert cluster.members(APP) == []
    assert all(p.stopped for p in app.supplier.producers)


async def test_records_the_dsl_drops_count_in_the_thread_metrics(tmp_path: Path) -> None:
    """A record too late for its window (grace 0) is dropped by the windowed count and counted."""
    from streams_core import TimeWindows

    cluster = cluster_with(("in", 1), ("out", 1))
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count(Materialized.as_("windowed"))
    )
    async with running(cluster, builder.build(), streams_config(tmp_path)) as app:
        cluster.produce("in", b"k", b"v", timestamp=100)
        cluster.produce("in", b"k", b"v", timestamp=5)  # its window [0, 10) closed at stream time 100
        await eventually(lambda: app.streams.metrics()["threads"][0]["dropped_records"] == 1, what="one drop")

"""KafkaStreams.store_partitions: the source partitions of a store's tasks, which a gathered REST scan
must find on the hosts of the metadata (api/scans.py).

Under the classic protocol the assignor's host map names every one of them whenever the instance is
RUNNING, through a join and a leave: the scan's coverage check never refuses there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams_core import InvalidStateStoreError, KafkaStreams, UnknownStateStoreError
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaClientSupplier

from .harness import Instance, cluster_with, counting_topology, eventually, start_counting, streams_config

PARTITIONS = 4
IN_PARTITIONS = frozenset(TopicPartition("in", p) for p in range(PARTITIONS))
CLASSIC = {"group.protocol": "classic"}


def uncovered(instance: Instance) -> frozenset[TopicPartition]:
    """The store's partitions that the instance's metadata puts on no host."""
    hosts = instance.streams.all_metadata_for_store("counts")
    return instance.streams.store_partitions("counts") - frozenset().union(*(m.topic_partitions for m in hosts))


def test_unknown_store_and_partition_counts_before_start(tmp_path: Path) -> None:
    cluster = cluster_with(PARTITIONS)
    streams = KafkaStreams(counting_topology(), streams_config(tmp_path), client_supplier=FakeKafkaClientSupplier(cluster))
    with pytest.raises(UnknownStateStoreError):
        streams.store_partitions("nope")
    with pytest.raises(InvalidStateStoreError, match="partition counts"):
        streams.store_partitions("counts")


async def test_the_classic_host_map_covers_every_partition_whenever_running(tmp_path: Path) -> None:
    cluster = cluster_with(PARTITIONS)
    first = await start_counting(cluster, tmp_path, 0, {**CLASSIC, "application.server": "127.0.0.1:9000"})
    await first.wait_running()
    assert first.streams.store_partitions("counts") == IN_PARTITIONS
    assert not uncovered(first)

    gaps: list[tuple[str, frozenset[TopicPartition]]] = []
    second = await start_counting(cluster, tmp_path, 1, {**CLASSIC, "application.server": "127.0.0.1:9001"})

    def watch() -> bool:
        for name, instance in (("first", first), ("second", second)):
            if instance.streams.state is KafkaStreams.State.RUNNING and uncovered(instance):
                gaps.append((name, uncovered(instance)))
        return (
            all(i.streams.state is KafkaStreams.State.RUNNING for i in (first, second))
            and len(first.tasks()) == len(second.tasks()) == PARTITIONS // 2
        )

    await eventually(watch, timeout=5, what="the split")
    assert not gaps, f"a RUNNING instance's map left partitions on no host: {gaps}"
    assert {tp.partition for m in first.streams.all_metadata_for_store("counts") for tp in m.topic_partitions} == set(
        range(PARTITIONS)
    )
    await first.close()
    await eventually(lambda: second.streams.state is KafkaStreams.State.RUNNING and len(second.tasks()) == PARTITIONS,
                     what="the second running every task")  # fmt: skip
    assert not uncovered(second)
    await second.close()

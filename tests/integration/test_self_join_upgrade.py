"""`single.store.self.join` across restarts, against the real broker.

Translated from Kafka Streams' SelfJoinUpgradeIntegrationTest (streams/src/test/java/org/apache/
kafka/streams/integration/): an application joining a stream with itself runs, stops, and runs
again with the optimization on (an upgrade) or on both times (a restart); the records of the first
run still join with the new ones, because the optimized join keeps the unoptimized this-side
store and changelog. The second run here also starts on an empty state directory, so that store
is rebuilt from its changelog, which the unoptimized run wrote.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from streams_core import Consumed, JoinWindows, Produced, Serdes, StreamsBuilder, Topology
from tests.integration.apps.counting_app import streams_config
from tests.integration.apps.harness import running_instance, wait_all_committed
from tests.integration.group_protocol import classic_only
from tests.kafka_utils import Rec, consume_until, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()


def self_join_topology(source: str, output: str, props: dict[str, Any] | None) -> Topology:
    """The test's topology: `left.join(left, (v, v2) -> v + v2, ofTimeDifferenceWithNoGrace(100 min))`."""
    builder = StreamsBuilder()
    left = builder.stream(source, Consumed.with_(S, S))
    left.join(left, lambda v1, v2: v1 + v2, JoinWindows.of_time_difference_without_grace(100 * 60_000)).to(
        output, Produced.with_(S, S))
    return builder.build(props)


@pytest.mark.parametrize("first", [
    pytest.param({"topology.optimization": "none"}, id="upgrade-with-optimization-off", marks=classic_only(
        "the upgrade changes the topology, and the streams group coordinator (Kafka 4.3.1) refuses a topology other "
        "than the group's: INVALID_REQUEST 'Topology updates are not supported yet' (docs/streams-groups.md, "
        "'Differences from Kafka Streams')")),
    pytest.param({"topology.optimization": "all"}, id="restart-with-optimization-on"),
])  # fmt: skip
async def test_the_self_join_keeps_its_state_when_optimized(bootstrap_servers: str, tmp_path: Path,
                                                            first: dict[str, Any]) -> None:  # fmt: skip
    """SelfJoinUpgradeIntegrationTest.shouldUpgradeWithTopologyOptimizationOff and
    shouldRestartWithTopologyOptimizationOn: "A", "B", then after the restart "C", all of key "1"."""
    source, output, app_id = unique_topic("self-join-in"), unique_topic("self-join-out"), unique_topic("self-join")
    await create_topic(bootstrap_servers, source, 1)
    await create_topic(bootstrap_servers, output, 1)
    now = int(time.time() * 1000)

    async def send(value: str, timestamp: int) -> None:
        await produce(bootstrap_servers, source, [Rec(b"1", value.encode(), timestamp_ms=timestamp)])

    async def joined(count: int) -> list[tuple[str, int]]:
        records = await consume_until(bootstrap_servers, output, count, timeout=60)
        return [(r.value.decode(), r.timestamp) for r in records if r.value is not None]

    config = streams_config(bootstrap_servers, app_id, tmp_path / "a", extra={"commit.interval.ms": 100})
    async with running_instance(self_join_topology(source, output, first), config):
        await send("A", now + 42)
        assert await joined(1) == [("AA", now + 42)]
        await send("B", now + 43)
        assert await joined(4) == [("AA", now + 42), ("BA", now + 43), ("AB", now + 43), ("BB", now + 43)]
        await wait_all_committed(bootstrap_servers, app_id, source)

    optimized = self_join_topology(source, output, {"topology.optimization": "all"})
    assert optimized.internal_topology_builder.state_store_names == ("KSTREAM-JOINTHIS-0000000003-store",)
    config = streams_config(bootstrap_servers, app_id, tmp_path / "b", extra={"commit.interval.ms": 100})
    async with running_instance(optimized, config):  # an empty state directory: restored from the changelog
        await send("C", now + 44)
        assert (await joined(9))[4:] == [("CA", now + 44), ("CB", now + 44), ("AC", now + 44), ("BC", now + 44),
                                         ("CC", now + 44)]  # fmt: skip

"""Gathered scans while a task moves: every partition of the store from its active copy, or 503 naming
what is missing, never a partial 200 (api/scans.py).

Under the streams protocol the broker's endpoint map lists the tasks members acknowledged: a
partition revoked by one member and not yet acknowledged by the next is on no host, and the member
that revoked it runs on before the others hear of the new map. The fakes play both moments; the
classic assignor's map, which names every partition, still answers everything.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from api import create_app
from streams_core import Processor, Serdes, Stores, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import StreamsMetadataState, SubscriptionInfo, compute_group_assignment
from tests.api.conftest import WORDS, populate
from tests.api.fakes import COUNTS, HOST_A, HOST_B, PARTITIONS, TOPIC, Cluster, FakeKafkaStreams, build_topology

SCANS = (f"/state/keyvalues/{COUNTS}/all", f"/state/keyvalues/{COUNTS}/range/a/z")
GLOBAL = "globals"
ALL_WORDS = [{"key": word, "value": WORDS[word]} for word in sorted(WORDS)]


def _words_of(cluster: Cluster, partitions: set[int]) -> list[str]:
    hosts = {HOST_A: cluster.a, HOST_B: cluster.b}
    return sorted(w for w in WORDS if any(p in hosts[cluster.owner_host(w)].active for p in partitions))


async def test_a_partition_on_no_host_is_503_naming_it(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.b.active = set()  # B revoked partition 1; no member acknowledged it yet
    in_flight = {HOST_A: [TopicPartition(TOPIC, 0)], HOST_B: []}
    for streams in cluster.instances.values():
        streams.metadata_state.on_change(in_flight, {}, {TOPIC: PARTITIONS})
    for path in SCANS:
        answer = await client.get(path)
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "1"
        assert answer.json() == {
            "error": "partitions on no instance",
            "store": COUNTS,
            "partitions": [1],
            "reason": "the active copies of these partitions are moving between instances",
        }
    assert cluster.transport.forwarded_to(HOST_B) == [], "nobody is asked when the answer cannot be whole"

    cluster.b.active = {1}  # B acknowledged it again: full coverage, 200 as before
    cluster.assign()
    for path in SCANS:
        answer = await client.get(path)
        assert answer.status_code == 200
        assert [e["key"] for e in answer.json()] == [e["key"] for e in ALL_WORDS if "a" <= e["key"] <= "z"]


async def test_a_host_without_the_active_copy_it_is_named_for_is_503(cluster: Cluster, client: httpx.AsyncClient) -> None:
    """B revoked partition 1 and runs on; A's metadata still names B (the new map not heard yet)."""
    cluster.b.active = set()
    answer = await client.get(SCANS[0])
    assert answer.status_code == 503, answer.text
    assert answer.json() == {"error": "instance not queryable", "instance": str(HOST_B), "status": 503}
    async with cluster.client(HOST_B) as to_b:
        asked = await to_b.get(SCANS[0], params={"scope": "local", "partitions": "1"})
        assert asked.status_code == 503
        assert asked.json()["error"] == "state store not queryable"
        assert (await to_b.get(SCANS[0], params={"scope": "local"})).json() == [], "without partitions: what it has"


async def test_each_host_is_asked_for_its_own_partitions(cluster: Cluster, client: httpx.AsyncClient) -> None:
    assert (await client.get(SCANS[0])).json() == ALL_WORDS
    [forwarded] = cluster.transport.forwarded_to(HOST_B)
    assert (forwarded.url.params["scope"], forwarded.url.params["partitions"]) == ("local", "1")

    only_a = await client.get(SCANS[0], params={"partitions": "0"})
    assert [e["key"] for e in only_a.json()] == _words_of(cluster, {0})
    assert only_a.headers["X-Served-By"] == str(HOST_A)
    assert len(cluster.transport.forwarded_to(HOST_B)) == 1, "partition 0 is A's: B is not asked"
    only_b = await client.get(SCANS[0], params={"partitions": "1"})
    assert [e["key"] for e in only_b.json()] == _words_of(cluster, {1})
    assert only_b.headers["X-Served-By"] == str(HOST_B)
    assert (await client.get(SCANS[0], params={"partitions": "1,0"})).json() == ALL_WORDS

    standby_here = await client.get(SCANS[0], params={"scope": "local", "partitions": "1"})
    assert standby_here.status_code == 503, "A has a standby copy of partition 1, not the active one"


@pytest.mark.parametrize(
    ("partitions", "error"),
    [("2", {"error": "no such partition", "store": COUNTS, "partitions": [2]}), ("1,x", None), ("", None), (" 1", None)],
)
async def test_partitions_the_store_has_not_are_404_malformed_400(
    client: httpx.AsyncClient, partitions: str, error: dict[str, object] | None
) -> None:
    for scope in ("all", "local"):
        answer = await client.get(SCANS[0], params={"scope": scope, "partitions": partitions})
        assert answer.status_code == (404 if error else 400), (scope, answer.text)
        assert answer.json() == (error or {
            "error": "invalid partitions", "partitions": partitions, "reason": "expected partition numbers joined by commas"
        })  # fmt: skip


class _Keep(Processor[Any, Any, Any, Any]):
    def process(self, record: Any) -> None:
        pass


async def test_a_global_store_has_no_partitions_to_name() -> None:
    def with_global() -> Topology:
        store = Stores.key_value_store_builder(Stores.in_memory_key_value_store(GLOBAL), Serdes.String(), Serdes.Long())
        return build_topology().add_global_store(store.with_logging_disabled(), "G-SOURCE", "globals", "G-KEEP", _Keep)

    streams = FakeKafkaStreams(HOST_A, {0}, StreamsMetadataState({}, HOST_A), topology=with_global)
    assert streams.store_partitions(GLOBAL) == frozenset()
    app = create_app(streams)
    try:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url=f"http://{HOST_A}"
        ) as client:
            answer = await client.get(f"/state/keyvalues/{GLOBAL}/all", params={"partitions": "0"})
            assert answer.status_code == 404
            assert answer.json() == {"error": "no such partition", "store": GLOBAL, "partitions": "0"}
    finally:
        streams.close()


@pytest.mark.parametrize("members", [("a",), ("a", "b"), ("a", "a", "b"), ("b", "b", "a")])
async def test_under_the_classic_assignors_map_every_scan_answers_everything(members: tuple[str, ...]) -> None:
    """The classic protocol's map (the leader's AssignmentInfo) names every partition: behaviour unchanged."""
    hosts = {"a": HOST_A, "b": HOST_B}
    subscriptions = {
        f"{name}-{n}": SubscriptionInfo(f"process-{name}", str(hosts[name])).encode() for n, name in enumerate(members)
    }
    result = compute_group_assignment(subscriptions, {0: {TOPIC}}, {TOPIC: PARTITIONS})
    cluster = Cluster()
    try:
        for host, streams in cluster.instances.items():
            mine = [m for m, name in ((m, m.split("-")[0]) for m in result) if hosts[name] == host]
            streams.active = {task.partition for m in mine for task in result[m].info.active_tasks}
            info = result[mine[0]].info if mine else next(iter(result.values())).info
            streams.metadata_state.on_change(info.partitions_by_host, info.standby_partitions_by_host, {TOPIC: PARTITIONS})
        populate(cluster)
        async with cluster.running(), cluster.client(HOST_A) as client:
            for path in SCANS:
                answer = await client.get(path)
                assert answer.status_code == 200, answer.text
            assert (await client.get(SCANS[0])).json() == ALL_WORDS
    finally:
        cluster.close()

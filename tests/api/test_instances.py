"""Discovery routes: /state/instances, /state/instances/{store}, /state/instance/{store}/{key}."""

from __future__ import annotations

import httpx

from streams_core import Serdes, State
from streams_core.runtime.queries.state_store_providers import LagInfo
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, PARTITIONS, SESSIONS, TOPIC, WINDOWED, Cluster

ALL_STORES = sorted([COUNTS, IDS, SESSIONS, WINDOWED])


async def test_instances_lists_every_instance_with_stores_and_partitions(client: httpx.AsyncClient) -> None:
    answer = await client.get("/state/instances")
    assert answer.status_code == 200
    assert answer.headers["X-Served-By"] == str(HOST_A)
    assert answer.json() == [
        {
            "host": "127.0.0.1",
            "port": HOST_A.port,
            "storeNames": ALL_STORES,
            "topicPartitions": [{"topic": TOPIC, "partition": 0}],
            "standbyStoreNames": ALL_STORES,
        },
        {
            "host": "127.0.0.1",
            "port": HOST_B.port,
            "storeNames": ALL_STORES,
            "topicPartitions": [{"topic": TOPIC, "partition": 1}],
            "standbyStoreNames": ALL_STORES,
        },
    ]


async def test_instances_for_store(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/state/instances/{COUNTS}")
    assert answer.status_code == 200
    assert [(i["host"], i["port"]) for i in answer.json()] == [(h.host, h.port) for h in (HOST_A, HOST_B)]


async def test_instances_for_an_unknown_store_is_404_with_a_reason(client: httpx.AsyncClient) -> None:
    answer = await client.get("/state/instances/no-such-store")
    assert answer.status_code == 404
    assert answer.json()["error"] == "unknown state store"
    assert "no-such-store" in answer.json()["reason"]


async def test_instance_for_key_names_the_owner_its_partition_and_standbys(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    for host, streams in cluster.instances.items():  # each holds its active partition (lag 0) and the other's standby
        standby = 1 - next(iter(streams.active))
        streams.lags = {COUNTS: {1 - standby: LagInfo(50, 50, 0), standby: LagInfo(40 + host.port % 10, 50, 10 - host.port % 10)}}
    for word in ("apple", "fig"):
        owner = cluster.owner_host(word)
        other = HOST_B if owner == HOST_A else HOST_A
        answer = await client.get(f"/state/instance/{COUNTS}/{word}")
        assert answer.status_code == 200
        assert answer.json() == {
            "host": owner.host,
            "port": owner.port,
            "storeNames": ALL_STORES,
            "partition": next(iter(cluster.instances[owner].active)),
            "standbyHosts": [{"host": other.host, "port": other.port}],
            "copies": [
                {"host": owner.host, "port": owner.port, "active": True, "lag": 0},
                {"host": other.host, "port": other.port, "active": False, "lag": 10 - other.port % 10},
            ],
        }


async def test_a_copy_whose_instance_does_not_answer_has_an_unknown_lag(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    cluster.transport.down.add(str(HOST_B))
    word = "fig" if cluster.owner_host("fig") == HOST_A else "apple"
    answer = await client.get(f"/state/instance/{COUNTS}/{word}")
    assert answer.status_code == 200
    assert [(c["port"], c["lag"]) for c in answer.json()["copies"]] == [(HOST_A.port, None), (HOST_B.port, None)]


async def test_lags_lists_this_instances_copies(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.a.lags = {COUNTS: {0: LagInfo(9, 9, 0), 1: LagInfo(3, 9, 6)}, IDS: {0: LagInfo(1, 1, 0)}}
    answer = await client.get("/state/lags", params={"store": COUNTS})
    assert answer.status_code == 200
    assert answer.json() == [
        {"store": COUNTS, "partition": 0, "currentOffsetPosition": 9, "endOffsetPosition": 9, "offsetLag": 0},
        {"store": COUNTS, "partition": 1, "currentOffsetPosition": 3, "endOffsetPosition": 9, "offsetLag": 6},
    ]
    assert len((await client.get("/state/lags")).json()) == 3


async def test_instance_for_key_parses_the_key_with_the_store_key_serde(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    answer = await client.get(f"/state/instance/{IDS}/-7")
    assert answer.status_code == 200
    assert answer.json()["port"] == cluster.owner_host(-7, Serdes.Long()).port
    assert 0 <= answer.json()["partition"] < PARTITIONS

    bad = await client.get(f"/state/instance/{IDS}/seven")
    assert bad.status_code == 400
    assert bad.json() == {"error": "invalid key", "store": IDS, "key": "seven", "reason": "Long key: not an integer"}


async def test_discovery_answers_from_the_last_assignment_while_rebalancing(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    """As Kafka Streams' StreamsMetadataState: a rebalance does not clear the metadata."""
    paths = ("/state/instances", f"/state/instances/{COUNTS}", f"/state/instance/{COUNTS}/apple")
    before = [(await client.get(path)).json() for path in paths]
    cluster.rebalance()
    for path, expected in zip(paths, before, strict=True):
        answer = await client.get(path)
        assert answer.status_code == 200, path
        assert answer.json() == expected, path


async def test_discovery_is_503_before_start_but_404_for_an_unknown_store(
    cluster: Cluster, client: httpx.AsyncClient
) -> None:
    cluster.a.state = State.CREATED
    answer = await client.get("/state/instances")
    assert answer.status_code == 503
    assert answer.json()["error"] == "streams not started"
    assert (await client.get("/state/instances/nope")).status_code == 404

"""Security basics of the REST layer (issue 15, item 4); no broker needed.

- The server binds where it is configured and nowhere else: `api.serve` on the host it is
  given (127.0.0.1 by default, whatever host `application.server` names), the CLI on the host
  of `--application-server` unless `--bind` says otherwise (the service process itself is
  checked in test_http_fuzz.py).
- Forwarding goes only to hosts of the group's metadata: two instances served over real
  sockets, and a local listener that records any call; requests that carry the listener's
  address in every header a proxy or a router might trust (Host, X-Forwarded-*, Forwarded,
  the hop header...), in the path (absolute form, `//host`, `@host`, encoded URLs) and in the
  query must neither reach the listener nor make any request to a host outside the metadata.
- A forwarded request cannot loop: two instances that disagree about the owner (each thinks
  the other has the key) answer 503 after exactly one hop, and a request that carries the hop
  header is never forwarded again, on every route that forwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest

from api import ApiSettings, ServerHandle, serve
from app.settings import add_service_arguments, settings_from
from streams_core import HostInfo, Serdes
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import StreamsMetadataState
from streams_core.runtime.topology_metadata import TopologyMetadata
from tests.api.fakes import (
    COUNTS,
    HOST_A,
    HOST_B,
    PARTITIONS,
    SESSIONS,
    TOPIC,
    WINDOWED,
    Cluster,
    FakeKafkaStreams,
    build_topology,
)
from tests.chaos.http_raw import Recorder, listening, raw_get
from tests.integration.rest_cluster import free_port

pytestmark = pytest.mark.chaos

WORDS = {"apple": 5, "banana": 6, "cherry": 6, "date": 4, "elder": 5, "fig": 3, "grape": 5}


def _one_instance(application_server: str | None = None) -> FakeKafkaStreams:
    host = HostInfo.parse(application_server) if application_server else None
    return FakeKafkaStreams(host, {0, 1}, StreamsMetadataState({}, None))


# -- binding ----------------------------------------------------------------------------------


async def test_serve_listens_on_the_host_it_is_given_only() -> None:
    streams = _one_instance()
    handle = await serve(streams, "127.0.0.1", 0)
    try:
        assert listening(os.getpid(), handle.port) == {"127.0.0.1"}
    finally:
        await handle.stop()
        streams.close()


async def test_serve_binds_127_0_0_1_whatever_host_application_server_names() -> None:
    """`application.server` is how others reach this instance (e.g. a DNS name); only its port is bound."""
    port = free_port()
    streams = _one_instance(f"streams.example.invalid:{port}")
    handle = await serve(streams)
    try:
        assert handle.port == port and listening(os.getpid(), port) == {"127.0.0.1"}
    finally:
        await handle.stop()
        streams.close()


async def test_serve_binds_a_bracketed_ipv6_loopback_as_application_server_writes_it() -> None:
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    streams = _one_instance()
    handle = await serve(streams, "[::1]", 0)
    try:
        assert listening(os.getpid(), handle.port) == {"::1"}
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"http://[::1]:{handle.port}/health")).status_code == 200
    finally:
        await handle.stop()
        streams.close()


@pytest.mark.parametrize(
    ("flags", "bind_host"),
    [
        (["--application-server", "127.0.0.1:7070"], "127.0.0.1"),
        (["--application-server", "wordcount-1:7070"], "wordcount-1"),
        (["--application-server", "wordcount-1:7070", "--bind", "127.0.0.1"], "127.0.0.1"),
        ([], "127.0.0.1"),  # the default application.server is 127.0.0.1:7070
    ],
)
def test_the_cli_binds_the_host_of_application_server_unless_bind_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], bind_host: str
) -> None:
    for name in ("STREAMS_BIND_HOST", "STREAMS_APPLICATION_SERVER", "STREAMS_PORT"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser()
    add_service_arguments(parser, "wordcount")
    assert settings_from(parser.parse_args(flags)).bind_host == bind_host


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


# -- forwarding stays within the group ----------------------------------------------------------


class RecordingTransport(httpx.AsyncBaseTransport):
    """The network transport, noting the address of every request an instance sends."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.url.host}:{request.url.port}")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


FORWARD_TIMEOUT_S = 1.0


@dataclass
class Served:
    """Two instances of one application served on real 127.0.0.1 ports, and what they sent."""

    hosts: list[HostInfo]
    handles: list[ServerHandle]
    transport: RecordingTransport

    def owner(self, word: str) -> int:
        return default_partition(Serdes.String().serialize(None, word) or b"", PARTITIONS)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """A owns partition 0 and a standby of 1, B the reverse; every word on its owner and standby."""
    hosts = [HostInfo("127.0.0.1", free_port()), HostInfo("127.0.0.1", free_port())]
    topology = build_topology()
    store_topics = TopologyMetadata(topology.internal_topology_builder, "api-test").store_source_topics
    instances = [FakeKafkaStreams(host, {p}, StreamsMetadataState(store_topics, host)) for p, host in enumerate(hosts)]
    active = {host: [TopicPartition(TOPIC, p)] for p, host in enumerate(hosts)}
    standby = {host: [TopicPartition(TOPIC, 1 - p)] for p, host in enumerate(hosts)}
    for streams in instances:
        streams.metadata_state.on_change(active, standby, {TOPIC: PARTITIONS})
    for word, count in WORDS.items():
        partition = default_partition(word.encode(), PARTITIONS)
        instances[partition].active_driver.get_key_value_store(COUNTS).put(word, count)
        instances[1 - partition].standby_driver.get_key_value_store(COUNTS).put(word, count)
    transport = RecordingTransport()
    settings = ApiSettings(transport=transport, forward_timeout=FORWARD_TIMEOUT_S)
    async with AsyncExitStack() as stack:
        handles = []
        for host, streams in zip(hosts, instances, strict=True):
            stack.callback(streams.close)
            handle = await serve(streams, "127.0.0.1", host.port, settings=settings)
            stack.push_async_callback(handle.stop)
            handles.append(handle)
        yield Served(hosts, handles, transport)


def _attacks(target: str, forwarded_key: str) -> list[tuple[str, bytes, bytes, bytes]]:
    """(what, request target, extra headers, Host header): the target's address in every place a request can carry it."""
    url = f"http://{target}/".encode()
    addr = target.encode()
    key_route = f"/state/keyvalue/{COUNTS}/".encode()
    key = key_route + forwarded_key.encode()
    headers = {
        "X-Forwarded-Host": addr,
        "X-Forwarded-For": addr,
        "X-Forwarded-Server": addr,
        "X-Forwarded-Proto": b"http",
        "X-Forwarded-Port": addr.split(b":")[1],
        "Forwarded": b"for=" + addr + b";host=" + addr + b";proto=http",
        "X-Original-URL": url,
        "X-Rewrite-URL": url,
        "X-Real-IP": addr,
        "X-Streams-Forwarded-By": addr,
        "X-Served-By": addr,
        "Referer": url,
        "Origin": url,
    }
    found: list[tuple[str, bytes, bytes, bytes]] = [("Host header", key, b"", addr)]
    found += [(f"{name} header", key, f"{name}: ".encode() + value + b"\r\n", b"127.0.0.1") for name, value in headers.items()]
    every_header = b"".join(f"{name}: ".encode() + value + b"\r\n" for name, value in headers.items() if name != "X-Streams-Forwarded-By")
    found.append(("all proxy headers and Host at once", key, every_header, addr))
    targets = {
        "absolute-form target": url + key[1:],
        "network-path target": b"//" + addr + key,
        "key with @host": key_route + b"%40" + addr,
        "key that is the address": key_route + quote(target, safe="").encode(),
        "key that is a URL": key_route + quote(f"http://{target}/x", safe="").encode(),
        "key with a raw URL tail": key + b"@" + addr,
        "query naming the address": key + b"?url=" + quote(f"http://{target}/", safe="").encode() + b"&host=" + addr,
        "owner lookup with Host": f"/state/instance/{COUNTS}/{forwarded_key}".encode(),
        "gathered all with Host": f"/state/keyvalues/{COUNTS}/all".encode(),
        "gathered range with Host": f"/state/keyvalues/{COUNTS}/range/a/z?limit=3".encode(),
        "stale read with Host": key + b"?stale=true",
        "window fetch with Host": f"/state/windowed/{WINDOWED}/{forwarded_key}/0/100".encode(),
        "metrics of the address": b"/metrics/" + addr,
        "metrics of a URL": b"/metrics/" + quote(f"http://{target}", safe="").encode(),
    }
    found += [(what, raw, every_header, addr) for what, raw in targets.items()]
    return found


async def test_no_request_makes_an_instance_call_a_host_outside_the_group(served: Served) -> None:
    recorder = await Recorder().start()
    try:
        members = {str(host) for host in served.hosts}
        forwarded = 0
        for entry, handle in enumerate(served.handles):
            peer = str(served.hosts[1 - entry])
            word = next(w for w in WORDS if served.owner(w) != entry)  # owned by the peer: forwarded
            for what, target, headers, host in _attacks(recorder.address, word):
                answer = await raw_get(handle.port, target, headers, host=host)
                assert answer.status < 500 or answer.status == 503, f"{what}: {answer}"
                if answer.status == 200 and target == f"/state/keyvalue/{COUNTS}/{word}".encode():
                    assert answer.body == f'{{"key":"{word}","value":{WORDS[word]}}}'.encode(), f"{what}: {answer}"
                    assert answer.headers["x-served-by"] == peer, f"{what}: {answer.headers}"
                    forwarded += 1
                assert not recorder.heads, f"{what} made {handle.url} call {recorder.address}: {recorder.heads}"
                stray = set(served.transport.sent) - members
                assert not stray, f"{what} made {handle.url} call {stray}"
        assert forwarded >= 20, "the key queries were forwarded to the owner (the attacks ran through forwarding)"
        assert set(served.transport.sent) == members
    finally:
        await recorder.stop()


async def test_metrics_of_an_instance_are_relayed_only_for_members(served: Served) -> None:
    recorder = await Recorder().start()
    try:
        async with httpx.AsyncClient(base_url=served.handles[0].url, timeout=5) as client:
            member = await client.get(f"/metrics/{served.hosts[1]}")
            stranger = await client.get(f"/metrics/{recorder.address}")
        assert member.status_code == 200 and member.headers["x-served-by"] == str(served.hosts[1])
        assert stranger.status_code == 404 and stranger.json()["error"] == "unknown instance"
        assert not recorder.heads
    finally:
        await recorder.stop()


async def test_a_forwarded_bounded_query_waits_its_timeout_at_the_owner(served: Served) -> None:
    """`timeoutMs` above the forwarding timeout: the owner's 'position not reached' after timeoutMs,
    not the origin's 'instance unreachable' after the forwarding timeout (found by the fuzz test)."""
    word = next(w for w in WORDS if served.owner(w) == 1)
    wait_ms = int(FORWARD_TIMEOUT_S * 2000)
    async with httpx.AsyncClient(base_url=served.handles[0].url, timeout=10) as client:
        started = asyncio.get_running_loop().time()
        answer = await client.get(f"/state/keyvalue/{COUNTS}/{word}", params={"position": f"{TOPIC}:1:5", "timeoutMs": wait_ms})
        took = asyncio.get_running_loop().time() - started
    assert answer.status_code == 503 and answer.headers["x-served-by"] == str(served.hosts[1]), answer.text
    assert answer.json()["error"] == "position not reached" and answer.json()["reason"] == "timed out"
    assert wait_ms / 1000 <= took < wait_ms / 1000 + FORWARD_TIMEOUT_S


# -- one hop at most ---------------------------------------------------------------------------


@pytest.fixture
async def disagreeing() -> AsyncIterator[Cluster]:
    """A thinks B owns every partition, B thinks A does (no standbys): a rebalance seen at two moments."""
    cluster = Cluster()
    every = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    cluster.a.metadata_state.on_change({HOST_B: every}, {}, {TOPIC: PARTITIONS})
    cluster.b.metadata_state.on_change({HOST_A: every}, {}, {TOPIC: PARTITIONS})
    try:
        async with cluster.running():
            yield cluster
    finally:
        cluster.close()


KEY_ROUTES = {
    "key": f"/state/keyvalue/{COUNTS}/apple",
    "stale key": f"/state/keyvalue/{COUNTS}/apple?stale=true",
    "key with maxLag": f"/state/keyvalue/{COUNTS}/apple?maxLag=5",
    "key with position": f"/state/keyvalue/{COUNTS}/apple?position={TOPIC}:0:1&timeoutMs=10",
    "windows": f"/state/windowed/{WINDOWED}/apple/0/100000",
    "sessions": f"/state/session/{SESSIONS}/apple",
}


@pytest.mark.parametrize("route", list(KEY_ROUTES))
async def test_owners_that_disagree_answer_503_after_one_hop(disagreeing: Cluster, route: str) -> None:
    for entry, peer in ((HOST_A, HOST_B), (HOST_B, HOST_A)):
        disagreeing.transport.requests.clear()
        async with disagreeing.client(entry) as client:
            answer = await client.get(KEY_ROUTES[route])
        sent = disagreeing.transport.requests[1:]  # [0] is the test's own request to `entry`
        assert answer.status_code == 503 and "retry-after" in answer.headers, answer.text
        assert answer.json()["error"] == "not the owner" and answer.headers["x-served-by"] == str(peer)
        assert [(r.url.port, r.headers.get("x-streams-forwarded-by")) for r in sent] == [(peer.port, str(entry))]


async def test_gathering_asks_each_peer_once_and_they_do_not_gather_again(disagreeing: Cluster) -> None:
    disagreeing.transport.requests.clear()
    async with disagreeing.client(HOST_A) as client:
        answer = await client.get(f"/state/keyvalues/{COUNTS}/all")
    sent = disagreeing.transport.requests[1:]
    # B, asked for the partitions A's map gives it, has none of them active: the scan is 503, not a page without them.
    assert answer.status_code == 503 and answer.json()["instance"] == str(HOST_B), answer.text
    assert [(r.url.port, r.url.params.get("scope")) for r in sent] == [(HOST_B.port, "local")]


@pytest.mark.parametrize("route", [*KEY_ROUTES.values(), f"/state/keyvalues/{COUNTS}/all", f"/state/keyvalues/{COUNTS}/range/a/z"])
async def test_a_request_with_the_hop_header_is_never_forwarded(disagreeing: Cluster, route: str) -> None:
    """Whoever sets the header (a peer, or a client forging it), the receiver answers itself or 503s."""
    for entry, other in ((HOST_A, HOST_B), (HOST_B, HOST_A)):
        disagreeing.transport.requests.clear()
        async with disagreeing.client(entry) as client:
            answer = await client.get(route, headers={"X-Streams-Forwarded-By": str(other)})
        assert answer.status_code in (200, 404, 503), answer.text
        assert disagreeing.transport.requests[1:] == []


async def test_two_instances_disagreeing_under_load_never_chain_hops(disagreeing: Cluster) -> None:
    """50 concurrent key queries through both instances: 50 forwards, each one hop, no request more."""
    disagreeing.transport.requests.clear()
    words = list(WORDS)
    async with disagreeing.client(HOST_A) as a, disagreeing.client(HOST_B) as b:
        answers = await asyncio.gather(
            *((a if n % 2 else b).get(f"/state/keyvalue/{COUNTS}/{words[n % len(words)]}") for n in range(50))
        )
    assert {answer.status_code for answer in answers} == {503}
    hops = [r for r in disagreeing.transport.requests if "x-streams-forwarded-by" in r.headers]
    assert len(disagreeing.transport.requests) == 100 and len(hops) == 50

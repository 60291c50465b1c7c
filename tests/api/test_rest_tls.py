"""HTTPS of the REST layer over real sockets (api/tls.py): mutual TLS, forwarding between instances
over HTTPS with their own certificate and token, certificate rotation, and the CLI's settings."""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from api import ApiSettings, Credentials, Secret, ServerHandle, TlsSettings, serve
from app.settings import RestSecurity, add_service_arguments, settings_from
from streams_core import HostInfo
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import StreamsMetadataState
from streams_core.runtime.topology_metadata import TopologyMetadata
from tests.api.fakes import COUNTS, PARTITIONS, TOPIC, FakeKafkaStreams, build_topology
from tests.api.secured import CLIENT_TOKEN, ENTRIES, KEY_PASSWORD, Pki, credentials
from tests.integration.rest_cluster import free_port

WORDS = {"apple": 5, "banana": 6, "cherry": 6, "date": 4, "elder": 5, "fig": 3, "grape": 5}
TOKEN = {"Authorization": f"Bearer {CLIENT_TOKEN}"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@dataclass
class Secured:
    """Two instances served over HTTPS with mutual TLS and tokens; A owns partition 0, B partition 1."""

    hosts: list[HostInfo]
    handles: list[ServerHandle]
    pki: Pki

    def client(self, *, cert: tuple[str, str] | None = None, verify: bool = True) -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=str(self.pki.cafile)) if verify else ssl.create_default_context()
        if cert is not None:
            context.load_cert_chain(*cert)
        return httpx.AsyncClient(verify=context, timeout=5)

    def url(self, index: int, path: str) -> str:
        return f"https://{self.hosts[index]}{path}"


@pytest.fixture
async def secured(pki: Pki) -> AsyncIterator[Secured]:
    hosts = [HostInfo("127.0.0.1", free_port()), HostInfo("127.0.0.1", free_port())]
    topology = build_topology()
    store_topics = TopologyMetadata(topology.internal_topology_builder, "api-test").store_source_topics
    instances = [FakeKafkaStreams(host, {p}, StreamsMetadataState(store_topics, host)) for p, host in enumerate(hosts)]
    active = {host: [TopicPartition(TOPIC, p)] for p, host in enumerate(hosts)}
    for streams in instances:
        streams.metadata_state.on_change(active, {}, {TOPIC: PARTITIONS})
    for word, count in WORDS.items():
        instances[default_partition(word.encode(), PARTITIONS)].active_driver.get_key_value_store(COUNTS).put(word, count)
    settings = ApiSettings(
        forward_timeout=2.0, tls=pki.tls(), credentials=Credentials.from_mapping(ENTRIES), principal="instances"
    )
    async with AsyncExitStack() as stack:
        handles = []
        for host, streams in zip(hosts, instances, strict=True):
            stack.callback(streams.close)
            handle = await serve(streams, "127.0.0.1", host.port, settings=settings)
            stack.push_async_callback(handle.stop)
            handles.append(handle)
        yield Secured(hosts, handles, pki)


async def test_every_key_through_either_instance_over_mutual_tls(secured: Secured) -> None:
    """Half of the keys are forwarded: the instances reach each other over HTTPS with their certificate and token."""
    assert secured.handles[0].url == f"https://{secured.hosts[0]}"
    async with secured.client(cert=secured.pki.client_cert()) as client:
        for index in (0, 1):
            served_by = set()
            for word, count in WORDS.items():
                answer = await client.get(secured.url(index, f"/state/keyvalue/{COUNTS}/{word}"), headers=TOKEN)
                assert answer.status_code == 200 and answer.json()["value"] == count, answer.text
                served_by.add(answer.headers["x-served-by"])
            assert served_by == {str(host) for host in secured.hosts}
            everything = await client.get(secured.url(index, f"/state/keyvalues/{COUNTS}/all"), headers=TOKEN)
            assert {e["key"]: e["value"] for e in everything.json()} == WORDS
            other = secured.hosts[1 - index]
            relayed = await client.get(secured.url(index, f"/metrics/{other}"), headers=TOKEN)
            assert relayed.status_code == 200 and relayed.headers["x-served-by"] == str(other)


async def test_a_client_certificate_without_a_token_gets_401(secured: Secured) -> None:
    async with secured.client(cert=secured.pki.client_cert()) as client:
        answer = await client.get(secured.url(0, f"/state/keyvalue/{COUNTS}/apple"))
    assert answer.status_code == 401 and "value" not in answer.json()


@pytest.mark.parametrize("how", ["no client certificate", "a certificate of another CA", "plain HTTP", "server not trusted"])
async def test_the_handshake_refuses_clients_outside_the_ca(secured: Secured, how: str) -> None:
    """Refused before any HTTP: not even a token helps."""
    clients = {
        "no client certificate": lambda: secured.client(),
        "a certificate of another CA": lambda: secured.client(cert=secured.pki.rogue_cert()),
        "plain HTTP": lambda: httpx.AsyncClient(timeout=5),
        "server not trusted": lambda: secured.client(cert=secured.pki.client_cert(), verify=False),
    }
    async with clients[how]() as client:
        for index in (0, 1):
            url = secured.url(index, f"/state/keyvalue/{COUNTS}/apple")
            with pytest.raises(httpx.HTTPError):
                answer = await client.get(url.replace("https:", "http:") if how == "plain HTTP" else url, headers=TOKEN)
                raise AssertionError(f"answered {answer.status_code}: {answer.text}")
    async with secured.client(cert=secured.pki.client_cert()) as client:  # and the servers still serve
        assert (await client.get(secured.url(0, "/health"))).status_code == 200


def _served_certificate(port: int, pki: Pki) -> bytes:
    context = ssl.create_default_context(cafile=str(pki.cafile))
    context.load_cert_chain(*pki.client_cert())
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.getpeercert(binary_form=True) or b""


def _der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text(encoding="ascii").split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")


async def test_rotation_serves_the_new_certificate_and_keeps_the_old_when_the_new_is_broken(pki: Pki, tmp_path: Path) -> None:
    """The files are written over, then `reload_tls` (SIGHUP in the service): new handshakes get the new one."""
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(pki.certfile.read_bytes())
    keyfile.write_bytes(pki.keyfile.read_bytes())
    tls = TlsSettings(str(certfile), str(keyfile), Secret(KEY_PASSWORD), str(pki.cafile), client_auth=True)
    streams = FakeKafkaStreams(None, {0, 1}, StreamsMetadataState({}, None))
    handle = await serve(streams, "127.0.0.1", 0, settings=ApiSettings(tls=tls))
    try:
        first = await asyncio.to_thread(_served_certificate, handle.port, pki)
        assert first == _der(pki.certfile)
        new_cert, new_key = pki.issue("rotated", pki.ca)
        certfile.write_bytes(new_cert.read_bytes())
        keyfile.write_bytes(new_key.read_bytes())
        assert handle.reload_tls()
        assert await asyncio.to_thread(_served_certificate, handle.port, pki) == _der(new_cert) != first
        keyfile.write_text("-----BEGIN PRIVATE KEY-----\nhalf written", encoding="ascii")
        assert not handle.reload_tls()
        assert await asyncio.to_thread(_served_certificate, handle.port, pki) == _der(new_cert)
    finally:
        await handle.stop()
        streams.close()


def test_a_wrong_key_passphrase_is_an_error_that_names_no_passphrase(pki: Pki) -> None:
    wrong = "wrong-passphrase-0c1d"
    with pytest.raises(ValueError) as caught:
        TlsSettings(str(pki.certfile), str(pki.keyfile), Secret(wrong), str(pki.cafile)).server_context()
    assert wrong not in str(caught.value) and KEY_PASSWORD not in str(caught.value)
    assert "wrong" not in repr(TlsSettings(str(pki.certfile), str(pki.keyfile), Secret(wrong)))
    with pytest.raises(ValueError, match="CA file"):
        TlsSettings(str(pki.certfile), client_auth=True)


def test_the_cli_reads_rest_security_from_flags_and_the_passphrase_from_the_environment_only(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = credentials(tmp_path)
    parser = argparse.ArgumentParser()
    add_service_arguments(parser, "wordcount")
    args = parser.parse_args([
        "--rest-ssl-certfile", str(pki.certfile), "--rest-ssl-keyfile", str(pki.keyfile),
        "--rest-ssl-cafile", str(pki.cafile), "--rest-ssl-client-auth", "required",
        "--rest-credentials", str(path), "--rest-principal", "instances",
    ])  # fmt: skip
    rest = settings_from(args).rest
    assert rest == RestSecurity(str(pki.certfile), str(pki.keyfile), str(pki.cafile), True, str(path), "instances")
    with pytest.raises(ValueError):  # the key is encrypted and no passphrase is set
        rest.api_settings(5.0, environ={}).tls.server_context()  # type: ignore[union-attr]
    settings = rest.api_settings(5.0, environ={"STREAMS_REST_SSL_KEY_PASSWORD": KEY_PASSWORD})
    assert settings.tls is not None and settings.peer_scheme == "https" and settings.open_probes
    settings.tls.server_context()
    assert KEY_PASSWORD not in repr(settings)
    for secret_flag in ("--rest-ssl-key-password", "--rest-token", "--rest-password"):
        with pytest.raises(SystemExit):
            parser.parse_args([secret_flag, "x"])
    monkeypatch.setenv("STREAMS_REST_CREDENTIALS_FILE", str(path))
    monkeypatch.setenv("STREAMS_REST_PROTECT_PROBES", "true")
    env_parser = argparse.ArgumentParser()
    add_service_arguments(env_parser, "wordcount")
    from_env = settings_from(env_parser.parse_args([])).rest
    assert from_env.credentials_file == str(path) and from_env.protect_probes and from_env.certfile is None
    with pytest.raises(ValueError, match="need --rest-ssl-certfile"):
        RestSecurity(cafile=str(pki.cafile)).api_settings(5.0, environ={})

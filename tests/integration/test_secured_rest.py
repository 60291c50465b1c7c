"""The done-when test of issue 36 (REST): a word count secured end to end.

Two instances run as User:alice over SASL_SSL/SCRAM with only the ACLs of `application_acls`
(tests/integration/security_kit.py's broker) and serve their REST layer over HTTPS with mutual
TLS between them and tokens for clients. The count is exact, every word answers right through
both instances (half of them forwarded, over HTTPS with the instance's certificate and token),
and every request without the right credentials (no token, a wrong one, no client certificate,
one of another CA, plain HTTP, a forged forward) is refused, never answered with data. No secret
(a token, the key passphrase, a broker password) shows in the logs or in `/metrics`.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from api import ApiSettings, Credentials
from app.wordcount import STORE
from streams_core.broker import LocalKafkaBroker
from streams_core.tools.acls import application_acls
from tests.api.secured import CLIENT_TOKEN, ENTRIES, SECRET_FORMS, USER_PASSWORD, Pki, basic
from tests.integration.rest_cluster import FAST_CONFIG, WordCountCluster, quoted, wait_until
from tests.integration.security_kit import LINES, PASSWORDS, expected_counts, grant, make_topics, produce_lines, read_counts
from tests.kafka_utils import unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(150)]

TOKEN = {"Authorization": f"Bearer {CLIENT_TOKEN}"}


def _client(pki: Pki, cert: tuple[str, str] | None, timeout: float = 10.0) -> httpx.AsyncClient:
    """A client trusting the instances' CA, presenting `cert` (none: no client certificate)."""
    context = ssl.create_default_context(cafile=str(pki.cafile))
    if cert is not None:
        context.load_cert_chain(*cert)
    return httpx.AsyncClient(verify=context, timeout=timeout)


def _client_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.cafile))
    context.load_cert_chain(*pki.client_cert())
    return context


@pytest.fixture
async def secured(secure_broker: LocalKafkaBroker, tmp_path: Path) -> AsyncIterator[tuple[WordCountCluster, Pki]]:
    app_id, source, sink = unique_topic("restsec"), unique_topic("lines"), unique_topic("counts")
    await make_topics(secure_broker, [source, sink])
    await grant(secure_broker, application_acls(app_id, "User:alice", input_topics=[source], output_topics=[sink]))
    pki = Pki(tmp_path)
    settings = ApiSettings(tls=pki.tls(), credentials=Credentials.from_mapping(ENTRIES), principal="instances")
    client = secure_broker.client_config("SASL_SSL", user="alice")
    cluster = WordCountCluster(
        client["bootstrap.servers"],
        tmp_path,
        app_id,
        input_topic=source,
        output_topic=sink,
        config={**FAST_CONFIG, **client},
        api_settings=settings,
        http=lambda timeout: httpx.AsyncClient(verify=_client_context(pki), timeout=timeout, headers=TOKEN),
    )
    cluster.sink = sink  # type: ignore[attr-defined]
    cluster.source = source  # type: ignore[attr-defined]
    try:
        await cluster.start_in_process("a", "b")
        yield cluster, pki
    finally:
        await cluster.close()


async def test_two_instances_sasl_ssl_https_mutual_tls_and_tokens(
    secured: tuple[WordCountCluster, Pki], secure_broker: LocalKafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")  # its "HTTP Request" lines, whatever level another test left
    caplog.set_level(logging.DEBUG)  # last: it sets the capturing handler's level too
    cluster, pki = secured
    await cluster.wait_running(timeout=60)
    await produce_lines(secure_broker, cluster.source, LINES)  # type: ignore[attr-defined]
    expected = expected_counts(LINES)
    assert await read_counts(secure_broker, cluster.sink, expected) == expected  # type: ignore[attr-defined]
    instances = cluster.live()
    served_by: set[str] = set()
    wrong = ""

    async def every_word_right() -> bool:
        nonlocal wrong
        async with _client(pki, pki.client_cert()) as http:
            for instance in instances:
                for word, count in expected.items():
                    answer = await http.get(f"{instance.url}/state/keyvalue/{STORE}/{quoted(word)}", headers=TOKEN)
                    if answer.status_code != 200 or answer.json()["value"] != count:
                        wrong = f"{word} via {instance.name}: {answer.status_code} {answer.text[:200]}"
                        return False
                    served_by.add(answer.headers["x-served-by"])
        return True

    await wait_until(every_word_right, 30, lambda: f"every word right through both instances ({wrong})")
    assert served_by == {i.server for i in instances}, "no key was forwarded"

    refused: list[tuple[str, int | str]] = []
    key = f"/state/keyvalue/{STORE}/{quoted('fox')}"
    for instance in instances:
        async with _client(pki, pki.client_cert()) as http:
            for how, headers in {
                "no token": {},
                "wrong token": {"Authorization": "Bearer guess"},
                "wrong password": {"Authorization": basic("dashboard", USER_PASSWORD + "!")},
                "forged forward": {"X-Streams-Forwarded-By": instances[0].server},
            }.items():
                for path in (key, f"/state/keyvalues/{STORE}/all", "/state/instances", "/metrics", "/topology"):
                    answer = await http.get(instance.url + path, headers=headers)
                    assert answer.status_code == 401 and "value" not in answer.text, (how, path, answer.text)
                    refused.append((how, answer.status_code))
            assert (await http.get(instance.url + "/health")).status_code == 200  # probes stay open
        for how, cert in {"no client certificate": None, "another CA's certificate": pki.rogue_cert()}.items():
            async with _client(pki, cert) as http:
                with pytest.raises(httpx.HTTPError):
                    await http.get(instance.url + key, headers=TOKEN)
                refused.append((how, "handshake"))
        async with httpx.AsyncClient(timeout=10) as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.get(instance.url.replace("https:", "http:") + key, headers=TOKEN)
    assert len(refused) == 2 * (4 * 5 + 2)

    async with _client(pki, pki.client_cert()) as http:
        metrics = (await http.get(instances[0].url + "/metrics", headers=TOKEN)).text
    assert "streams_query_forwards_total" in metrics
    shown = caplog.text + metrics
    assert "401 (invalid credentials)" in caplog.text and "HTTP Request" in caplog.text, "the refusals were not logged"
    for secret in (*SECRET_FORMS, *PASSWORDS.values()):
        assert secret not in shown, "a secret leaked into the logs or /metrics"

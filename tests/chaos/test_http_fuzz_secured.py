"""The HTTP fuzz suite against a secured word count, tried as an attacker would (issue 36).

Two `python -m app wordcount` processes serve HTTPS with mutual TLS and require tokens, set up
the way an operator would (STREAMS_REST_* variables, the passphrase and tokens never on the
command line). Then:

- Schemathesis draws requests from `openapi.yaml` (valid and invalid) for every operation and
  sends them to either instance without credentials and with wrong ones: every answer is a 401
  with the JSON error body and `WWW-Authenticate` (the open probes excepted), never data; with
  the right token every answer keeps the contract, as in test_http_fuzz.py;
- the raw requests of test_http_fuzz.py (oversized, invalid UTF-8, odd keys) without
  credentials: 401, the guard's 400/414 only once authenticated;
- a forwarded request without credentials (the hop header, as another instance sends it): 401;
- an untrusted client certificate, none at all, or plain HTTP: refused in the handshake;
- SIGHUP after the certificate files are replaced: new handshakes get the new certificate, and
  the process goes on serving;
- afterwards both processes are alive and answer right.

FUZZ_EXAMPLES (environment) sets the number of fuzzed requests per kind (default 1500 / 3).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import ssl
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("yaml", reason="needs PyYAML (dev extra: pyyaml)")
schemathesis = pytest.importorskip("schemathesis", reason="needs Schemathesis (dev extra: schemathesis)")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC  # noqa: E402
from tests.api.conformance import check  # noqa: E402
from tests.api.secured import CLIENT_TOKEN, KEY_PASSWORD, SECRET_FORMS, USER_PASSWORD, Pki, basic, credentials  # noqa: E402
from tests.chaos.test_http_fuzz import BAD_REQUESTS, TIMEOUT_S, _cases, _path, _strategies  # noqa: E402
from tests.integration.rest_cluster import Instance, WordCountCluster, make_text, wait_until  # noqa: E402
from tests.kafka_utils import Rec, create_topic, produce  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.chaos]

PARTITIONS = 4
EXAMPLES = max(int(os.environ.get("FUZZ_EXAMPLES", "1500")) // 3, 50)
TOKEN = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
WRONG = [
    {},
    {"Authorization": "Bearer guessed-token"},
    {"Authorization": basic("dashboard", USER_PASSWORD[:-1])},
    {"Authorization": basic("instances", "")},
    {"Authorization": "Basic Og=="},
    {"Authorization": f"Bearer {CLIENT_TOKEN}x"},
    {"Authorization": f"Bearer {CLIENT_TOKEN[:-1]}"},
    {"Authorization": "Bearer " + "x" * 8000},
    {"X-Streams-Forwarded-By": "127.0.0.1:1"},
]
"""Credentials an attacker might send: none, guessed, truncated, extended, huge, a forged hop.
(A token with spaces around it is the token: HTTP strips a field value's surrounding whitespace.)"""
OPEN = {"/health", "/ready"}


@dataclass
class Secured:
    cluster: WordCountCluster
    pki: Pki
    truth: Counter[str]
    certfile: Path
    keyfile: Path

    @property
    def instances(self) -> list[Instance]:
        return self.cluster.live()

    def context(self, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.cafile))
        if cert is not None:
            context.load_cert_chain(*cert)
        return context

    def client(self, cert: tuple[str, str] | None = None, **options: Any) -> httpx.AsyncClient:
        options.setdefault("timeout", TIMEOUT_S)
        return httpx.AsyncClient(verify=self.context(cert), **options)


@pytest.fixture(scope="module")
async def secured(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secured]:
    tag = uuid.uuid4().hex[:8]
    directory = tmp_path_factory.mktemp("secured-fuzz")
    pki = Pki(directory)
    certfile, keyfile = directory / "served.pem", directory / "served.key"  # replaced by the rotation test
    shutil.copy(pki.certfile, certfile)
    shutil.copy(pki.keyfile, keyfile)
    _, path = credentials(directory)
    env = {
        "STREAMS_REST_SSL_CERTFILE": str(certfile),
        "STREAMS_REST_SSL_KEYFILE": str(keyfile),
        "STREAMS_REST_SSL_KEY_PASSWORD": KEY_PASSWORD,
        "STREAMS_REST_SSL_CAFILE": str(pki.cafile),
        "STREAMS_REST_SSL_CLIENT_AUTH": "required",
        "STREAMS_REST_CREDENTIALS_FILE": str(path),
        "STREAMS_REST_PRINCIPAL": "instances",
    }
    await create_topic(bootstrap_servers, INPUT_TOPIC, PARTITIONS)
    await create_topic(bootstrap_servers, OUTPUT_TOPIC, PARTITIONS)
    lines, truth = make_text(random.Random(tag), words=20, lines=30, suffix=f"-{tag}")
    await produce(bootstrap_servers, INPUT_TOPIC, [Rec(f"{tag}-{n}".encode(), line.encode()) for n, line in enumerate(lines)])
    found: Secured | None = None

    def http(timeout: float) -> httpx.AsyncClient:
        assert found is not None
        return found.client(pki.client_cert(), headers=TOKEN, timeout=timeout)

    cluster = WordCountCluster(bootstrap_servers, directory, f"secured-fuzz-{tag}", env=env, http=http)
    found = Secured(cluster, pki, truth, certfile, keyfile)
    try:
        await asyncio.gather(cluster.start_process("a"), cluster.start_process("b"))
        await cluster.wait_running(timeout=90)
        await wait_until(lambda: _all_right(found), 60, lambda: "every word counted through both instances")
        yield found
    finally:
        await cluster.close()


async def _all_right(secured: Secured, words: list[str] | None = None) -> bool:
    async with secured.client(secured.pki.client_cert(), headers=TOKEN) as http:
        for instance in secured.instances:
            for word in words or list(secured.truth):
                answer = await http.get(instance.url + _path(word))
                if answer.status_code != 200 or answer.json()["value"] < secured.truth[word]:
                    return False
    return True


def _refused(status: int, headers: Any, body: bytes, where: str) -> None:
    """A 401 with the JSON error and both challenges, naming no data."""
    assert status == 401, f"{where}: {status} {body[:300]!r}"
    assert b'"error":"unauthorized"' in body and b"value" not in body, f"{where}: {body[:300]!r}"
    assert "Bearer" in str(headers.get("www-authenticate", "")), where


# -- fuzzing -----------------------------------------------------------------------------------


def _fuzz(secured: Secured, headers_of: Any, judge: Any) -> Counter[tuple[str, int]]:
    statuses: Counter[tuple[str, int]] = Counter()
    cert = secured.pki.client_cert()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=_cases(_strategies(), secured), which=st.sampled_from(secured.instances), wrong=st.sampled_from(WRONG))  # type: ignore[arg-type]
    def fuzz(case: Any, which: Instance, wrong: dict[str, str]) -> None:
        headers = headers_of(wrong)
        for name in list(case.headers or {}):
            if name.lower() in {"authorization", *(h.lower() for h in headers)}:
                del case.headers[name]
        response = case.call(base_url=which.url, timeout=TIMEOUT_S, headers=headers, verify=str(secured.pki.cafile), cert=cert)
        statuses[(case.operation.label, response.status_code)] += 1
        lowered = {name.lower(): values[0] for name, values in response.headers.items()}
        judge(case, response, lowered)

    fuzz()
    return statuses


@pytest.mark.slow
def test_fuzzed_requests_without_the_right_credentials_are_all_refused(secured: Secured) -> None:
    def judge(case: Any, response: Any, headers: dict[str, str]) -> None:
        where = f"{case.method} {case.formatted_path} {dict(response.request.headers)}"
        if case.formatted_path.rstrip("/") in OPEN:
            check(case.method, case.operation.path, response.status_code, headers, response.content)
            return
        _refused(response.status_code, headers, response.content, where)
        check(case.method, case.operation.path, response.status_code, headers, response.content)

    started = time.monotonic()
    statuses = _fuzz(secured, lambda wrong: wrong, judge)
    print(f"{sum(statuses.values())} unauthenticated fuzzed requests in {time.monotonic() - started:.1f} s")
    assert sum(statuses.values()) >= EXAMPLES // 2
    assert {status for (_, status) in statuses} <= {200, 400, 401, 414, 503}


@pytest.mark.slow
def test_fuzzed_requests_with_the_right_token_keep_the_contract(secured: Secured) -> None:
    def judge(case: Any, response: Any, headers: dict[str, str]) -> None:
        assert response.status_code not in (401, 403), (case.formatted_path, response.text[:300])
        check(case.method, case.operation.path, response.status_code, headers, response.content)
        case.validate_response(response, excluded_checks=[not_a_server_error])

    statuses = _fuzz(secured, lambda wrong: dict(TOKEN), judge)
    assert sum(statuses.values()) >= EXAMPLES // 2
    asyncio.run(_still_serving(secured))


# -- targeted ----------------------------------------------------------------------------------


async def test_bad_targets_without_credentials_get_401_not_the_guard_answer(secured: Secured) -> None:
    async with secured.client(secured.pki.client_cert()) as http:
        for name, (template, target, status) in BAD_REQUESTS.items():
            if status == 414 or template in OPEN:
                continue  # httpx refuses URLs over 64 KiB; the probes are open
            for instance in secured.instances:
                answer = await http.get(instance.url + target.decode("latin-1"))
                _refused(answer.status_code, answer.headers, answer.content, name)


async def test_a_forwarded_request_without_credentials_is_refused(secured: Secured) -> None:
    async with secured.client(secured.pki.client_cert()) as http:
        for instance in secured.instances:
            for other in secured.instances:
                answer = await http.get(instance.url + _path(next(iter(secured.truth))), headers={"X-Streams-Forwarded-By": other.server})
                _refused(answer.status_code, answer.headers, answer.content, f"forged forward to {instance.name}")


@pytest.mark.parametrize("how", ["untrusted certificate", "no certificate", "plain HTTP"])
async def test_the_handshake_refuses_an_untrusted_client(secured: Secured, how: str) -> None:
    word = next(iter(secured.truth))
    for instance in secured.instances:
        if how == "plain HTTP":
            client, url = httpx.AsyncClient(timeout=10), instance.url.replace("https:", "http:")
        else:
            cert = secured.pki.rogue_cert() if how == "untrusted certificate" else None
            client, url = secured.client(cert), instance.url
        async with client:
            with pytest.raises(httpx.HTTPError):
                answer = await client.get(url + _path(word), headers=TOKEN)
                raise AssertionError(f"{how}: answered {answer.status_code} {answer.text[:200]}")


def _served_certificate(secured: Secured, port: int) -> bytes:
    context = secured.context(secured.pki.client_cert())
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.getpeercert(binary_form=True) or b""


async def test_sighup_reloads_the_replaced_certificate(secured: Secured) -> None:
    instance = secured.instances[0]
    assert instance.process is not None
    before = await asyncio.to_thread(_served_certificate, secured, instance.port)
    new_cert, new_key = secured.pki.issue("rotated", secured.pki.ca)
    shutil.copy(new_key, secured.keyfile)
    shutil.copy(new_cert, secured.certfile)
    instance.process.send_signal(signal.SIGHUP)
    expected = ssl.PEM_cert_to_DER_cert(new_cert.read_text().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")

    async def rotated() -> bool:
        return await asyncio.to_thread(_served_certificate, secured, instance.port) == expected

    await wait_until(rotated, 10, lambda: "the new certificate served after SIGHUP")
    assert expected != before and instance.process.poll() is None
    assert await _all_right(secured, sorted(secured.truth)[:3])
    log = instance.log_path.read_text(errors="replace") if instance.log_path else ""
    assert "reloaded the REST certificate" in log
    for secret in SECRET_FORMS:
        assert secret not in log, "a secret in the service's log"


async def _still_serving(secured: Secured) -> None:
    async with secured.client(secured.pki.client_cert(), headers=TOKEN) as http:
        for instance in secured.instances:
            assert instance.process is not None and instance.process.poll() is None, instance.log_tail()
            assert (await http.get(instance.url + "/health")).json()["status"] == "UP"
    assert await _all_right(secured, sorted(secured.truth)[:5])

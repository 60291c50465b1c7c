"""Every client of an application through a broker that requires SASL/SSL and enforces ACLs.

One secured broker for this module (a second broker, started only by these tests): SASL_SSL
with SCRAM, SSL with client certificates, SASL_PLAINTEXT with PLAIN, OAUTHBEARER with unsecured
JWTs, KRaft's StandardAuthorizer. Each application's principal holds exactly the ACLs of
`streams_core.tools.acls.application_acls` (docs/security.md) and its word count must be exact.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from app.wordcount import build_topology
from streams_core import Materialized, Serdes, StreamsBuilder, Topology
from streams_core.broker import LocalKafkaBroker
from streams_core.clients.unsecured_jwt import UnsecuredJwtTokenProvider
from streams_core.runtime.kafka_streams import State
from streams_core.tools.acls import application_acls
from tests.integration.security_kit import (
    LINES,
    PASSWORDS,
    expected_counts,
    grant,
    make_topics,
    produce_keyed,
    produce_lines,
    read_counts,
    read_strings,
)
from tests.integration.streams_testkit import StreamsApp, tasks_of, wait_until
from tests.kafka_utils import unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


async def _prepared(broker: LocalKafkaBroker, principal: str, *, eos: bool) -> tuple[str, str, str]:
    """Topics made by the super user, the principal's least-privilege ACLs; (app id, input, output)."""
    app_id, source, sink = unique_topic("secapp"), unique_topic("lines"), unique_topic("counts")
    await make_topics(broker, [source, sink])
    await grant(broker, application_acls(app_id, principal, input_topics=[source], output_topics=[sink], exactly_once=eos))
    return app_id, source, sink


async def _word_count(
    broker: LocalKafkaBroker,
    tmp_path: Path,
    principal: str,
    client: dict[str, Any],
    *,
    eos: bool = False,
    instances: tuple[dict[str, Any], ...] = ({},),
) -> None:
    app_id, source, sink = await _prepared(broker, principal, eos=eos)
    config = {**client, "processing.guarantee": "exactly_once_v2" if eos else "at_least_once"}
    topology = lambda: build_topology(source, sink, windowed=False)  # noqa: E731
    async with StreamsApp(client["bootstrap.servers"], tmp_path, topology, application_id=app_id, config=config) as app:
        for index, extra in enumerate(instances):
            await app.start(index, **extra)
        await app.wait_settled(tasks_of(2) | tasks_of(2, subtopology=1), timeout=60)
        await produce_lines(broker, source, LINES)
        expected = expected_counts(LINES)
        assert await read_counts(broker, sink, expected, eos=eos) == expected
        assert all(s.state is State.RUNNING for s in app.live.values())
        shown = " ".join(repr(s.metrics()) + repr(s.config) + repr(s.all_metadata()) for s in app.live.values())
        assert not [p for p in PASSWORDS.values() if p in shown], "a password in metrics, config or metadata"


async def test_sasl_ssl_scram_two_instances_least_privilege(
    secure_broker: LocalKafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two instances (the second with two worker processes) as User:alice over SASL_SSL/SCRAM-SHA-512."""
    caplog.set_level(logging.DEBUG)
    client = secure_broker.client_config("SASL_SSL", user="alice")
    assert client["sasl.mechanism"] == "SCRAM-SHA-512"
    workers = {"num.stream.threads": 2, "stream.threads.mode": "process"}
    await _word_count(secure_broker, tmp_path, "User:alice", client, instances=({}, workers))
    logged = caplog.text
    assert logged, "nothing was logged: the secret check below would be empty"
    for password in PASSWORDS.values():
        assert password not in logged


async def test_ssl_client_certificate_exactly_once(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    """User:carol by her client certificate over SSL, exactly-once (transactional ids by prefix)."""
    client = secure_broker.client_config("SSL", user="carol")
    assert "ssl.certfile" in client
    await _word_count(secure_broker, tmp_path, "User:carol", client, eos=True)


async def test_sasl_plaintext_plain(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    """User:bob with SASL/PLAIN over SASL_PLAINTEXT."""
    client = secure_broker.client_config("SASL_PLAINTEXT", user="bob")
    assert client["sasl.mechanism"] == "PLAIN"
    await _word_count(secure_broker, tmp_path, "User:bob", client)


async def test_oauthbearer_token_provider(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    """User:oscar by an OAUTHBEARER token (the broker's unsecured JWT validator) over SASL_SSL."""
    client = {
        "bootstrap.servers": secure_broker.listener("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauth.token.provider": UnsecuredJwtTokenProvider("oscar"),
        "ssl.cafile": str(secure_broker.material.ca_file) if secure_broker.material else "",
    }
    await _word_count(secure_broker, tmp_path, "User:oscar", client)


async def test_wrong_password_fails_start_without_the_password(
    secure_broker: LocalKafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong SCRAM password: start() fails at once (no retry loop); neither the error, the
    config's repr nor the logs show the password, and the log says why (SaslAuthenticationFailed)."""
    caplog.set_level(logging.DEBUG)
    wrong = "not-alices-password-42"
    client = secure_broker.client_config("SASL_SSL", user="alice") | {"sasl.plain.password": wrong}
    app_id, source, sink = await _prepared(secure_broker, "User:alice", eos=False)
    topology = lambda: build_topology(source, sink, windowed=False)  # noqa: E731
    async with StreamsApp(client["bootstrap.servers"], tmp_path, topology, application_id=app_id, config=client) as app:
        streams = app.create(0)
        assert wrong not in repr(streams.config)
        began = time.monotonic()
        with pytest.raises(Exception) as failure:
            await streams.start()
        assert time.monotonic() - began < 30
        assert streams.state is not State.RUNNING
        assert wrong not in str(failure.value) and wrong not in repr(failure.value)
    assert "SaslAuthenticationFailed" in caplog.text
    assert wrong not in caplog.text


async def test_global_table_over_ssl_least_privilege(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    """The global consumer too: a stream-global table join as User:carol (client certificate)."""
    app_id, orders, products, out = (unique_topic(p) for p in ("secglobal", "orders", "products", "enriched"))
    await make_topics(secure_broker, [orders, products, out])
    await grant(secure_broker, application_acls(app_id, "User:carol", input_topics=[orders, products], output_topics=[out]))
    await produce_keyed(secure_broker, products, [(f"p{i}", f"product-{i}") for i in range(5)])
    strings = Serdes.String()

    def topology() -> Topology:
        builder = StreamsBuilder()
        table = builder.global_table(products, Materialized.as_("products"), key_serde=strings, value_serde=strings)
        builder.stream(orders, key_serde=strings, value_serde=strings).join(
            table, lambda order_id, product_id: product_id, lambda product_id, name: f"{product_id}={name}"
        ).to(out, value_serde=strings)
        return builder.build()

    client = secure_broker.client_config("SSL", user="carol")
    async with StreamsApp(client["bootstrap.servers"], tmp_path, topology, application_id=app_id, config=client) as app:
        streams = await app.start(0)
        await wait_until(lambda: streams.state is State.RUNNING, 60, message=lambda: streams.state.name)
        await produce_keyed(secure_broker, orders, [(f"o{i}", f"p{i % 5}") for i in range(20)])
        joined = await read_strings(secure_broker, out, 20)
        assert joined == {f"o{i}": f"p{i % 5}=product-{i % 5}" for i in range(20)}

"""Helpers for the tests against the secured local broker: set-up as the super user, ACLs, word counts.

The broker (`secure_broker`, a module fixture of the security tests) has SASL_SSL, SSL (client
certificates required) and SASL_PLAINTEXT listeners, SCRAM, PLAIN and OAUTHBEARER users and the
StandardAuthorizer: an application's principal holds only the ACLs a test grants it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from streams_core.broker import LocalKafkaBroker
from streams_core.broker.security import BrokerSecurity
from streams_core.clients.acl_admin import AclAdmin, AclBinding
from streams_core.clients.admin import NewTopicSpec
from streams_core.clients.kafka_clients import (
    KafkaTopicPartition,
    create_producer,
    create_restore_consumer,
)
from streams_core.config import StreamsConfig
from streams_core.serde import Serdes
from streams_core.tools.topics import create_topics

__all__ = [
    "PASSWORDS",
    "SECURITY",
    "expected_counts",
    "grant",
    "make_topics",
    "produce_keyed",
    "produce_lines",
    "read_counts",
    "read_strings",
    "super_config",
]

#: Every secret of the test broker's users: none may appear in a log line or an error.
PASSWORDS: Mapping[str, str] = {"alice": "alice-Scram-pw-7f3a", "bob": "bob-Plain-pw-19c2", "dave": "dave-Scram-pw-c0de"}

SECURITY = BrokerSecurity(
    listeners=("SASL_SSL", "SSL", "SASL_PLAINTEXT"),
    scram_users={"alice": PASSWORDS["alice"], "dave": PASSWORDS["dave"]},
    plain_users={"bob": PASSWORDS["bob"]},
    certificate_users=("carol",),
    ssl_client_auth=True,
    authorizer=True,
    oauthbearer=True,
)

LINES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "The Dog barks",
    "a fox and a dog",
    "quick quick slow",
] * 8


def expected_counts(lines: Iterable[str]) -> dict[str, int]:
    return dict(Counter(word for line in lines for word in line.lower().split()))


def super_config(broker: LocalKafkaBroker, **extra: Any) -> StreamsConfig:
    """The super user over SASL_SSL (set-up and checking only)."""
    return StreamsConfig({"application.id": "security-test-admin", **broker.client_config("SASL_SSL"), **extra})


async def make_topics(broker: LocalKafkaBroker, names: Sequence[str], partitions: int = 2) -> None:
    config = broker.client_config("SASL_SSL")
    specs = [NewTopicSpec(name, partitions) for name in names]
    await create_topics(config["bootstrap.servers"], specs, client_config=config)


async def grant(broker: LocalKafkaBroker, acls: Iterable[AclBinding]) -> None:
    async with AclAdmin(super_config(broker)) as admin:
        await admin.create(acls)


async def produce_lines(broker: LocalKafkaBroker, topic: str, lines: Sequence[str]) -> None:
    await produce_keyed(broker, topic, [(str(i), line) for i, line in enumerate(lines)])


async def produce_keyed(broker: LocalKafkaBroker, topic: str, records: Sequence[tuple[str, str]]) -> None:
    """String keys and values, as the super user."""
    producer = create_producer(super_config(broker, **{"linger.ms": 5}))
    await producer.start()
    try:
        for key, value in records:
            await producer.send(topic, key=key.encode(), value=value.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def read_strings(broker: LocalKafkaBroker, topic: str, count: int, *, partitions: int = 2) -> dict[str, str]:
    """The latest string value per key in `topic` once `count` records were read (20 s at most)."""
    consumer = create_restore_consumer(super_config(broker))
    await consumer.start()
    latest: dict[str, str] = {}
    seen = 0
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 20
        while seen < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen += len(records)
                latest.update((r.key.decode(), r.value.decode()) for r in records)
    finally:
        await consumer.stop()
    return latest


async def read_counts(
    broker: LocalKafkaBroker,
    topic: str,
    expected: Mapping[str, int],
    *,
    partitions: int = 2,
    timeout: float = 45.0,
    eos: bool = False,
) -> dict[str, int]:
    """The latest count per word in `topic` (as the super user), until it equals `expected` or time runs out."""
    extra = {"processing.guarantee": "exactly_once_v2"} if eos else {}
    consumer = create_restore_consumer(super_config(broker, **extra))
    await consumer.start()
    latest: dict[str, int] = {}
    serde = Serdes.Long()
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while latest != dict(expected) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    latest[record.key.decode()] = serde.deserialize(topic, record.value)
            await asyncio.sleep(0)
    finally:
        await consumer.stop()
    return latest

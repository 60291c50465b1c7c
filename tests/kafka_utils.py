"""Async helpers for tests against the real broker: topics, producing, reading back.

Every helper opens and closes its own aiokafka client, so tests stay independent of each other;
they are meant for test set-up and checks, not for speed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import RecordMetadata

log = logging.getLogger(__name__)

#: Kafka error code of CreateTopics when the topic exists already.
TOPIC_ALREADY_EXISTS = 36

Consumed: TypeAlias = ConsumerRecord[bytes | None, bytes | None]


@dataclass(frozen=True)
class Rec:
    """One record to produce; ``partition``/``timestamp_ms``/``headers`` are optional."""

    key: bytes | None
    value: bytes | None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: Sequence[tuple[str, bytes]] = field(default_factory=tuple)


RecordLike: TypeAlias = (
    Rec | tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int]
)


def unique_topic(prefix: str = "test") -> str:
    """A topic name no other test uses (the broker lives for the whole session)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _as_rec(record: RecordLike) -> Rec:
    if isinstance(record, Rec):
        return record
    if len(record) == 2:
        return Rec(record[0], record[1])
    if len(record) == 3:
        return Rec(record[0], record[1], partition=record[2])
    raise TypeError(f"a record is Rec, (key, value) or (key, value, partition): {record!r}")


async def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
) -> None:
    """Create ``name`` unless it exists (idempotent); wait until every partition has a leader."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=dict(config or {}))]
        )
        for topic_error in response.topic_errors:
            code = topic_error[1]
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise for_code(code)(f"create topic {topic_error[0]}: {topic_error[2:]}")
        await wait_for_topic(bootstrap, name, partitions, timeout=timeout, admin=admin)
    finally:
        await admin.close()


async def wait_for_topic(
    bootstrap: str,
    name: str,
    partitions: int | None = None,
    *,
    timeout: float = 30.0,
    admin: AIOKafkaAdminClient | None = None,
) -> None:
    """Wait until the metadata shows ``name`` (with ``partitions`` partitions) all with leaders."""
    own = admin is None
    if admin is None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            (topic,) = await admin.describe_topics([name])
            parts = topic["partitions"]
            if (
                topic["error_code"] == 0
                and parts
                and (partitions is None or len(parts) == partitions)
                and all(p["error_code"] == 0 and p["leader"] >= 0 for p in parts)
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready after {timeout} s: {topic}")
            await asyncio.sleep(0.1)
    finally:
        if own:
            await admin.close()


async def topic_partitions(bootstrap: str, topic: str) -> list[TopicPartition]:
    """The partitions of ``topic`` as TopicPartitions, in partition order."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (desc,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if desc["error_code"] != 0:
        raise for_code(desc["error_code"])(f"describe topic {topic}")
    return [
        TopicPartition(topic, p["partition"])
        for p in sorted(desc["partitions"], key=lambda p: p["partition"])
    ]


async def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordLike],
    *,
    transactional_id: str | None = None,
    abort: bool = False,
) -> list[RecordMetadata]:
    """Produce ``records`` (acks=all) and return their metadata, in order.

    With ``transactional_id`` they go in one transaction, aborted instead of committed if ``abort``.
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=transactional_id is not None,
        transactional_id=transactional_id,
    )
    await producer.start()
    try:
        if transactional_id is not None:
            await producer.begin_transaction()
        futures = []
        for record in map(_as_rec, records):
            futures.append(
                await producer.send(
                    topic,
                    value=record.value,
                    key=record.key,
                    partition=record.partition,
                    timestamp_ms=record.timestamp_ms,
                    headers=list(record.headers) or None,
                )
            )
        if transactional_id is not None:
            if abort:
                await producer.abort_transaction()
            else:
                await producer.commit_transaction()
        else:
            await producer.flush()
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


async def read_all(
    bootstrap: str,
    topic: str,
    *,
    isolation_level: str = "read_uncommitted",
    timeout: float = 15.0,
) -> list[Consumed]:
    """Every record of ``topic`` from the beginning up to its end offsets at call time.

    Uses manual assignment (no group). "The end" is ``position >= end_offset`` per partition,
    which also holds when the log ends in transaction markers (control records have offsets but
    are never returned). Records are sorted by (partition, offset).
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = await _partitions_of(bootstrap, topic, timeout)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
            if not remaining:
                break
            if time.monotonic() > deadline:
                positions = {tp: await consumer.position(tp) for tp in remaining}
                raise TimeoutError(f"read_all({topic}): at {positions}, end offsets {ends}")
            batch = await consumer.getmany(*remaining, timeout_ms=200)
            for tp, recs in batch.items():
                records.extend(r for r in recs if r.offset < ends[tp])
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()


async def consume_until(
    bootstrap: str,
    topic: str,
    done: int | Callable[[list[Consumed]], bool],
    *,
    isolation_level: str = "read_uncommitted",
    timeout: float = 30.0,
) -> list[Consumed]:
    """Read ``topic`` from the beginning until ``done`` records arrived (or ``done(records)``).

    For outputs that are still being written (e.g. by a streams app under test). Raises
    TimeoutError, showing what arrived, if the condition is not met in time.
    """
    condition = (lambda recs: len(recs) >= done) if isinstance(done, int) else done
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = await _partitions_of(bootstrap, topic, timeout)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Consumed] = []
        deadline = time.monotonic() + timeout
        while not condition(records):
            if time.monotonic() > deadline:
                raise TimeoutError(f"consume_until({topic}): condition not met; got {records!r}")
            batch = await consumer.getmany(timeout_ms=200)
            for recs in batch.values():
                records.extend(recs)
        return records
    finally:
        await consumer.stop()


async def _partitions_of(bootstrap: str, topic: str, timeout: float) -> list[TopicPartition]:
    """The topic's partitions, waiting for the topic to show in the metadata."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await topic_partitions(bootstrap, topic)
        except KafkaError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not found") from None
            await asyncio.sleep(0.1)

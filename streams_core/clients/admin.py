"""InternalTopicManager: creates and checks the topics Kafka Streams owns (repartition, changelog).

Named after Kafka Streams' `InternalTopicManager`. Creating is idempotent: existing topics are
kept when their partition count is right, a topic created concurrently by another instance
(`TOPIC_ALREADY_EXISTS`) is fine, and a wrong partition count is an error, because the task to
partition mapping depends on it. After creating, it waits until the metadata shows every topic
with a leader for each partition, so that a `subscribe()` or `assign()` that follows sees them.

Metadata is always read for all topics: aiokafka asks for named topics with
`allow_auto_topic_creation=true`, which on a broker with `auto.create.topics.enable` would create
the very topics this class is asked about, with the broker's partition count.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokafka.protocol.metadata import MetadataRequest

from streams_core.errors import StreamsError

__all__ = ["InternalTopicError", "InternalTopicManager", "NewTopicSpec"]

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class InternalTopicError(StreamsError):
    """An internal topic cannot be created, has the wrong partition count, or does not appear."""


@dataclass(frozen=True, slots=True)
class NewTopicSpec:
    """A topic to ensure: its name, partition count and topic configs (`cleanup.policy`, ...).

    `replication_factor` None means the manager's (from `replication.factor`).
    """

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)
    replication_factor: int | None = None

    def __post_init__(self) -> None:
        if not _LEGAL_TOPIC.match(self.name) or self.name in (".", ".."):
            raise ValueError(f"illegal topic name {self.name!r}: 1-249 of [A-Za-z0-9._-]")
        if self.partitions < 1:
            raise ValueError(f"topic {self.name!r} needs at least one partition, got {self.partitions}")


class AdminClient(Protocol):
    """The part of aiokafka's `AIOKafkaAdminClient` this module uses (tests pass a fake)."""

    async def create_topics(self, new_topics: list[NewTopic], timeout_ms: int | None = None) -> Any: ...

    async def delete_topics(self, topics: list[str], timeout_ms: int | None = None) -> Any: ...

    async def describe_topics(self, topics: list[str] | None = None) -> list[Any]: ...

    async def describe_cluster(self) -> dict[str, Any]: ...

    async def describe_configs(self, config_resources: list[ConfigResource]) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class _TopicState:
    partitions: int
    ready: bool


class InternalTopicManager:
    """Ensures, measures and deletes topics through an admin client (started by the caller).

    `replication_factor` -1 means the broker's `default.replication.factor`; aiokafka's
    CreateTopics (v0-v3) cannot say "broker default" itself, so it is read from the broker.
    """

    def __init__(
        self,
        admin: AdminClient,
        *,
        replication_factor: int = -1,
        timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self._admin = admin
        self._replication_factor = replication_factor
        self._timeout = timeout_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._broker_default_rf: int | None = None

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Each topic's partition count; None for a topic that does not exist (or has no metadata yet).

        A topic the principal may not describe is hidden from the listing of all topics: such
        topics raise `TopicAuthorizationFailedError` (naming them) rather than look absent.
        """
        states = await self._describe()
        counts = {t: (states[t].partitions or None if t in states else None) for t in topics}
        await self._check_authorized([t for t, n in counts.items() if n is None])
        return counts

    async def _check_authorized(self, topics: list[str]) -> None:
        """Ask for the named topics (no auto-creation): TOPIC_AUTHORIZATION_FAILED is an error."""
        send = getattr(self._admin, "_send_request", None)  # aiokafka's admin client (not a test's fake)
        if not topics or send is None:
            return
        response = await send(MetadataRequest(topics, allow_auto_topic_creation=False))
        denied = sorted(
            t["topic"] for t in response.to_object()["topics"] if t["error_code"] == TopicAuthorizationFailedError.errno
        )
        if denied:
            raise TopicAuthorizationFailedError(", ".join(denied))

    async def ensure_topics(self, specs: Sequence[NewTopicSpec]) -> list[str]:
        """Make every spec's topic exist with its partition count; returns the names it created.

        1. Fail if an existing topic has another partition count than its spec.
        2. Create the missing ones (a concurrent creation by another instance is fine).
        3. Wait until the metadata shows all of them with leaders, then check the counts again.
        """
        wanted = _unique(specs)
        if not wanted:
            return []
        states = await self._describe()
        self._check_counts(wanted, states)
        missing = [spec for name, spec in wanted.items() if name not in states]
        created = await self._create(missing) if missing else []
        states = await self._wait(lambda s: all(n in s and s[n].ready for n in wanted), sorted(wanted))
        self._check_counts(wanted, states)
        return created

    async def delete_topics(self, topics: Iterable[str]) -> None:
        """Delete topics (absent ones are ignored) and wait until the metadata no longer lists them."""
        names = sorted(set(topics))
        if not names:
            return
        response = await self._admin.delete_topics(names, timeout_ms=int(self._timeout * 1000))
        for topic, code in _errors(response, "topic_error_codes"):
            if code and for_code(code) is not UnknownTopicOrPartitionError:
                raise InternalTopicError(f"cannot delete topic {topic!r}: {for_code(code).__name__}")
        await self._wait(lambda s: not any(n in s for n in names), names, "disappear from")

    async def _create(self, specs: list[NewTopicSpec]) -> list[str]:
        new_topics = [
            NewTopic(spec.name, spec.partitions, await self._rf(spec), topic_configs=dict(spec.config))
            for spec in specs
        ]
        deadline = time.monotonic() + self._timeout
        created: list[str] = []
        while True:
            try:
                response = await self._admin.create_topics(new_topics, timeout_ms=int(self._timeout * 1000))
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
                log.debug("retrying topic creation after %r", exc)
                await asyncio.sleep(self._backoff)
                continue
            retry: list[NewTopic] = []
            by_name = {t.name: t for t in new_topics}
            for topic, code, message in _errors(response, "topic_errors", with_message=True):
                error = for_code(code) if code else None
                if error is None:
                    created.append(topic)
                    log.info("created topic %s", topic)
                elif error is TopicAlreadyExistsError:
                    log.debug("topic %s was created concurrently", topic)
                elif error.retriable and time.monotonic() < deadline:
                    retry.append(by_name[topic])
                else:
                    detail = f": {message}" if message else ""
                    raise InternalTopicError(f"cannot create topic {topic!r}: {error.__name__}{detail}") from error(topic)
            if not retry:
                return created
            new_topics = retry
            await asyncio.sleep(self._backoff)

    async def _rf(self, spec: NewTopicSpec) -> int:
        wanted = spec.replication_factor if spec.replication_factor is not None else self._replication_factor
        if wanted != -1:
            return wanted
        if self._broker_default_rf is None:
            self._broker_default_rf = await self._broker_default_replication_factor()
        return self._broker_default_rf

    async def _broker_default_replication_factor(self) -> int:
        cluster = await self._admin.describe_cluster()
        brokers = cluster.get("brokers") or []
        try:
            node = str(brokers[0]["node_id"])
            responses = await self._admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, node, {"default.replication.factor": None})]
            )
            for resource in responses[0].to_object()["resources"]:
                for entry in resource["config_entries"]:
                    if entry["config_names"] == "default.replication.factor":
                        return int(entry["config_value"])
        except (KafkaError, LookupError, ValueError, TypeError) as exc:
            log.warning("cannot read default.replication.factor (%s); using min(3, brokers)", exc)
        return max(1, min(3, len(brokers)))

    async def _describe(self) -> dict[str, _TopicState]:
        topics = await self._admin.describe_topics()
        states: dict[str, _TopicState] = {}
        for topic in topics:
            if topic["error_code"] == UnknownTopicOrPartitionError.errno:
                continue
            partitions = topic["partitions"]
            ready = topic["error_code"] == 0 and bool(partitions) and all(p["leader"] >= 0 for p in partitions)
            states[topic["topic"]] = _TopicState(len(partitions), ready)
        return states

    async def _wait(
        self, done: Callable[[dict[str, _TopicState]], bool], names: list[str], verb: str = "appear in"
    ) -> dict[str, _TopicState]:
        deadline = time.monotonic() + self._timeout
        while True:
            states = await self._describe()
            if done(states):
                return states
            if time.monotonic() >= deadline:
                raise InternalTopicError(
                    f"topics {', '.join(names)} did not {verb} the metadata within {self._timeout:g} s"
                )
            await asyncio.sleep(self._backoff)

    @staticmethod
    def _check_counts(wanted: Mapping[str, NewTopicSpec], states: Mapping[str, _TopicState]) -> None:
        wrong = [
            f"{name} (expected {spec.partitions}, found {states[name].partitions})"
            for name, spec in wanted.items()
            if name in states and states[name].ready and states[name].partitions != spec.partitions
        ]
        if wrong:
            raise InternalTopicError(
                f"internal topics with the wrong number of partitions: {'; '.join(wrong)}. "
                "Delete them (application reset) or keep the partition counts of the input topics."
            )


def _unique(specs: Sequence[NewTopicSpec]) -> dict[str, NewTopicSpec]:
    wanted: dict[str, NewTopicSpec] = {}
    for spec in specs:
        seen = wanted.setdefault(spec.name, spec)
        if seen.partitions != spec.partitions:
            raise ValueError(
                f"topic {spec.name!r} requested with {seen.partitions} and {spec.partitions} partitions"
            )
    return wanted


def _errors(response: Any, field_name: str, *, with_message: bool = False) -> list[tuple[Any, ...]]:
    """(topic, error code[, message]) rows of a CreateTopics/DeleteTopics response of any version."""
    rows = []
    for row in response.to_object()[field_name]:
        item = (row["topic"], row["error_code"])
        rows.append((*item, row.get("error_message")) if with_message else item)
    return rows

"""Topic checks and creation before a KafkaStreams instance starts its threads.

1. Source topics must exist, co-partitioned sources must agree on partition counts, named sink
   topics must exist (each a clear error naming the topics).
2. Repartition topics and changelog topics are created where missing (`assign()` is synchronous
   and cannot create them later).
3. The run mode's own topics (`RunEnd.own_topics`: KIP-95's metadata topic under
   `autostop.at=eol`; without it, a leftover one is deleted) are created with them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType

from streams_core import clients
from streams_core.errors import MissingSinkTopicError
from streams_core.runtime.assignment import MissingSourceTopicError, ensure_copartitioning
from streams_core.runtime.assignment.internal_topic_config import (
    WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
    changelog_config,
    repartition_config,
)
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["prepare_topics", "watch_pattern_topics"]

log = logging.getLogger(__name__)


async def prepare_topics(
    admin: clients.Admin,
    metadata: TopologyMetadata,
    own_topics: Callable[[clients.Admin], Awaitable[Sequence[clients.NewTopicSpec]]],
    window_additional_retention_ms: int = WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
    topic_defaults: Mapping[str, str] = MappingProxyType({}),
) -> dict[str, int]:
    """Check and create the topics (`own_topics`: the run mode's, asked once the checks passed), with
    Kafka Streams' internal topic configs (internal_topic_config.py); returns the partition count of
    every source, internal and through topic."""
    application_id = metadata.application_id
    if metadata.has_patterns:
        matched = metadata.match_patterns(await admin.list_topics())
        log.info("stream-client [%s] pattern subscriptions match %s", application_id, sorted(matched))
    sources = metadata.external_source_topics | metadata.global_topics
    counts = await admin.partition_counts(sorted(sources))
    missing = sorted(t for t, n in counts.items() if not n)
    if missing:
        raise MissingSourceTopicError.for_topics(missing)
    partition_counts = {t: n for t, n in counts.items() if n}
    internal = metadata.builder.internal_topic_partition_counts(partition_counts)
    partition_counts.update(internal)
    ensure_copartitioning(metadata.copartition_groups, partition_counts)
    sinks = sorted(metadata.external_sink_topics - set(counts))
    sink_counts = await admin.partition_counts(sinks) if sinks else {}
    missing_sinks = sorted(t for t, n in sink_counts.items() if not n)
    if missing_sinks:
        raise MissingSinkTopicError(missing_sinks)
    specs = [
        clients.NewTopicSpec(topic, partitions, repartition_config(topic_defaults)) for topic, partitions in sorted(internal.items())
    ]
    specs += [
        clients.NewTopicSpec(
            spec.topic,
            metadata.num_tasks(spec.subtopology, partition_counts),
            changelog_config(
                metadata.builder.store_builder(spec.store_name), spec.config, window_additional_retention_ms, topic_defaults
            ),
        )
        for spec in metadata.created_changelogs
    ]
    specs += await own_topics(admin)
    if specs:
        created = await admin.ensure_topics(specs)
        if created:
            log.info("stream-client [%s] created internal topics %s", application_id, created)
    return partition_counts


async def watch_pattern_topics(
    new_admin: Callable[[], clients.Admin],
    metadata: TopologyMetadata,
    partition_counts: dict[str, int],
    interval_s: float,
    on_new_topics: Callable[[frozenset[str]], Awaitable[None]],
) -> None:
    """Every `interval_s`, add the cluster's new topics that sources' patterns match, learn their
    partition counts, and call `on_new_topics` (the threads re-subscribe, and the group rebalances)."""
    while True:
        await asyncio.sleep(interval_s)
        admin = new_admin()
        try:
            await admin.start()
            added = metadata.match_patterns(await admin.list_topics())
            if added:
                counts = await admin.partition_counts(sorted(added))
                partition_counts.update({t: n for t, n in counts.items() if n})
        except Exception:
            log.exception("stream-client [%s] could not look for new topics of its patterns", metadata.application_id)
            continue
        finally:
            await admin.close()
        if added:
            log.info("stream-client [%s] new topics match the pattern subscriptions: %s", metadata.application_id, sorted(added))
            await on_new_topics(added)

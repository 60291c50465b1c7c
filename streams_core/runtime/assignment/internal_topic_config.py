"""Kafka Streams' configs for the internal topics it creates (`InternalTopicConfig` and its subclasses).

Repartition topics are purged by the application, so kept forever in 50 MB segments; changelogs of
key-value and versioned stores are compacted; those of window and session stores are compacted and
deleted past the store's retention plus `windowstore.changelog.additional.retention.ms`; a window
store keeping duplicates (a stream-stream join's) is only deleted (Java's `WindowStoreBuilder`). A
store's own log config wins over the `topic.`-prefixed StreamsConfig settings (`topic_defaults`), which
win over the library's defaults; the computed retention (windowed) or compaction lag (versioned) is
set unless the store's log config sets it (a `topic.` setting does not stop it). The classic path creates topics with these (topic_preparation.py) and a
streams group member sends them (the broker refuses a member whose topology differs from a Java
member's in any config: runtime/assignment/streams_group_topology.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "CHANGELOG_TOPIC_CONFIG",
    "INTERNAL_TOPIC_CONFIG",
    "REPARTITION_TOPIC_CONFIG",
    "WINDOWED_CHANGELOG_TOPIC_CONFIG",
    "WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS",
    "changelog_config",
    "repartition_config",
]

#: Kafka Streams' defaults for every internal topic (`InternalTopicConfig.INTERNAL_TOPIC_DEFAULT_OVERRIDES`).
INTERNAL_TOPIC_CONFIG: Mapping[str, str] = {"message.timestamp.type": "CreateTime"}
#: Repartition topics (`RepartitionTopicConfig`): purged by the application, so kept forever, in 50 MB segments.
REPARTITION_TOPIC_CONFIG: Mapping[str, str] = {
    **INTERNAL_TOPIC_CONFIG,
    "cleanup.policy": "delete",
    "segment.bytes": "52428800",
    "retention.ms": "-1",
}
#: Changelogs of key-value and versioned stores (`UnwindowedUnversionedChangelogTopicConfig`, `VersionedChangelogTopicConfig`).
CHANGELOG_TOPIC_CONFIG: Mapping[str, str] = {**INTERNAL_TOPIC_CONFIG, "cleanup.policy": "compact"}
#: Changelogs of window and session stores (`WindowedChangelogTopicConfig`): also deleted past the store's retention.
WINDOWED_CHANGELOG_TOPIC_CONFIG: Mapping[str, str] = {**INTERNAL_TOPIC_CONFIG, "cleanup.policy": "compact,delete"}
#: `windowstore.changelog.additional.retention.ms`' default: a windowed changelog's retention beyond the store's.
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS = 86_400_000
#: A versioned store's changelog keeps versions this much longer than its history retention (a constant in Java).
VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS = 86_400_000
_JAVA_LONG_MAX = 2**63 - 1
_NONE: Mapping[str, str] = MappingProxyType({})


def repartition_config(topic_defaults: Mapping[str, str] = _NONE) -> dict[str, str]:
    """The configs of a repartition topic (`RepartitionTopicConfig.properties`): the library defaults, then the
    `topic.` settings."""
    return {**REPARTITION_TOPIC_CONFIG, **topic_defaults}


def changelog_config(
    store_builder: object, log_config: Mapping[str, str], additional_retention_ms: int, topic_defaults: Mapping[str, str] = _NONE
) -> dict[str, str]:
    """The configs of a store's changelog as Kafka Streams computes them (`InternalTopologyBuilder`'s changelog
    topic configs and `*ChangelogTopicConfig.properties`): the library defaults by store kind, then the `topic.`
    settings, then the store's log config, then the retention (windowed: `retention.ms`) or the compaction lag
    (versioned: `min.compaction.lag.ms`) unless the store's log config sets it, summed as a Java long saturating
    at its maximum.
    """
    history: int | None = getattr(store_builder, "history_retention_ms", None)
    retention: int | None = getattr(store_builder, "retention_period", None)
    if history is not None:
        config = {**CHANGELOG_TOPIC_CONFIG, **topic_defaults, **log_config}
        if "min.compaction.lag.ms" not in log_config:
            config["min.compaction.lag.ms"] = str(min(history + VERSIONED_CHANGELOG_ADDITIONAL_COMPACTION_LAG_MS, _JAVA_LONG_MAX))
    elif retention is not None:
        config = {**WINDOWED_CHANGELOG_TOPIC_CONFIG, **topic_defaults, **log_config}
        if "retention.ms" not in log_config:
            config["retention.ms"] = str(min(retention + additional_retention_ms, _JAVA_LONG_MAX))
    else:
        config = {**CHANGELOG_TOPIC_CONFIG, **topic_defaults, **log_config}
    return config

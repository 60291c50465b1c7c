"""Internal topics' names: `<application.id>-<name>`, known once the owner sets the application id.

The DSL declares repartition topics by their short names while the topology is being built,
before any application id is known; the runtime and the test driver set it before building.
`describe()` shows the short names, as Java does, while topic groups, source topics, internal
topics and built nodes use the full names (`_decorator`), and a full name read back maps to its
source through `_undecorate`. The bottom layer of `InternalTopologyBuilder`.
"""

from __future__ import annotations

from streams_core.errors import TopologyError
from streams_core.processor.internals.node_factories import Decorate, same_topic

__all__ = ["InternalTopicNaming"]


class InternalTopicNaming:
    """The internal topics declared so far (short name -> partition count or None) and the application id."""

    def __init__(self) -> None:
        self._internal_topics: dict[str, int | None] = {}
        self._application_id: str | None = None

    def add_internal_topic(self, topic: str, number_of_partitions: int | None = None) -> None:
        """Declare `topic` internal: its real name is `<application.id>-<topic>` (see `set_application_id`).

        `number_of_partitions` None means: as many as the sub-topology that writes it has tasks.
        """
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"an internal topic needs a non-empty name, got {topic!r}")
        count = number_of_partitions
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise TopologyError(f"internal topic {topic!r}: the number of partitions must be >= 1, got {count!r}")
        self._internal_topics[topic] = number_of_partitions

    def set_application_id(self, application_id: str) -> None:
        """Name internal topics `<application_id>-<name>`; the runtime and the test driver call it before building."""
        if not isinstance(application_id, str) or not application_id:
            raise TopologyError(f"the application id must be a non-empty string, got {application_id!r}")
        self._application_id = application_id

    @property
    def application_id(self) -> str | None:
        return self._application_id

    @property
    def internal_topics(self) -> frozenset[str]:
        """Full names of the internal (repartition) topics; the runtime creates them."""
        decorate = self._decorator()
        return frozenset(decorate(t) for t in self._internal_topics)

    def _decorator(self) -> Decorate:
        """The function giving a topic its full name; TopologyError while internal topics lack an application id."""
        if not self._internal_topics:
            return same_topic
        application_id = self._application_id
        if application_id is None:
            raise TopologyError(
                f"the topology has internal topics {sorted(self._internal_topics)}: call "
                "InternalTopologyBuilder.set_application_id(application_id) before building it"
            )
        internal = self._internal_topics

        def decorate(topic: str) -> str:
            return f"{application_id}-{topic}" if topic in internal else topic

        return decorate

    def _undecorate(self, topic: str) -> str:
        application_id = self._application_id
        if application_id is not None and topic.startswith(application_id + "-"):
            short = topic[len(application_id) + 1 :]
            if short in self._internal_topics:
                return short
        return topic

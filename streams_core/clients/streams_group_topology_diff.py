"""What differs between a streams group's topology and the one a member sent, in words.

Kafka 4.3 refuses a member whose topology is not exactly the group's with INVALID_REQUEST ("Topology
updates are not supported yet.") and says no more; the member then describes the group and names the
first differences (sub-topologies, topics, topic configs, replication factors), so the operator sees which application or
version runs the other topology. Partition counts the member left to the broker (0) are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from streams_core.clients.streams_group_protocol import StreamsGroupTopology, Subtopology, TopicInfo

__all__ = ["topology_difference"]

MAX_DIFFERENCES = 5


def _topics(label: str, group: Sequence[TopicInfo], ours: Sequence[TopicInfo]) -> Iterator[str]:
    theirs_by_name = {t.name: t for t in group}
    ours_by_name = {t.name: t for t in ours}
    if set(theirs_by_name) != set(ours_by_name):
        yield f"{label} {sorted(theirs_by_name)} in the group, {sorted(ours_by_name)} here"
        return
    for name, mine in sorted(ours_by_name.items()):
        theirs = theirs_by_name[name]
        if dict(theirs.configs) != dict(mine.configs):
            keys = sorted(k for k in set(theirs.configs) | set(mine.configs) if theirs.configs.get(k) != mine.configs.get(k))
            changes = ", ".join(f"{k}={theirs.configs.get(k)!r} in the group, {mine.configs.get(k)!r} here" for k in keys)
            yield f"{label} {name}: {changes}"
        if theirs.replication_factor != mine.replication_factor:
            yield f"{label} {name}: replication factor {theirs.replication_factor} in the group, {mine.replication_factor} here"
        if mine.partitions and theirs.partitions and mine.partitions != theirs.partitions:
            yield f"{label} {name}: {theirs.partitions} partitions in the group, {mine.partitions} here"


def _subtopology(group: Subtopology, ours: Subtopology) -> Iterator[str]:
    prefix = f"sub-topology {ours.subtopology_id}:"
    for label, theirs_list, ours_list in (
        ("source topics", group.source_topics, ours.source_topics),
        ("repartition sink topics", group.repartition_sink_topics, ours.repartition_sink_topics),
    ):
        if sorted(theirs_list) != sorted(ours_list):
            yield f"{prefix} {label} {sorted(theirs_list)} in the group, {sorted(ours_list)} here"
    for text in _topics("repartition source topic", group.repartition_source_topics, ours.repartition_source_topics):
        yield f"{prefix} {text}"
    for text in _topics("changelog topic", group.state_changelog_topics, ours.state_changelog_topics):
        yield f"{prefix} {text}"


def _differences(group: StreamsGroupTopology, ours: StreamsGroupTopology) -> Iterator[str]:
    theirs_by_id = {s.subtopology_id: s for s in group.subtopologies}
    ours_by_id = {s.subtopology_id: s for s in ours.subtopologies}
    if set(theirs_by_id) != set(ours_by_id):
        yield f"sub-topologies {sorted(theirs_by_id)} in the group, {sorted(ours_by_id)} here"
    for sid in sorted(set(theirs_by_id) & set(ours_by_id)):
        yield from _subtopology(theirs_by_id[sid], ours_by_id[sid])


def topology_difference(group: StreamsGroupTopology, ours: StreamsGroupTopology) -> str:
    """The first differences, `; `-separated ("" when the described parts are equal: describe v0 carries
    no co-partition groups, so a difference there is not named)."""
    found = []
    for text in _differences(group, ours):
        found.append(text)
        if len(found) == MAX_DIFFERENCES:
            found.append("...")
            break
    return "; ".join(found)

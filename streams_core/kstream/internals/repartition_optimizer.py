"""Kafka Streams' `merge.repartition.topics` optimization, as a rewrite of the written topology.

Java's `InternalStreamsBuilder.mergeRepartitionTopics`: the repartition topics that the DSL added
below one key-changing operation (`select_key`, `map`, `flat_map`, `group_by`'s key selection)
for `group_by_key`, joins and `to_table` become one topic, named after the first of them, whose
sink sits right after the key-changing node; the operators that led to each old topic move below
the new topic's source, and what read each old topic reads on from the node that fed it. A
repartition is merged only when the nearest key- or value-changing operation above it changes the
key (a `map_values` in between keeps its topic), `repartition()`'s topics never are, and a merge
node downstream of a key-changing node whose repartitions all lie below it takes its place (Java's
`maybeUpdateKeyChangingRepartitionNodeMap`). Our DSL writes nodes as operators are called, so
this runs on the written nodes: `InternalStreamsBuilder` remembers which nodes change keys or
values, which are merges, and which repartitions may be merged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streams_core.errors import StreamsError
from streams_core.processor.internals.stateless_processors import KStreamFilter

if TYPE_CHECKING:
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder
    from streams_core.serde import Serde

__all__ = ["OptimizableRepartition", "merge_repartition_topics"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OptimizableRepartition:
    """The nodes and topic of a repartition the DSL added on its own (Java's OptimizableRepartitionNode)."""

    parent: str
    null_filter: str | None
    sink: str
    source: str
    topic: str
    key_serde: Serde[Any] | None
    value_serde: Serde[Any] | None

    @property
    def entry(self) -> str:
        """Its first node: the one whose parent is `parent`."""
        return self.null_filter or self.sink


def _find(itb: InternalTopologyBuilder, start: str, matches: Callable[[str], bool]) -> str | None:
    """Java's `findParentNodeMatching`: `start` or an ancestor matching, searched depth first (the last parent's answer wins)."""
    if matches(start):
        return start
    found = None
    for parent in itb.parents_of(start):
        if matches(parent):
            return parent
        found = _find(itb, parent, matches)
    return found


def _key_changing_parents(isb: InternalStreamsBuilder) -> dict[str, list[OptimizableRepartition]]:
    """Key-changing node (or merge node) -> the repartitions to merge below it, in the order they were added."""
    itb = isb.itb
    by_key_changer: dict[str, list[OptimizableRepartition]] = {name: [] for name in isb.key_changing_nodes}
    for repartition in isb.optimizable_repartitions:
        changer = _find(itb, repartition.parent, lambda n: n in isb.key_changing_nodes or n in isb.value_changing_nodes)
        if changer is not None and changer in isb.key_changing_nodes:
            by_key_changer[changer].append(repartition)
    merged_away: set[str] = set()
    for merge in isb.merge_nodes:
        below: list[OptimizableRepartition] = []
        for changer, repartitions in by_key_changer.items():
            all_below = all(_find(itb, r.entry, lambda n, m=merge: m in itb.parents_of(n)) for r in repartitions)  # type: ignore[misc]
            if all_below and _find(itb, merge, lambda n, k=changer: k in itb.parents_of(n)) is not None:  # type: ignore[misc]
                below.extend(r for r in repartitions if r not in below)
                merged_away.add(changer)
        by_key_changer[merge] = below
    for changer in merged_away:
        del by_key_changer[changer]
    return by_key_changer


def merge_repartition_topics(isb: InternalStreamsBuilder) -> None:
    """Give every key-changing node one repartition topic (see the module docstring)."""
    itb = isb.itb
    for changer, repartitions in _key_changing_parents(isb).items():
        if repartitions:
            _merge(isb, itb, changer, repartitions)


def _merge(isb: InternalStreamsBuilder, itb: InternalTopologyBuilder, changer: str,
           repartitions: list[OptimizableRepartition]) -> None:  # fmt: skip
    topic = repartitions[0].topic
    key_serde = next((r.key_serde for r in repartitions if r.key_serde is not None), None)
    value_serde = next((r.value_serde for r in repartitions if r.value_serde is not None), None)
    isb.burn_repartition_names()  # Java makes the new node's names with an index each
    null_filter, sink, source = f"{topic}-filter", f"{topic}-sink", f"{topic}-source"
    new_parents: dict[str, list[str]] = {}

    def parents(name: str) -> list[str]:
        return new_parents.setdefault(name, list(itb.parents_of(name)))

    children = _children(itb)
    removed: list[str] = []
    for r in repartitions:
        child = _find(itb, r.entry, lambda n: changer in itb.parents_of(n))
        if child is None:
            raise StreamsError(f"found no child of key-changing node {changer!r} above repartition topic {r.topic!r}")
        if child == r.entry:
            feeds = source  # the old topic hung right below the key changer: its readers read the new topic
        else:
            moved = [p for p in parents(child) if p != changer]
            new_parents[child] = [*moved, source]
            feeds = r.parent
        for reader in children.get(r.source, ()):
            new_parents[reader] = [*(p for p in parents(reader) if p != r.source), feeds]
        removed += [n for n in (r.null_filter, r.sink, r.source) if n is not None]
        itb.replace_copartition_source(r.source, source)
        isb.replaced_source(r.source, source)
    order = [n for n in itb.node_names if n not in removed]
    itb.remove_nodes(removed)
    itb.add_internal_topic(topic, None)
    itb.add_processor(null_filter, lambda: KStreamFilter(isb.null_key_predicate(null_filter), False), (changer,))
    itb.add_sink(sink, topic, (null_filter,), key_serde, value_serde, None)
    itb.add_source(source, (topic,), None, key_serde, value_serde, isb.record_timestamp)
    for name, new in new_parents.items():
        if name not in removed:
            itb.set_parents(name, dict.fromkeys(new))
    at = order.index(changer) + 1
    itb.reorder([*order[:at], null_filter, sink, source, *order[at:]])
    log.debug("merged repartition topics %s into %s below %s", [r.topic for r in repartitions], topic, changer)


def _children(itb: InternalTopologyBuilder) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in itb.node_names:
        for parent in itb.parents_of(name):
            out.setdefault(parent, []).append(name)
    return out


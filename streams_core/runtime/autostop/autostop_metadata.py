"""The KIP-95 metadata topic `<application.id>-autostop-metadata`: its records and how to read them.

One partition, compacted. Records, keys and values UTF-8 text:

| key | value | written by |
|---|---|---|
| `stop:<topic>:<partition>` | stop offset of an input partition | the group leader at a run's start |
| `<application.id>` | `0`: completed marker (the stop offsets above are whole) | the leader, after the stop offsets |
| `<application.id>` | `1`: finished marker (the run is over) | the instance that sees every partition done |
| `done:<src topic>:<src p>:<topic>:<p>` | end offset of intermediate partition `<topic>-<p>` once the task that read `<src topic>-<src p>` finished it | that task, after its last commit |
| `claim:<process id>` | the process id | an instance that saw every partition done and wants to write the finished marker |

A null value is a tombstone: the next clean start tombstones every record of the previous run
before it writes new stop offsets (compaction cleans up). Reading the log in order
(`AutostopLog.apply`) gives the state of the current run (`RunState`): valid when a completed
marker follows its stop offsets and no finished marker or tombstone of the marker came after.

The finished marker is written once: every candidate appends a claim, reads the log back, and
only the instance whose claim comes first after the run's completed marker writes it (the
partition orders all writes, so no lock is needed).

An intermediate partition (repartition or `through` topic) has no stop offset of its own: it
stops at the highest end offset its writers reported, once every source partition of every
sub-topology that writes to it has reported (KIP-95 "Multiple producers and deadlock issue").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams_core.common.topic_partition import TopicPartition

__all__ = [
    "COMPLETED",
    "FINISHED",
    "AutostopLog",
    "IntermediateWriters",
    "RunState",
    "claim_key",
    "done_key",
    "metadata_topic_name",
    "stop_key",
]

COMPLETED = b"0"
FINISHED = b"1"


def metadata_topic_name(application_id: str) -> str:
    return f"{application_id}-autostop-metadata"


def stop_key(tp: TopicPartition) -> bytes:
    return f"stop:{tp.topic}:{tp.partition}".encode()


def done_key(source: TopicPartition, intermediate: TopicPartition) -> bytes:
    return f"done:{source.topic}:{source.partition}:{intermediate.topic}:{intermediate.partition}".encode()


def claim_key(process_id: str) -> bytes:
    return f"claim:{process_id}".encode()


def _parse_tp(parts: list[str]) -> TopicPartition:
    return TopicPartition(parts[0], int(parts[1]))


@dataclass(frozen=True, slots=True)
class RunState:
    """What the metadata log says of the current run."""

    stop_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Input partition -> stop offset (valid only when `completed`)."""
    done: Mapping[tuple[TopicPartition, TopicPartition], int] = field(default_factory=dict)
    """(source partition, intermediate partition) -> reported end offset."""
    completed: bool = False
    finished: bool = False
    keys: frozenset[bytes] = frozenset()
    claimant: str | None = None
    """The process whose claim to write the finished marker came first in this run."""
    """Every live key of the log (what a new run must tombstone)."""

    @property
    def valid(self) -> bool:
        """Stop offsets of a run still under way: reuse them (a restart after a failure)."""
        return self.completed and not self.finished


class IntermediateWriters:
    """Which source partitions must report before an intermediate partition's stop offset is known.

    `writers` maps an intermediate topic to the source partitions of every sub-topology that
    writes to it (all partitions of its source topics).
    """

    __slots__ = ("_writers",)

    def __init__(self, writers: Mapping[str, Iterable[TopicPartition]]) -> None:
        self._writers = {topic: frozenset(sources) for topic, sources in writers.items()}

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._writers)

    def stop_offset(self, tp: TopicPartition, done: Mapping[tuple[TopicPartition, TopicPartition], int]) -> int | None:
        """The highest end offset reported for `tp`, once every writer's source partition reported; else None."""
        sources = self._writers.get(tp.topic)
        if sources is None:
            return None
        best = 0
        for source in sources:
            reported = done.get((source, tp))
            if reported is None:
                return None
            best = max(best, reported)
        return best


class AutostopLog:
    """Reads the metadata partition record by record (in offset order) into a `RunState`."""

    __slots__ = ("_application_key", "_claimant", "_completed", "_done", "_finished", "_keys", "_stops")

    def __init__(self, application_id: str) -> None:
        self._application_key = application_id.encode()
        self._stops: dict[TopicPartition, int] = {}
        self._done: dict[tuple[TopicPartition, TopicPartition], int] = {}
        self._completed = False
        self._finished = False
        self._keys: set[bytes] = set()
        self._claimant: str | None = None

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the log; unknown keys are ignored (a newer writer's records)."""
        if key is None:
            return
        if value is None:
            self._keys.discard(key)
        else:
            self._keys.add(key)
        if key == self._application_key:
            if value is None:
                self._completed = self._finished = False
            elif value == COMPLETED:
                self._completed, self._finished = True, False
                self._claimant = None
            elif value == FINISHED:
                self._finished = True
            return
        text = key.decode(errors="replace")
        parts = text.split(":")
        try:
            if parts[0] == "stop" and len(parts) == 3:
                tp = _parse_tp(parts[1:])
                if value is None:
                    self._stops.pop(tp, None)
                else:
                    self._stops[tp] = int(value)
            elif parts[0] == "claim":
                if value is not None and self._completed and self._claimant is None:
                    self._claimant = value.decode(errors="replace")
            elif parts[0] == "done" and len(parts) == 5:
                pair = (_parse_tp(parts[1:3]), _parse_tp(parts[3:5]))
                if value is None:
                    self._done.pop(pair, None)
                else:
                    self._done[pair] = int(value)
        except ValueError:
            return

    def state(self) -> RunState:
        return RunState(
            dict(self._stops), dict(self._done), self._completed, self._finished, frozenset(self._keys), self._claimant
        )

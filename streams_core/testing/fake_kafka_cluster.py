"""FakeKafkaCluster: an in-memory Kafka for broker-free runtime tests (logs, groups, transactions).

It keeps what a broker keeps, with the semantics the runtime relies on (pinned against a real
broker in tests/integration/test_aiokafka_contract.py): partitions are logs of offsets, where
transaction markers take one offset each; records of an open transaction are invisible to
read_committed readers (the last stable offset stops before them) and aborted ones never
visible; groups run eager rebalances through the members' own assignor; a second producer with
a transactional id fences the first. Faults are injected per operation, and every produce,
commit, transaction step and rebalance is appended to `events`, so tests assert orders.
The clients over it are in `fake_kafka.py`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from streams_core import clients
from streams_core.clients.ports import GroupAssignor
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition

__all__ = ["ClusterEvent", "FakeKafkaCluster", "FakeRecord", "FakeRecordMetadata", "GroupMember", "as_committed"]


def as_committed(offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit as aiokafka's commit calls take them: an offset alone has empty metadata."""
    return {
        tp: OffsetAndMetadata(*committed) if isinstance(committed, tuple) else OffsetAndMetadata(committed)
        for tp, committed in offsets.items()
    }


def _offsets(committed: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    return {tp: c.offset for tp, c in committed.items()}

log = logging.getLogger(__name__)

Headers = tuple[tuple[str, bytes], ...]


class FakeRecord(NamedTuple):
    """A record in a partition's log, as a consumer returns it (the `RawRecord` port)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class FakeRecordMetadata(NamedTuple):
    """Where a delivered batch went (the `RecordMetadata` port): its first record's offset."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """One step the cluster saw: `kind` (produce, commit, txn_commit, rebalance...), the client, details."""

    kind: str
    client: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.detail[key]


class _Txn:
    """One transaction of a transactional id: its partitions, pending offsets, and fate."""

    __slots__ = ("deadline", "first_offsets", "offsets", "state", "transactional_id")

    def __init__(self, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.state = "open"
        self.first_offsets: dict[TopicPartition, int] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.deadline = time.monotonic() + timeout_ms / 1000


class _Entry:
    """One offset of a log: a data record (maybe in a transaction) or a transaction marker."""

    __slots__ = ("record", "txn")

    def __init__(self, record: FakeRecord | None, txn: _Txn | None) -> None:
        self.record = record
        self.txn = txn

    def visible(self, read_committed: bool) -> bool:
        if self.record is None:
            return False
        return not read_committed or self.txn is None or self.txn.state == "committed"


class _Partition:
    """A partition's log; `log_start` moves when records are deleted (retention)."""

    __slots__ = ("entries", "log_start", "open_txns")

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.log_start = 0
        self.open_txns: dict[_Txn, int] = {}

    @property
    def high_watermark(self) -> int:
        return len(self.entries)

    @property
    def last_stable_offset(self) -> int:
        return min(self.open_txns.values(), default=len(self.entries))


class GroupMember(Protocol):
    """What the group coordinator needs of a subscribed consumer (`FakeConsumer`)."""

    member_id: str
    topics: tuple[str, ...]
    assignor: GroupAssignor | None

    async def _revoke_for_rebalance(self) -> None: ...

    async def _receive_assignment(
        self, generation: int, partitions: frozenset[TopicPartition], user_data: bytes | None
    ) -> None: ...


class _Group:
    """A consumer group: its members (oldest first), generation, and committed offsets."""

    __slots__ = ("committed", "generation", "id", "members", "pending", "rebalancing", "synced", "task")

    def __init__(self, group_id: str) -> None:
        self.id = group_id
        self.members: dict[str, GroupMember] = {}
        self.generation = 0
        self.synced: dict[str, int] = {}
        """Generation each member last received an assignment in."""
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending = False
        self.rebalancing = False
        self.task: asyncio.Task[None] | None = None


class _Fault:
    __slots__ = ("client", "exc", "times")

    def __init__(self, exc: BaseException, client: str | None, times: int) -> None:
        self.exc = exc
        self.client = client
        self.times = times


class FakeKafkaCluster:
    """Topics, groups and transactions in memory; one per test, shared by every client of the test."""

    def __init__(self, *, default_partitions: int = 1) -> None:
        self._topics: dict[str, list[_Partition]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._groups: dict[str, _Group] = {}
        self._txn_epochs: dict[str, int] = {}
        self._open_txns: dict[str, _Txn] = {}
        self._faults: dict[str, list[_Fault]] = {}
        self._fetch_faults: dict[TopicPartition, list[_Fault]] = {}
        self._delivery_faults: list[tuple[str, int | None, _Fault]] = []
        self._changed = asyncio.Event()
        self._round_robin = itertools.count()
        self.default_partitions = default_partitions
        self.events: list[ClusterEvent] = []
        """Every produce, offset commit, transaction step and rebalance, in order."""

    # -- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None) -> None:
        """Create a topic (an existing one with the same partition count is kept)."""
        count = partitions or self.default_partitions
        existing = self._topics.get(name)
        if existing is not None:
            if len(existing) != count:
                raise ValueError(f"topic {name!r} exists with {len(existing)} partitions, not {count}")
            return
        self._topics[name] = [_Partition() for _ in range(count)]
        self._topic_configs[name] = dict(config or {})
        self.log_event("topic_created", "cluster", topic=name, partitions=count)
        self.notify()

    def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is not None:
            self._topic_configs.pop(name, None)
            self.log_event("topic_deleted", "cluster", topic=name)
            self.notify()

    def topics(self) -> dict[str, int]:
        """Every topic with its partition count."""
        return {name: len(parts) for name, parts in self._topics.items()}

    def partition_count(self, topic: str) -> int | None:
        parts = self._topics.get(topic)
        return len(parts) if parts is not None else None

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self._topic_configs[topic])

    def _partition(self, tp: TopicPartition) -> _Partition:
        parts = self._topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            raise clients.KafkaTimeoutError(f"unknown topic or partition {tp}")
        return parts[tp.partition]

    def has_partition(self, tp: TopicPartition) -> bool:
        parts = self._topics.get(tp.topic)
        return parts is not None and 0 <= tp.partition < len(parts)

    def delete_records(self, tp: TopicPartition, before_offset: int) -> None:
        """Retention: records below `before_offset` are gone (the log start moves)."""
        part = self._partition(tp)
        part.log_start = max(part.log_start, min(before_offset, part.high_watermark))

    # -- producing and reading --------------------------------------------------------------

    def produce(
        self,
        topic: str,
        key: bytes | str | None,
        value: bytes | str | None,
        *,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> FakeRecord:
        """Append one committed record (as a non-transactional producer would); str is UTF-8 encoded."""
        if topic not in self._topics:
            self.create_topic(topic)
        key_bytes = key.encode() if isinstance(key, str) else key
        value_bytes = value.encode() if isinstance(value, str) else value
        count = len(self._topics[topic])
        if partition is None:
            partition = (
                default_partition(key_bytes, count) if key_bytes is not None else next(self._round_robin) % count
            )
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        (record,) = self._append(TopicPartition(topic, partition), [(ts, key_bytes, value_bytes, tuple(headers))], None, "test")
        return record

    def _append(
        self,
        tp: TopicPartition,
        rows: Sequence[tuple[int, bytes | None, bytes | None, Headers]],
        txn: _Txn | None,
        client: str,
    ) -> list[FakeRecord]:
        part = self._partition(tp)
        out = []
        if txn is not None and txn not in part.open_txns:
            part.open_txns[txn] = part.high_watermark
            txn.first_offsets[tp] = part.high_watermark
        for ts, key, value, headers in rows:
            record = FakeRecord(tp.topic, tp.partition, part.high_watermark, ts, key, value, headers)
            part.entries.append(_Entry(record, txn))
            out.append(record)
        self.log_event(
            "produce", client, topic=tp.topic, partition=tp.partition, offset=out[0].offset if out else None,
            count=len(out), transactional_id=txn.transactional_id if txn else None,
        )
        self.notify()
        return out

    def records(self, topic: str, *, committed_only: bool = True, partition: int | None = None) -> list[FakeRecord]:
        """The data records of a topic (partition by partition); `committed_only` as read_committed sees them."""
        self._expire_transactions()
        out = []
        for index, part in enumerate(self._topics.get(topic, [])):
            if partition is not None and index != partition:
                continue
            end = part.last_stable_offset if committed_only else part.high_watermark
            for entry in part.entries[part.log_start:end]:
                if entry.visible(committed_only) and entry.record is not None:
                    out.append(entry.record)
        return out

    def values(self, topic: str, *, committed_only: bool = True) -> list[bytes | None]:
        return [r.value for r in self.records(topic, committed_only=committed_only)]

    def end_offsets(self, topic: str, *, committed_only: bool = False) -> dict[TopicPartition, int]:
        """High watermarks per partition (last stable offsets with `committed_only`)."""
        self._expire_transactions()
        return {
            TopicPartition(topic, i): (p.last_stable_offset if committed_only else p.high_watermark)
            for i, p in enumerate(self._topics.get(topic, []))
        }

    def _end_offset(self, tp: TopicPartition, read_committed: bool) -> int:
        self._expire_transactions()
        part = self._partition(tp)
        return part.last_stable_offset if read_committed else part.high_watermark

    def _read(
        self, tp: TopicPartition, position: int, read_committed: bool, max_records: int
    ) -> tuple[list[FakeRecord], int]:
        """Records from `position` (past markers and invisible records) and the position after them."""
        if self._open_txns:
            self._expire_transactions()
        part = self._partition(tp)
        end = part.last_stable_offset if read_committed else part.high_watermark
        if position < part.log_start or position > part.high_watermark:
            raise clients.OffsetOutOfRangeError({tp: position})
        out: list[FakeRecord] = []
        while position < end and len(out) < max_records:
            entry = part.entries[position]
            if entry.visible(read_committed) and entry.record is not None:
                out.append(entry.record)
            position += 1
        return out, position

    def _log_start(self, tp: TopicPartition) -> int:
        return self._partition(tp).log_start

    # -- transactions -----------------------------------------------------------------------

    def _init_producer(self, transactional_id: str) -> int:
        """InitProducerId: a new epoch fences older producers; their open transaction is aborted."""
        epoch = self._txn_epochs.get(transactional_id, -1) + 1
        self._txn_epochs[transactional_id] = epoch
        old = self._open_txns.pop(transactional_id, None)
        if old is not None:
            self._finish(old, commit=False, client=transactional_id, reason="fenced")
        self.log_event("init_producer", transactional_id, transactional_id=transactional_id, epoch=epoch)
        return epoch

    def _epoch(self, transactional_id: str) -> int:
        return self._txn_epochs.get(transactional_id, -1)

    def _begin(self, transactional_id: str, timeout_ms: int) -> _Txn:
        txn = _Txn(transactional_id, timeout_ms)
        self._open_txns[transactional_id] = txn
        self.log_event("txn_begin", transactional_id, transactional_id=transactional_id)
        return txn

    def _finish(self, txn: _Txn, *, commit: bool, client: str, reason: str = "") -> None:
        """Write a marker in every partition of the transaction; commit its offsets or drop them."""
        if txn.state != "open":
            return
        txn.state = "committed" if commit else "aborted"
        if self._open_txns.get(txn.transactional_id) is txn:
            del self._open_txns[txn.transactional_id]
        for tp in sorted(txn.first_offsets):
            part = self._partition(tp) if self.has_partition(tp) else None
            if part is not None:
                part.open_txns.pop(txn, None)
                part.entries.append(_Entry(None, txn))
        if commit:
            for group_id, offsets in txn.offsets.items():
                self._group(group_id).committed.update(offsets)
        detail: dict[str, Any] = {
            "transactional_id": txn.transactional_id,
            "partitions": sorted(txn.first_offsets),
            "offsets": {g: _offsets(o) for g, o in txn.offsets.items()},
        }
        if reason:
            detail["reason"] = reason
        self.log_event("txn_commit" if commit else "txn_abort", client, **detail)
        self.notify()

    def _expire_transactions(self) -> None:
        """The coordinator aborts transactions open longer than their `transaction.timeout.ms`."""
        now = time.monotonic()
        for txn in [t for t in self._open_txns.values() if t.deadline < now]:
            self._finish(txn, commit=False, client=txn.transactional_id, reason="timeout")

    # -- groups -----------------------------------------------------------------------------

    def _group(self, group_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group(group_id)
        return group

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (next offset to read per partition)."""
        group = self._groups.get(group_id)
        return _offsets(group.committed) if group else {}

    def committed_with_metadata(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets with the metadata each was committed with."""
        group = self._groups.get(group_id)
        return dict(group.committed) if group else {}

    def members(self, group_id: str) -> list[str]:
        group = self._groups.get(group_id)
        return list(group.members) if group else []

    def generation(self, group_id: str) -> int:
        group = self._groups.get(group_id)
        return group.generation if group else 0

    def group_stable(self, group_id: str) -> bool:
        """No rebalance is under way or pending, and every member has its assignment."""
        group = self._groups.get(group_id)
        if group is None:
            return True
        return (
            not group.rebalancing and not group.pending
            and all(group.synced.get(m) == group.generation for m in group.members)
        )

    def _join(self, group_id: str, member: GroupMember) -> None:
        group = self._group(group_id)
        group.members[member.member_id] = member
        self.log_event("join", member.member_id, group=group_id)
        self._request_rebalance(group)

    def _leave(self, group_id: str, member_id: str, *, reason: str = "leave") -> None:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        del group.members[member_id]
        group.synced.pop(member_id, None)
        self.log_event(reason, member_id, group=group_id)
        if group.members:
            self._request_rebalance(group)
        else:
            group.generation += 1

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    def kick(self, group_id: str, member_id: str) -> None:
        """Expire a member's session: the others rebalance without it; its next commit fails."""
        self._leave(group_id, member_id, reason="kicked")

    def _request_rebalance(self, group: _Group) -> None:
        group.pending = True
        if group.task is None or group.task.done():
            group.task = asyncio.get_running_loop().create_task(self._run_rebalances(group))

    async def _run_rebalances(self, group: _Group) -> None:
        while group.pending and group.members:
            group.rebalancing = True
            try:
                await self._rebalance(group)
            except Exception:
                log.exception("rebalance of group %s failed", group.id)
            finally:
                group.rebalancing = False
                self.notify()

    async def _rebalance(self, group: _Group) -> None:
        """Eager: revoke everything on every member, the leader assigns, each member receives."""
        await asyncio.gather(*(m._revoke_for_rebalance() for m in list(group.members.values())))
        group.pending = False
        members = dict(group.members)
        if not members:
            return
        group.generation += 1
        generation = group.generation
        leader_id, leader = next(iter(members.items()))
        topics = sorted({t for m in members.values() for t in m.topics})
        counts = {t: len(self._topics[t]) for t in topics if t in self._topics}
        assignments: dict[str, tuple[frozenset[TopicPartition], bytes | None]] = {}
        if leader.assignor is not None:
            result = leader.assignor.assign(counts, {mid: self._subscription(m) for mid, m in members.items()})
            for mid, assignment in result.items():
                assignments[mid] = (frozenset(TopicPartition(t, p) for t, p in assignment.partitions), assignment.user_data)
        else:  # a plain consumer group: round-robin
            tps = [TopicPartition(t, p) for t in topics for p in range(counts.get(t, 0))]
            ids = list(members)
            for mid in ids:
                assignments[mid] = (frozenset(tp for i, tp in enumerate(tps) if ids[i % len(ids)] == mid), None)
        self.log_event(
            "rebalance", leader_id, group=group.id, generation=generation, members=list(members),
            assignment={mid: sorted(a[0]) for mid, a in assignments.items()},
        )

        async def receive(mid: str, member: GroupMember) -> None:
            if group.members.get(mid) is not member:
                return  # left meanwhile
            partitions, user_data = assignments.get(mid, (frozenset(), None))
            group.synced[mid] = generation
            await member._receive_assignment(generation, partitions, user_data)

        await asyncio.gather(*(receive(mid, m) for mid, m in members.items()))

    @staticmethod
    def _subscription(member: GroupMember) -> bytes:
        assert member.assignor is not None
        return member.assignor.subscription()

    def _check_commit(self, group_id: str, member_id: str, generation: int) -> None:
        """Kafka's OffsetCommit checks: an unknown member fails; an old generation is retriable mid-rebalance."""
        group = self._group(group_id)
        if member_id not in group.members:
            raise clients.CommitFailedError()
        if generation != group.generation:
            if group.rebalancing or group.pending:
                raise clients.RebalanceInProgressError(f"group {group_id} is rebalancing")
            raise clients.CommitFailedError()

    def _commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], client: str) -> None:
        committed = as_committed(offsets)
        self._group(group_id).committed.update(committed)
        self.log_event("commit", client, group=group_id, offsets=_offsets(committed))

    # -- faults -----------------------------------------------------------------------------

    def fail_next(self, operation: str, exc: BaseException, *, client: str | None = None, times: int = 1) -> None:
        """Make the next `times` calls of `operation` raise `exc`, optionally only for clients
        whose id (or transactional id) contains `client`. Operations: commit, getmany,
        end_offsets, send, flush, begin_transaction, send_offsets_to_transaction,
        commit_transaction, abort_transaction, producer_start, consumer_start, partitions_for."""
        self._faults.setdefault(operation, []).append(_Fault(exc, client, times))

    def fail_fetch(self, tp: TopicPartition, exc: BaseException, *, times: int = 1) -> None:
        """The next `times` fetches of `tp` raise `exc` from getmany."""
        self._fetch_faults.setdefault(tp, []).append(_Fault(exc, None, times))

    def fail_delivery(
        self, topic: str, exc: BaseException | None = None, *, partition: int | None = None, times: int = 1
    ) -> None:
        """The next `times` batches for `topic` (one partition, or any) fail: their futures hold `exc`."""
        error = exc if exc is not None else clients.KafkaTimeoutError(f"injected delivery failure to {topic}")
        self._delivery_faults.append((topic, partition, _Fault(error, None, times)))

    @staticmethod
    def _take(faults: list[_Fault] | None, names: Iterable[str]) -> BaseException | None:
        if not faults:
            return None
        names = [n for n in names if n]
        for fault in faults:
            if fault.client is None or any(fault.client in n for n in names):
                fault.times -= 1
                if fault.times <= 0:
                    faults.remove(fault)
                return fault.exc
        return None

    def _fault(self, operation: str, *names: str) -> BaseException | None:
        return self._take(self._faults.get(operation), names)

    def _fetch_fault(self, tp: TopicPartition) -> BaseException | None:
        return self._take(self._fetch_faults.get(tp), ())

    def _delivery_fault(self, tp: TopicPartition) -> BaseException | None:
        for topic, partition, fault in self._delivery_faults:
            if topic == tp.topic and partition in (None, tp.partition):
                fault.times -= 1
                if fault.times <= 0:
                    self._delivery_faults.remove((topic, partition, fault))
                return fault.exc
        return None

    # -- events and wake-ups ----------------------------------------------------------------

    def log_event(self, kind: str, client: str, **detail: Any) -> None:
        """Append an event (tests may add their own, e.g. a store flush, to assert orders with them)."""
        self.events.append(ClusterEvent(kind, client, detail))

    def kinds(self, *kinds: str) -> list[str]:
        """The kinds of the events, in order (only `kinds` when given)."""
        return [e.kind for e in self.events if not kinds or e.kind in kinds]

    def events_of(self, *kinds: str) -> list[ClusterEvent]:
        return [e for e in self.events if e.kind in kinds]

    def notify(self) -> None:
        """Wake every waiting getmany (data, markers, assignment or pause changed)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for_change(self, timeout: float) -> None:
        """Wait until `notify()` or `timeout` seconds (no busy loop)."""
        if timeout <= 0:
            return
        event = self._changed
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            pass

    async def wait_stable(self, group_id: str, timeout: float = 5.0) -> None:
        """Wait until the group has no rebalance under way (TimeoutError otherwise)."""
        async with asyncio.timeout(timeout):
            while not self.group_stable(group_id):
                await self._wait_for_change(0.05)

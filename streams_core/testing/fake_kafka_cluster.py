"""FakeKafkaCluster: an in-memory Kafka for broker-free runtime tests (logs, groups, transactions).

It keeps what a broker keeps, with the semantics the runtime relies on (pinned against a real
broker in tests/integration/test_aiokafka_contract.py): partitions are logs of offsets, where
transaction markers take one offset each; records of an open transaction are invisible to
read_committed readers (the last stable offset stops before them) and aborted ones never
visible; groups run eager rebalances through the members' own assignor; a second producer with
a transactional id fences the first. Faults are injected per operation, and every produce,
commit, transaction step and rebalance is appended to `events`, so tests assert orders.
The clients over it are in `fake_kafka.py`. The cluster is built in layers, one concept a module:
the event journal (`fake_cluster_events.py`), topics and logs (`fake_topics.py`, `fake_log.py`),
groups (`fake_group_coordinator.py`), transactions (`fake_transaction_coordinator.py`); this
module adds fault injection on top.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing.fake_cluster_events import ClusterEvent
from streams_core.testing.fake_group_coordinator import GroupMember
from streams_core.testing.fake_log import FakeRecord, FakeRecordMetadata, FakeTransaction, Headers, as_committed
from streams_core.testing.fake_transaction_coordinator import FakeTransactionCoordinator

__all__ = [
    "ClusterEvent",
    "FakeKafkaCluster",
    "FakeRecord",
    "FakeRecordMetadata",
    "FakeTransaction",
    "GroupMember",
    "Headers",
    "as_committed",
]


class _Fault:
    """An injected error: raised by the next `times` matching calls (of `client`, or of any)."""

    __slots__ = ("client", "exc", "times")

    def __init__(self, exc: BaseException, client: str | None, times: int) -> None:
        self.exc = exc
        self.client = client
        self.times = times


class FakeKafkaCluster(FakeTransactionCoordinator):
    """Topics, groups and transactions in memory; one per test, shared by every client of the test."""

    def __init__(self, *, default_partitions: int = 1) -> None:
        super().__init__(default_partitions=default_partitions)
        self._faults: dict[str, list[_Fault]] = {}
        self._fetch_faults: dict[TopicPartition, list[_Fault]] = {}
        self._delivery_faults: list[tuple[str, int | None, _Fault]] = []

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

"""The fake cluster's transaction coordinator: producer epochs, fencing, markers, timeouts.

InitProducerId gives a transactional id a new epoch and aborts the open transaction of the
producer it fences; ending a transaction writes a marker in each of its partitions and, on
commit, commits the offsets sent with it to their groups; a transaction open longer than its
`transaction.timeout.ms` is aborted before the next read.
"""

from __future__ import annotations

import time
from typing import Any

from streams_core.testing.fake_group_coordinator import FakeGroupCoordinator
from streams_core.testing.fake_log import FakeTransaction, LogEntry, offsets_of

__all__ = ["FakeTransactionCoordinator"]


class FakeTransactionCoordinator(FakeGroupCoordinator):
    """Transactional ids, their epochs and open transactions, over the topics and groups they write to."""

    def __init__(self, *, default_partitions: int = 1) -> None:
        super().__init__(default_partitions=default_partitions)
        self._txn_epochs: dict[str, int] = {}
        self._open_txns: dict[str, FakeTransaction] = {}

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

    def _begin(self, transactional_id: str, timeout_ms: int) -> FakeTransaction:
        txn = FakeTransaction(transactional_id, timeout_ms)
        self._open_txns[transactional_id] = txn
        self.log_event("txn_begin", transactional_id, transactional_id=transactional_id)
        return txn

    def _finish(self, txn: FakeTransaction, *, commit: bool, client: str, reason: str = "") -> None:
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
                part.entries.append(LogEntry(None, txn))
        if commit:
            for group_id, offsets in txn.offsets.items():
                self._group(group_id).committed.update(offsets)
        detail: dict[str, Any] = {
            "transactional_id": txn.transactional_id,
            "partitions": sorted(txn.first_offsets),
            "offsets": {g: offsets_of(o) for g, o in txn.offsets.items()},
        }
        if reason:
            detail["reason"] = reason
        self.log_event("txn_commit" if commit else "txn_abort", client, **detail)
        self.notify()

    def _expire_transactions(self) -> None:
        """The coordinator aborts transactions open longer than their `transaction.timeout.ms`."""
        if not self._open_txns:
            return
        now = time.monotonic()
        for txn in [t for t in self._open_txns.values() if t.deadline < now]:
            self._finish(txn, commit=False, client=txn.transactional_id, reason="timeout")

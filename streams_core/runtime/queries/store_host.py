"""StoreHost: the one asynchronous path by which an instance reads its copies of stores, with a deadline.

A store host is where copies of stores live: a stream thread in the instance's process
(`StreamThreadStateStoreProvider`) or a worker process (`RemoteStoreProvider`, over the worker's
query channel). The instance asks a host for one `HostRequest` (a read of a store view, with the
copy's position when asked, or the copies' lags) and awaits the answer until the request's `Deadline`; a host
that does not answer in time raises `StoreQueryTimeoutError`, an `InvalidStateStoreError` (the
REST layer's 503 with `Retry-After`). Each worker has its own channel and no lock is held
across a wait, so a stalled worker delays only the answers asked of it.

`QueryableStoreProvider.query()` asks every host holding a copy at once and merges their
answers as the composite read-only views do; `query_each()` asks several reads, a host's in one
request (`StoreReads`). IQv2 (`runtime/queries/interactive_query.py`) is built on it: one read per
partition, `StoreQueryTimeoutError` and the other `InvalidStateStoreError`s mapped to failure
reasons; the REST layer's reads are IQv2 queries (api/reads.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from streams_core.errors import InvalidStateStoreError
from streams_core.state.queryable_store_types import QueryableStoreType

__all__ = [
    "ALL_ACTIVE",
    "Deadline",
    "HostRequest",
    "LagsRead",
    "NoCopyError",
    "RemoteCopy",
    "StoreHost",
    "StoreQuery",
    "StoreQueryTimeoutError",
    "StoreRead",
    "StoreReads",
    "merged",
    "store_query",
]


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """Which local copies a query may read (Kafka's StoreQueryParameters without name and type):
    one partition's or all, standbys too when `stale`, and then only those at most `max_lag` behind."""

    partition: int | None = None
    stale: bool = False
    max_lag: int | None = None


ALL_ACTIVE = StoreQuery()

store_query = functools.lru_cache(maxsize=4096)(StoreQuery)
"""The `StoreQuery` of a partition, staleness and lag bound, made once (one per query on the hottest path)."""


class Deadline(NamedTuple):
    """The monotonic time by which a query must be answered (`time.monotonic()` seconds).

    A tuple, not a frozen dataclass: one is made per query, on the hottest path."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left, 0 once passed."""
        return max(0.0, self.at - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at


class StoreRead(NamedTuple):
    """One call of a read-only store view: `method(*args)` of the view of `store` as `store_type`
    over the copies `query` allows (one partition's, standbys too when stale); an iterator's
    entries come back as an iterator. An immutable value (a tuple: one is made per query)."""

    store: str
    store_type: QueryableStoreType[Any]
    method: str
    args: tuple[Any, ...] = ()
    query: StoreQuery = ALL_ACTIVE
    with_position: bool = False
    """Answer `(result, position)`: the position of the active copy of `query.partition` (None
    without one) read with the result, in one request (IQv2's QueryResult carries it too)."""


class StoreReads(NamedTuple):
    """Several reads of one host's copies (an IQv2 request's partitions), asked in one request and
    answered with each read's `(True, answer)` or `(False, exception)`, in order."""

    reads: tuple[StoreRead, ...]


@dataclass(frozen=True, slots=True)
class LagsRead:
    """Per store and partition, how far the host's copies are behind their changelogs (KIP-535)."""


HostRequest = StoreRead | StoreReads | LagsRead


class StoreQueryTimeoutError(InvalidStateStoreError):
    """A store host did not answer before the query's deadline (a stalled or overloaded worker): retry."""

    def __init__(self, host: str, unanswered_for: float) -> None:
        super().__init__(f"{host} did not answer in time (unanswered for {unanswered_for:.3g} s; retry)")
        self.host = host
        self.unanswered_for = unanswered_for


class NoCopyError(InvalidStateStoreError):
    """No copy here that the read may use for its partition (none at all, only a standby for an active
    read, or a standby too far behind): IQv2 tells NOT_PRESENT from NOT_ACTIVE by the copies then."""


class StoreHost(Protocol):
    """Where copies of stores live, asked asynchronously: an in-process stream thread or a worker process."""

    @property
    def host_name(self) -> str:
        """The stream thread's name (a worker's thread name in process mode)."""
        ...

    def holds(self, store_name: str, query: StoreQuery) -> bool:
        """Whether the host has a copy `query` may read, as far as the instance knows now (no wait)."""
        ...

    def key_serde(self, store_name: str) -> Any:
        """The store's key serde, for merging answers of several hosts in key order."""
        ...

    def copies(self, store_name: str) -> dict[int, bool]:
        """Partition -> whether active, of the host's copies of the store (standbys once readable), as far
        as the instance knows now (no wait): IQv2 answers per partition from it."""
        ...

    async def ask(self, request: HostRequest, deadline: Deadline) -> Any:
        """The host's answer; `StoreQueryTimeoutError` once `deadline` passes, `InvalidStateStoreError`
        when it cannot answer now, or the read's own exception."""
        ...

    def unanswered_for(self) -> float:
        """Seconds the host has left its oldest request unanswered (0: none waits, or in process)."""
        ...

    def probe(self) -> None:
        """Make a host that stopped answering show in `unanswered_for()`, without waiting (health checks)."""
        ...


class RemoteCopy:
    """A store copy in another process (a worker's global store), read asynchronously with a deadline."""

    async def ask(self, method: str, args: tuple[Any, ...], deadline: Deadline) -> Any:
        raise NotImplementedError


class AnsweredStore:
    """A host's answer to one `StoreRead`, as a store the composite views can merge with others'."""

    __slots__ = ("_answer", "_method", "key_serde")

    def __init__(self, method: str, answer: Any, key_serde: Any) -> None:
        self._method = method
        self._answer = answer
        self.key_serde = key_serde

    def __getattr__(self, method: str) -> Any:
        if method != self._method:
            raise AttributeError(method)
        return lambda *_args: self._answer


class ListedStores:
    """A `StateStoreProvider` over stores already found (the composite views ask it for them)."""

    __slots__ = ("_stores",)

    def __init__(self, stores: Sequence[Any]) -> None:
        self._stores = list(stores)

    def stores(self, store_name: str, store_type: QueryableStoreType[Any]) -> list[Any]:
        return self._stores


def merged(read: StoreRead, answers: Sequence[tuple[Any, Any]]) -> Any:
    """The answers of several hosts (`(answer, key_serde)` each) merged as the read's composite view merges copies
    (with its position: the first host's that has one)."""
    if read.with_position:
        position = next((answer[1] for answer, _ in answers if answer[1] is not None), None)
        return merged(read._replace(with_position=False), [(answer[0], serde) for answer, serde in answers]), position
    if len(answers) == 1:
        return answers[0][0]
    stores = [AnsweredStore(read.method, answer, serde) for answer, serde in answers]
    view = read.store_type.create(ListedStores(stores), read.store)
    return getattr(view, read.method)(*read.args)

"""IQv2's `KafkaStreams.query()` (KIP-796): a request answered per partition through the one store path.

For each partition asked (all the instance holds a copy of, or the request's), one `StoreRead`
of `QUERY_STORE_TYPE` goes to the host holding the partition's copy (a stream thread in
process, or a worker process over its query channel), all at once (a host's in one request),
awaited until the request's deadline. The REST layer's reads are such queries (api/reads.py). The copy answers with the result and its position in one request; what
went wrong comes back as the partition's failure reason, never raised:

- NOT_PRESENT: no copy of a requested partition here; DOES_NOT_EXIST: the store has no such partition;
- NOT_ACTIVE: `require_active()` and the copy is a standby, or the copy cannot be read now
  (restoring, migrating, the instance not RUNNING; not REBALANCING either without `require_active()`);
- NOT_UP_TO_BOUND: the copy's position is behind the request's `PositionBound` for its
  partition (a standby copy has no position here, so a bounded query never reads one);
- UNKNOWN_QUERY_TYPE: the store does not know the query (or the store is global: Kafka's
  `query()` does not answer global stores either, KAFKA-13523);
- STORE_EXCEPTION: the store raised, or the host did not answer by the deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from streams_core.errors import InvalidStateStoreError, StreamsError, StreamsNotStartedError
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE, UnknownQueryTypeError
from streams_core.query.position import Position
from streams_core.query.queries import Query
from streams_core.query.query_result import FailureReason, QueryResult
from streams_core.query.state_query_request import StateQueryRequest
from streams_core.query.state_query_result import StateQueryResult
from streams_core.runtime.queries.state_store_providers import QueryableStoreProvider
from streams_core.runtime.queries.store_host import (
    ALL_ACTIVE,
    Deadline,
    NoCopyError,
    StoreQueryTimeoutError,
    StoreRead,
    store_query,
)
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["DEFAULT_QUERY_TIMEOUT_S", "QueryHosts", "query_global", "query_off_loop", "query_partition", "query_partitions", "query_store"]

R = TypeVar("R")

DEFAULT_QUERY_TIMEOUT_S = 10.0
"""How long `KafkaStreams.query()` waits for the hosts by default; a host later than that answers STORE_EXCEPTION."""


async def query_store(
    provider: QueryableStoreProvider,
    metadata: TopologyMetadata,
    partition_counts: Mapping[str, int],
    request: StateQueryRequest[R],
    timeout: float,
    stopped: str | None,
) -> StateQueryResult[R]:
    """`KafkaStreams.query()` past its checks of the instance: raises only when the instance is stopping
    or stopped (`stopped`: its state's name; Kafka's StreamsStoppedException); a global store's
    answer is UNKNOWN_QUERY_TYPE; else every partition's (`query_partitions`)."""
    if stopped is not None:
        raise InvalidStateStoreError(f"KafkaStreams is {stopped}: it answers no more queries (StreamsStoppedException)")
    if request.store_name in metadata.global_store_names:
        return global_store_result(request)
    topics = metadata.store_source_topics.get(request.store_name, ())
    counts = [partition_counts[topic] for topic in topics if topic in partition_counts]
    return await query_partitions(provider, request, Deadline.after(timeout), max(counts) if counts else None)


def query_off_loop(
    loop: asyncio.AbstractEventLoop | None, query: Callable[[], Coroutine[Any, Any, StateQueryResult[R]]], timeout: float
) -> StateQueryResult[R]:
    """`query()` run on the instance's `loop` from another thread, waited for (the hosts' deadline, plus
    a second for the loop to get to it). StreamsError on the loop's own thread: it would wait for itself."""
    if loop is None:
        raise StreamsNotStartedError("KafkaStreams is not started: call start() first")
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        raise StreamsError("query_sync() on the instance's event loop would block it: await query() there")
    return asyncio.run_coroutine_threadsafe(query(), loop).result(timeout + 1.0)


def global_store_result(request: StateQueryRequest[R]) -> StateQueryResult[R]:
    """A global store's answer: UNKNOWN_QUERY_TYPE, as Kafka's (use `KafkaStreams.store()` for global stores)."""
    return StateQueryResult(
        {},
        QueryResult.for_failure(
            FailureReason.UNKNOWN_QUERY_TYPE,
            f"Global stores do not yet support the KafkaStreams#query API. Use KafkaStreams#store instead "
            f"(store {request.store_name!r}).",
        ),
    )


class QueryHosts(Protocol):
    """What IQv2 asks of the instance's store path (`QueryableStoreProvider`, or a test's fake of it)."""

    def copies(self, store_name: str) -> dict[int, bool]: ...

    async def query(self, read: StoreRead, deadline: Deadline) -> Any: ...

    async def query_each(self, reads: Sequence[StoreRead], deadline: Deadline) -> list[tuple[bool, Any]]:
        """Each read's `(True, answer)` or `(False, exception)`, in order; a host's reads asked in one request."""
        ...


async def query_partitions(
    provider: QueryHosts,
    request: StateQueryRequest[R],
    deadline: Deadline,
    partition_count: int | None,
    *,
    max_lag: int | None = None,
) -> StateQueryResult[R]:
    """`request` answered per partition by the hosts of the instance's copies (see the module doc);
    `partition_count` the store's number of partitions when known (for DOES_NOT_EXIST).

    `max_lag` (not Kafka's: the REST layer's `maxLag`, KIP-535) keeps standby copies further behind
    their changelogs than that many records from answering (NOT_ACTIVE). The instance's copies are
    listed only for a request of all partitions, or to tell NOT_PRESENT from NOT_ACTIVE when a
    partition finds no copy to read: a key's query reads its partition at once. Several partitions
    are asked at once, those of one host (a worker process) in one request."""
    copies = provider.copies(request.store_name) if request.is_all_partitions() else None
    wanted = sorted(copies) if copies is not None else sorted(request.partitions)
    if len(wanted) == 1:  # a key's partition: nothing to group
        return StateQueryResult({wanted[0]: await query_partition(provider, request, wanted[0], copies, partition_count, deadline, max_lag)})
    results: dict[int, QueryResult[R]] = {}
    reads: list[tuple[int, StoreRead]] = []
    for partition in wanted:
        failed = _before_read(request, partition, copies, partition_count)
        if failed is not None:
            results[partition] = failed
        else:
            reads.append((partition, _read_of(request, partition, max_lag)))
    started = time.perf_counter_ns() if request.execution_info_enabled() else 0
    outcomes = await provider.query_each([read for _, read in reads], deadline) if reads else []
    for (partition, _), (ok, outcome) in zip(reads, outcomes, strict=True):
        if ok:
            results[partition] = _answered(request, partition, outcome[0], outcome[1], started)
        else:
            results[partition] = _refused(provider, request, partition, copies, outcome)
    return StateQueryResult({p: results[p] for p in wanted})


async def query_partition(
    provider: QueryHosts,
    request: StateQueryRequest[R],
    partition: int,
    copies: Mapping[int, bool] | None,
    partition_count: int | None,
    deadline: Deadline,
    max_lag: int | None = None,
) -> QueryResult[R]:
    """One partition's result: its copy here read (an active one when the request requires it, else the
    active first, then a standby within `max_lag`) with its position, or the failure's reason.
    `copies` (partition -> active) when already listed; else listed only if no copy could be read."""
    failed = _before_read(request, partition, copies, partition_count)
    if failed is not None:
        return failed
    started = time.perf_counter_ns() if request.execution_info_enabled() else 0
    try:
        answer, position = await provider.query(_read_of(request, partition, max_lag), deadline)
    except Exception as exc:
        return _refused(provider, request, partition, copies, exc)
    return _answered(request, partition, answer, position, started)


def _before_read(
    request: StateQueryRequest[Any], partition: int, copies: Mapping[int, bool] | None, partition_count: int | None
) -> QueryResult[Any] | None:
    """The partition's failure found before any read (no such partition, no copy, a standby where an active
    copy is required: from `copies` when listed), or None."""
    if partition_count is not None and not 0 <= partition < partition_count:
        return QueryResult.for_failure(
            FailureReason.DOES_NOT_EXIST,
            f"The requested partition {partition} does not exist: store {request.store_name!r} has {partition_count} partitions.",
        )
    return None if copies is None else _not_readable(request, partition, copies.get(partition))


def _read_of(request: StateQueryRequest[Any], partition: int, max_lag: int | None) -> StoreRead:
    """The store path's read of the partition: the query run on its copy, the copy's position with it."""
    query = store_query(partition, not request.is_require_active(), max_lag)
    return StoreRead(request.store_name, QUERY_STORE_TYPE, "run", (request.query,), query, True)


def _answered(request: StateQueryRequest[R], partition: int, answer: Any, position: Any, started: int) -> QueryResult[R]:
    """The result of a copy's answer: NOT_UP_TO_BOUND when the copy is behind the request's bound."""
    result: QueryResult[R] = QueryResult(answer, None, None, None if position is None else Position.of_offsets(position))
    if started:
        copy = "a copy without a position (standby)" if position is None else "the active copy"
        result = result.with_execution_info(
            f"Handled in {request.store_name!r} partition {partition} ({copy}) in {time.perf_counter_ns() - started} ns"
        )
    bound = request.position_bound
    if not bound.is_unbounded() and not bound.permits(result.get_position(), partition):
        return QueryResult.not_up_to_bound(result.get_position(), bound, partition)
    return result


def _refused(
    provider: QueryHosts, request: StateQueryRequest[Any], partition: int, copies: Mapping[int, bool] | None, exc: Exception
) -> QueryResult[Any]:
    """The failure a read's exception means; when no copy could be read, why, from the copies here."""
    if isinstance(exc, NoCopyError):
        found = (copies if copies is not None else provider.copies(request.store_name)).get(partition)
        failed = _not_readable(request, partition, found)
        if failed is not None:
            return failed
    return _failure(exc, f"partition {partition}")


def _not_readable(request: StateQueryRequest[Any], partition: int, active: bool | None) -> QueryResult[Any] | None:
    """NOT_PRESENT without a copy of the partition here, NOT_ACTIVE for a standby when the request requires an
    active copy; None when the copy may answer."""
    if active is None:
        return QueryResult.for_failure(
            FailureReason.NOT_PRESENT, f"The requested partition {partition} was not present at the time of the query."
        )
    if request.is_require_active() and not active:
        return QueryResult.for_failure(
            FailureReason.NOT_ACTIVE, f"Query requires a running active task, but partition {partition} was not active."
        )
    return None


async def query_global(provider: QueryHosts, store_name: str, query: Query[R], deadline: Deadline) -> QueryResult[R]:
    """`query` of this instance's copy of the global store `store_name`, as the global result. Not reached
    from `query()`, which answers global stores UNKNOWN_QUERY_TYPE as Kafka's does: the REST layer
    reads global stores with it, through the same store path and failure reasons."""
    read = StoreRead(store_name, QUERY_STORE_TYPE, "run", (query,), ALL_ACTIVE, True)
    return await _ask(provider, read, f"global store {store_name!r}", deadline)


async def _ask(provider: QueryHosts, read: StoreRead, where: str, deadline: Deadline) -> QueryResult[Any]:
    """The copy's answer with its position, or the failure its error means (the error kept as the cause)."""
    try:
        answer, position = await provider.query(read, deadline)
    except Exception as exc:
        return _failure(exc, where)
    return QueryResult(answer, None, None, None if position is None else Position.of_offsets(position))


def _failure(exc: Exception, where: str) -> QueryResult[Any]:
    """The failure an exception of the store path means (module doc), with the exception as its cause."""
    if isinstance(exc, UnknownQueryTypeError):
        return QueryResult(None, FailureReason.UNKNOWN_QUERY_TYPE, str(exc), _cause=exc)
    if isinstance(exc, StoreQueryTimeoutError):
        return QueryResult(None, FailureReason.STORE_EXCEPTION, f"{where}: {exc}", _cause=exc)
    if isinstance(exc, InvalidStateStoreError):
        return QueryResult(None, FailureReason.NOT_ACTIVE, f"{where} cannot be queried now: {exc}", _cause=exc)
    return QueryResult(None, FailureReason.STORE_EXCEPTION, f"{where}: {type(exc).__name__}: {exc}", _cause=exc)

"""IQv2's `KafkaStreams.query()` (KIP-796): a request answered per partition through the one store path.

For each partition asked (all the instance holds a copy of, or the request's), one `StoreRead`
of `QUERY_STORE_TYPE` goes to the host holding the partition's copy (a stream thread in
process, or a worker process over its query channel), all at once, each awaited until the
request's deadline. The copy answers with the result and its position in one request; what
went wrong comes back as the partition's failure reason, never raised:

- NOT_PRESENT: no copy of a requested partition here; DOES_NOT_EXIST: the store has no such partition;
- NOT_ACTIVE: `require_active()` and the copy is a standby, or the copy cannot be read now
  (restoring, migrating, the instance not RUNNING);
- NOT_UP_TO_BOUND: the copy's position is behind the request's `PositionBound` for its
  partition (a standby copy has no position here, so a bounded query never reads one);
- UNKNOWN_QUERY_TYPE: the store does not know the query (or the store is global: Kafka's
  `query()` does not answer global stores either, KAFKA-13523);
- STORE_EXCEPTION: the store raised, or the host did not answer by the deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from streams_core.errors import InvalidStateStoreError, StreamsError, StreamsNotStartedError
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE, UnknownQueryTypeError
from streams_core.query.position import Position
from streams_core.query.query_result import FailureReason, QueryResult
from streams_core.query.state_query_request import StateQueryRequest
from streams_core.query.state_query_result import StateQueryResult
from streams_core.runtime.state_store_providers import QueryableStoreProvider
from streams_core.runtime.store_host import Deadline, StoreQuery, StoreQueryTimeoutError, StoreRead
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["DEFAULT_QUERY_TIMEOUT_S", "query_off_loop", "query_partitions", "query_store"]

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


async def query_partitions(
    provider: QueryableStoreProvider, request: StateQueryRequest[R], deadline: Deadline, partition_count: int | None
) -> StateQueryResult[R]:
    """`request` answered per partition by the hosts of the instance's copies (see the module doc);
    `partition_count` the store's number of partitions when known (for DOES_NOT_EXIST)."""
    copies = provider.copies(request.store_name)
    wanted = sorted(copies) if request.is_all_partitions() else sorted(request.partitions)
    if len(wanted) == 1:  # a key's partition: no task to schedule (most of a get's cost otherwise)
        results = [await _partition(provider, request, wanted[0], copies.get(wanted[0]), partition_count, deadline)]
    else:
        results = await asyncio.gather(
            *(_partition(provider, request, p, copies.get(p), partition_count, deadline) for p in wanted)
        )
    return StateQueryResult(dict(zip(wanted, results, strict=True)))


async def _partition(
    provider: QueryableStoreProvider,
    request: StateQueryRequest[R],
    partition: int,
    active: bool | None,
    partition_count: int | None,
    deadline: Deadline,
) -> QueryResult[R]:
    if partition_count is not None and not 0 <= partition < partition_count:
        return QueryResult.for_failure(
            FailureReason.DOES_NOT_EXIST,
            f"The requested partition {partition} does not exist: store {request.store_name!r} has {partition_count} partitions.",
        )
    if active is None:
        return QueryResult.for_failure(
            FailureReason.NOT_PRESENT, f"The requested partition {partition} was not present at the time of the query."
        )
    if request.is_require_active() and not active:
        return QueryResult.for_failure(
            FailureReason.NOT_ACTIVE, f"Query requires a running active task, but partition {partition} was not active."
        )
    read = StoreRead(
        request.store_name, QUERY_STORE_TYPE, "run", (request.query,), StoreQuery(partition, stale=not active), with_position=True
    )
    started = time.perf_counter_ns()
    result: QueryResult[R] = await _ask(provider, read, partition, deadline)
    if request.execution_info_enabled():
        copy = "active" if active else "standby"
        result = result.with_execution_info(
            f"Handled in {request.store_name!r} partition {partition} ({copy} copy) in {time.perf_counter_ns() - started} ns"
        )
    if result.is_success() and not request.position_bound.permits(result.get_position(), partition):
        return QueryResult.not_up_to_bound(result.get_position() or Position(), request.position_bound, partition)
    return result


async def _ask(provider: QueryableStoreProvider, read: StoreRead, partition: int, deadline: Deadline) -> QueryResult[Any]:
    """The copy's answer with its position, or the failure its error means."""
    try:
        answer, position = await provider.query(read, deadline)
    except UnknownQueryTypeError as exc:
        return QueryResult.for_failure(FailureReason.UNKNOWN_QUERY_TYPE, str(exc))
    except StoreQueryTimeoutError as exc:
        return QueryResult.for_failure(FailureReason.STORE_EXCEPTION, f"partition {partition}: {exc}")
    except InvalidStateStoreError as exc:
        return QueryResult.for_failure(FailureReason.NOT_ACTIVE, f"partition {partition} cannot be queried now: {exc}")
    except Exception as exc:
        return QueryResult.for_failure(FailureReason.STORE_EXCEPTION, f"partition {partition}: {type(exc).__name__}: {exc}")
    return QueryResult(answer, None, None, None if position is None else Position(position))

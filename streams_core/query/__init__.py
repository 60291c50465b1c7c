"""IQv2, the query API of Kafka Streams (KIP-796 and follow-ups): `await streams.query(request)`.

    request = StateQueryRequest.in_store("counts").with_query(KeyQuery.with_key("hello"))
    result = await streams.query(request)
    only = result.get_only_partition_result()   # the key's partition's result, if here

Queries, requests and results are immutable values; a partition that cannot answer comes back
as a `QueryResult` with a `FailureReason`, not as an exception. See docs/iqv2.md.
"""

from streams_core.query.position import Position, PositionBound
from streams_core.query.queries import (
    KeyQuery,
    Query,
    RangeQuery,
    ResultOrder,
    TimestampedKeyQuery,
    TimestampedRangeQuery,
)
from streams_core.query.query_result import FailureReason, QueryResult
from streams_core.query.state_query_request import StateQueryRequest
from streams_core.query.state_query_result import StateQueryResult
from streams_core.query.versioned_queries import MultiVersionedKeyQuery, VersionedKeyQuery
from streams_core.query.window_queries import WindowKeyQuery, WindowRangeQuery

__all__ = [
    "FailureReason",
    "KeyQuery",
    "MultiVersionedKeyQuery",
    "Position",
    "PositionBound",
    "Query",
    "QueryResult",
    "RangeQuery",
    "ResultOrder",
    "StateQueryRequest",
    "StateQueryResult",
    "TimestampedKeyQuery",
    "TimestampedRangeQuery",
    "VersionedKeyQuery",
    "WindowKeyQuery",
    "WindowRangeQuery",
]

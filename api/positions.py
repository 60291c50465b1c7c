"""Read-your-writes over HTTP: position tokens and the wait for a bound (Kafka Streams' IQv2 Position).

A store copy's position is, per source partition of its task, the offset of the last record it
processed. Key answers carry it in `X-Streams-Position` as `topic:partition:offset` entries
joined by commas; a query may pass such a token (or the offsets it produced at) as `?position=`
and is answered only once the copy has reached it, as Kafka's `PositionBound`: only the entries
for the key's partition count, and a partition the copy has not processed yet is not reached.
Standby copies have no input position, so a bounded query is never answered by one.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable, Mapping

from api.errors import BadRequestError, NotAvailableError
from api.instance import StreamsInstance
from streams_core.runtime.store_host import Deadline
from streams_core.runtime.topic_partition import TopicPartition

__all__ = ["POSITION_HEADER", "POSITION_PATTERN", "Position", "format_position", "parse_position", "reached", "wait_for_position"]

POSITION_HEADER = "X-Streams-Position"
Position = Mapping[TopicPartition, int]

_ENTRY_TEXT = r"([A-Za-z0-9._-]{1,249}):([0-9]{1,9}):([0-9]{1,19})"
_ENTRY = re.compile(_ENTRY_TEXT)
POSITION_PATTERN = rf"^ *{_ENTRY_TEXT} *(, *{_ENTRY_TEXT} *)*$"
"""The `position` token as openapi.yaml documents it (a JSON Schema pattern): entries joined by commas."""
_POLL_S = 0.005


def parse_position(text: str) -> dict[TopicPartition, int]:
    """The bound a `?position=` token names; BadRequestError (400) for a malformed one."""
    bound: dict[TopicPartition, int] = {}
    for entry in text.split(","):
        match = _ENTRY.fullmatch(entry.strip(" "))
        if match is None:
            raise BadRequestError(
                "invalid position", position=text, reason="expected topic:partition:offset entries joined by commas"
            )
        topic, partition, offset = match.groups()
        tp = TopicPartition(topic, int(partition))
        bound[tp] = max(bound.get(tp, -1), int(offset))
    return bound


def format_position(position: Position) -> str:
    """The token of a position, entries sorted by topic and partition."""
    return ",".join(f"{tp.topic}:{tp.partition}:{offset}" for tp, offset in sorted(position.items()))


def reached(position: Position | None, bound: Position, partitions: Iterable[int]) -> bool:
    """Whether a copy at `position` satisfies `bound` for the given partitions (Kafka's isPermitted)."""
    wanted = set(partitions)
    for tp, offset in bound.items():
        if tp.partition not in wanted:
            continue
        seen = None if position is None else position.get(tp)
        if seen is None or seen < offset:
            return False
    return True


async def wait_for_position(
    streams: StreamsInstance, store: str, partition: int | None, bound: Position, timeout_s: float, until: Deadline
) -> dict[TopicPartition, int]:
    """This instance's position for the key's partition once it reaches `bound`.

    `partition` None (no discovery) checks every partition the bound names. NotAvailableError
    (503, with the position reached) if the local active copy does not get there in time, or
    there is none. Each look is asked of the copy's host by the query's deadline `until`.
    """
    partitions = sorted({tp.partition for tp in bound}) if partition is None else [partition]
    deadline = time.monotonic() + timeout_s
    queries = streams.store_queries
    while True:
        position: dict[TopicPartition, int] = {}
        copies = [await queries.query_position(store, p, until) for p in partitions]
        for found in copies:
            position.update(found or {})
        if all(found is not None for found in copies) and reached(position, bound, partitions):
            return position
        if any(found is None for found in copies) or time.monotonic() >= deadline:
            raise NotAvailableError(
                "position not reached",
                store=store,
                position=format_position(position),
                bound=format_position({tp: o for tp, o in bound.items() if tp.partition in partitions}),
                reason="no active copy here" if any(found is None for found in copies) else "timed out",
            )
        await asyncio.sleep(_POLL_S)

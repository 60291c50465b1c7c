"""Read-your-writes over HTTP: position tokens, parsed and written (Kafka Streams' IQv2 Position).

A store copy's position is, per source partition of its task, the offset of the last record it
processed. Key answers carry it in `X-Streams-Position` as `topic:partition:offset` entries
joined by commas; a query may pass such a token (or the offsets it produced at) as `?position=`
and is answered only once the copy has reached it, as Kafka's `PositionBound`: only the entries
for the key's partition count, and a partition the copy has not processed yet is not reached.
Standby copies have no input position, so a query whose bound names their partition is never
answered by one (a bound of other partitions only does not restrict it, as in Kafka). The bound is
the IQv2 request's `PositionBound` (api/reads.py asks the copy again while it is behind).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from api.errors import BadRequestError
from streams_core.common.topic_partition import TopicPartition

__all__ = ["POSITION_HEADER", "POSITION_PATTERN", "Position", "format_position", "parse_position"]

POSITION_HEADER = "X-Streams-Position"
Position = Mapping[TopicPartition, int]

_ENTRY_TEXT = r"([A-Za-z0-9._-]{1,249}):([0-9]{1,9}):([0-9]{1,19})"
_ENTRY = re.compile(_ENTRY_TEXT)
POSITION_PATTERN = rf"^ *{_ENTRY_TEXT} *(, *{_ENTRY_TEXT} *)*$"
"""The `position` token as openapi.yaml documents it (a JSON Schema pattern): entries joined by commas."""


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

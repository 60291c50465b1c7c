"""The DSL's type variables, named as Kafka Streams' generics (`KStream<K, V>`, `mapValues -> <VR>`).

K and V are the Processor API's own (a record's key and value).
"""

from __future__ import annotations

from typing import TypeVar

from streams_core.processor.processor import K, V

__all__ = ["GK", "GV", "KO", "KR", "VO", "VR", "K", "V"]

KR = TypeVar("KR")
"""A new key (`map`, `select_key`, `group_by`)."""
VR = TypeVar("VR")
"""A new value or an aggregate (`map_values`, joins' results, `aggregate`)."""
KO = TypeVar("KO")
"""The other table's key in a foreign-key join."""
VO = TypeVar("VO")
"""The other side's value in a join."""
GK = TypeVar("GK")
"""A GlobalKTable's key, selected from a stream's record in a join."""
GV = TypeVar("GV")
"""A GlobalKTable's value."""

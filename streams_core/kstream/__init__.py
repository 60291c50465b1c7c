"""The DSL: StreamsBuilder, KStream, KTable, groupings, windows, joins and their options.

Public names are re-exported from `streams_core`; the processors and machinery behind them
are in `streams_core.kstream.internals`. See docs/dsl.md.
"""

from streams_core.kstream.branched import Branched
from streams_core.kstream.branched_kstream import BranchedKStream
from streams_core.kstream.cogrouped_kstream import (
    CogroupedKStream,
    SessionWindowedCogroupedKStream,
    TimeWindowedCogroupedKStream,
)
from streams_core.kstream.consumed import Consumed
from streams_core.kstream.emit_strategy import EmitStrategy
from streams_core.kstream.global_ktable import GlobalKTable
from streams_core.kstream.grouped import Grouped
from streams_core.kstream.joined import Joined
from streams_core.kstream.kgrouped_stream import KGroupedStream
from streams_core.kstream.kgrouped_table import KGroupedTable
from streams_core.kstream.kstream import KStream
from streams_core.kstream.ktable import KTable
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.kstream.printed import Printed
from streams_core.kstream.produced import Produced
from streams_core.kstream.repartitioned import Repartitioned
from streams_core.kstream.session_windowed_kstream import SessionWindowedKStream
from streams_core.kstream.stream_joined import StreamJoined
from streams_core.kstream.streams_builder import StreamsBuilder
from streams_core.kstream.suppressed import BufferConfig, Suppressed
from streams_core.kstream.table_joined import TableJoined
from streams_core.kstream.time_windowed_kstream import TimeWindowedKStream
from streams_core.kstream.value_transformer_with_key import ValueTransformerWithKey, ValueTransformerWithKeySupplier
from streams_core.kstream.windowed_serdes import WindowedSerdes
from streams_core.kstream.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows, Windows

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "CogroupedKStream",
    "Consumed",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "Repartitioned",
    "SessionWindowedCogroupedKStream",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
    "TimeWindows",
    "ValueTransformerWithKey",
    "ValueTransformerWithKeySupplier",
    "WindowedSerdes",
    "Windows",
]

"""UnsupportedOnSparkError: what the Spark runner refuses at plan time rather than run unfaithfully."""

from __future__ import annotations

from streams_core.errors import StreamsError

__all__ = ["UnsupportedOnSparkError"]


class UnsupportedOnSparkError(StreamsError):
    """A topology uses an operator the Spark runner cannot run with Kafka Streams' semantics.

    Raised by `SparkRunner.plan()` (and so by `run()`) before any query starts; `operator` is the
    DSL operator or processor class, `node` the topology node that uses it.
    """

    def __init__(self, operator: str, node: str, reason: str) -> None:
        super().__init__(f"{operator} (node {node!r}) cannot run on Spark: {reason}; see docs/spark.md")
        self.operator = operator
        self.node = node
        self.reason = reason

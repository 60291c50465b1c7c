"""The Spark runner: the same DSL topology on Spark Structured Streaming through PySpark.

`SparkRunner(topology, config).plan()` shows the queries, `.run("available_now")` runs them;
see docs/spark.md. PySpark is imported only when a query starts, so importing this package
needs no Spark.
"""

from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.spark.spark_plan import QueryPlan, SparkPlan
from streams_core.spark.spark_runner import SparkRunner
from streams_core.spark.spark_session import build_session, connector_jars

__all__ = ["QueryPlan", "SparkPlan", "SparkRunner", "UnsupportedOnSparkError", "build_session", "connector_jars"]

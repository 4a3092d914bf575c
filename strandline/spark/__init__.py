"""PySpark data source and sink for Strandline (and any Kafka-compatible cluster).

    from strandline.spark import register
    register(spark)
    spark.read.format("strandline").option("bootstrap.servers", ...).option("subscribe", "t")

Options and delivery semantics: docs/spark.md.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from strandline.spark.range_reader import DataLossError
from strandline.spark.schema import KAFKA_SCHEMA
from strandline.spark.source import StrandlineDataSource

__all__ = ["KAFKA_SCHEMA", "DataLossError", "StrandlineDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make `format("strandline")` available in this session (readers and writers)."""
    spark.dataSource.register(StrandlineDataSource)

"""The row shape of a Kafka topic as Spark sees it, in Spark and in Arrow terms.

Same columns and types as Spark's own Kafka source (with `includeHeaders` on), so jobs
written for `format("kafka")` port by changing the format name.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = StructType(
    [StructField("key", StringType(), True), StructField("value", BinaryType(), True)]
)

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
        StructField("headers", ArrayType(HEADER_TYPE, True), True),
    ]
)

# Spark checks every yielded batch against exactly this (int32, `string`, timestamp[us, UTC]).
KAFKA_ARROW_SCHEMA: pa.Schema = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
ARROW_HEADERS_TYPE: pa.DataType = KAFKA_ARROW_SCHEMA.field("headers").type

# Kafka's TimestampType ids, as Spark's Kafka source reports them.
CREATE_TIME = 0
LOG_APPEND_TIME = 1

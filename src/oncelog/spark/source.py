"""The ``oncelog`` PySpark data source: Kafka-protocol reads and exactly-once writes.

spark.dataSource.register(OncelogDataSource)
spark.readStream.format("oncelog").option("kafka.bootstrap.servers", "...")...
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from oncelog.spark.options import OncelogOptionError, parse_read_options, parse_write_options
from oncelog.spark.reader import OncelogBatchReader, OncelogStreamReader, kafka_schema

# The writer is imported by the methods that return one: a streaming query starts a fresh
# Python process for its source, which reads and never writes (~30 ms of imports less).

FORMAT = "oncelog"
# Spark's Kafka sink accepts Append and ErrorIfExists (its default); PySpark itself refuses
# ErrorIfExists and Ignore for every Python data source, before the source is asked.
SAVE_MODE_ERROR = (
    "save mode {mode} is not allowed for the oncelog sink: a Kafka topic is appended to, "
    "never overwritten; use mode('append')"
)


class OncelogDataSource(DataSource):
    """Format "oncelog": Spark's Kafka source/sink options over the Kafka protocol."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # Spark asks for the schema at load(): validate the reader options now, so that a bad
        # option fails the load() call itself rather than a streaming query later.
        return kafka_schema(parse_read_options(self.options, streaming=None).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return OncelogBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OncelogStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from oncelog.spark.writer import OncelogBatchWriter

        if overwrite:
            raise OncelogOptionError(SAVE_MODE_ERROR.format(mode="Overwrite"))
        return OncelogBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is Spark's Complete output mode here (truncate): each micro-batch is
        # appended to the topic, as Spark's Kafka sink does; a topic cannot be truncated.
        from oncelog.spark.writer import OncelogStreamWriter

        return OncelogStreamWriter(parse_write_options(self.options), schema)

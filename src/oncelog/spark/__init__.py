"""PySpark data source ``oncelog``: read Kafka topics (read_committed by default) and write
them exactly-once, over the standard Kafka protocol only, so the same job runs against
oncelog or an Apache Kafka cluster. See docs/spark.md.

    from oncelog.spark import OncelogDataSource, spark_session
    spark = spark_session("my-app")            # or: spark.dataSource.register(OncelogDataSource)
    df = (spark.readStream.format("oncelog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from oncelog.spark.commit import ExactlyOnceViolation, TransactionsTimedOut
    from oncelog.spark.options import OncelogOptionError
    from oncelog.spark.source import OncelogDataSource

__all__ = [
    "OncelogDataSource",
    "ExactlyOnceViolation",
    "TransactionsTimedOut",
    "OncelogOptionError",
    "JavaMissingError",
    "require_java",
    "register",
    "spark_session",
]

_LAZY = {
    "OncelogDataSource": "oncelog.spark.source",
    "ExactlyOnceViolation": "oncelog.spark.commit",
    "TransactionsTimedOut": "oncelog.spark.commit",
    "OncelogOptionError": "oncelog.spark.options",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


class JavaMissingError(RuntimeError):
    pass


JAVA_HINT = (
    "PySpark needs a Java runtime (17 or 21) and none was found: install one "
    "(Debian/Ubuntu: `sudo apt-get install -y openjdk-17-jre-headless`) or set JAVA_HOME."
)


def require_java() -> str:
    """Path of the java executable Spark will use, or a clear JavaMissingError."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java. " if home else ""
        raise JavaMissingError(where + JAVA_HINT)
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise JavaMissingError(f"{java} -version failed ({exc}). " + JAVA_HINT) from exc
    return java


def register(spark: SparkSession) -> None:
    from oncelog.spark.source import OncelogDataSource

    spark.dataSource.register(OncelogDataSource)


def spark_session(
    app_name: str = "oncelog", master: str | None = "local[2]", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession with the oncelog data source registered. Python workers run this
    interpreter (so they see pyarrow and confluent-kafka); Java is checked first. Under
    spark-submit (master None), the master given to spark-submit is kept."""
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: the JVM exists
    if not submitted:
        require_java()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None and not submitted:
        builder = builder.master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=WARN",
    }
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark

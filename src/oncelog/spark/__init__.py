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
    from oncelog.spark.metrics import BatchMetrics, sink_metrics
    from oncelog.spark.options import OncelogOptionError
    from oncelog.spark.source import OncelogDataSource

__all__ = [
    "OncelogDataSource",
    "ExactlyOnceViolation",
    "TransactionsTimedOut",
    "OncelogOptionError",
    "BatchMetrics",
    "sink_metrics",
    "JavaMissingError",
    "WorkerPythonError",
    "check_worker_python",
    "require_java",
    "register",
    "spark_session",
]

_LAZY = {
    "OncelogDataSource": "oncelog.spark.source",
    "ExactlyOnceViolation": "oncelog.spark.commit",
    "TransactionsTimedOut": "oncelog.spark.commit",
    "OncelogOptionError": "oncelog.spark.options",
    "BatchMetrics": "oncelog.spark.metrics",
    "sink_metrics": "oncelog.spark.metrics",
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


class WorkerPythonError(RuntimeError):
    """Spark's Python workers run an interpreter that cannot import the data source."""


WORKER_MODULES = ("oncelog", "pyarrow", "confluent_kafka")


def check_worker_python(spark: SparkSession) -> None:
    """Run a one-task job: the interpreter Spark's Python workers run must import oncelog,
    pyarrow and confluent_kafka. Otherwise raise one WorkerPythonError whose first line
    names the cause and the fix (PYSPARK_PYTHON, or spark_session())."""
    modules = WORKER_MODULES

    def probe(_: object) -> tuple[str, str | None]:
        # Defined here, so cloudpickle ships it by value: the worker needs no oncelog to run it.
        import importlib
        import sys as worker_sys

        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - reported to the driver
                return worker_sys.executable, f"{type(exc).__name__}: {exc}"
        return worker_sys.executable, None

    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: nothing to probe
        return
    configured = os.environ.get("PYSPARK_PYTHON") or sc.pythonExec or "python3"
    try:
        executable, problem = sc.parallelize([0], 1).map(probe).collect()[0]
    except Exception as exc:  # noqa: BLE001 - the worker did not even start
        lines = [line for line in str(exc).splitlines() if line.strip()]
        cause = next(
            (line.strip() for line in lines if "Error" in line and "Traceback" not in line),
            lines[0] if lines else type(exc).__name__,
        )
        raise WorkerPythonError(
            f"Spark's Python workers ({configured}) failed to run a probe task: {cause[:300]}. "
            f"Set PYSPARK_PYTHON={sys.executable} (an interpreter with 'oncelog[spark]' installed) "
            "before creating the SparkSession, or create it with oncelog.spark.spark_session()."
        ) from None
    if problem is not None:
        raise WorkerPythonError(
            f"Spark's Python workers run {executable}, which cannot import the oncelog data source "
            f"({problem}). Set PYSPARK_PYTHON={sys.executable} (an interpreter with 'oncelog[spark]' "
            "installed) before creating the SparkSession, or create it with "
            "oncelog.spark.spark_session()."
        )


def register(spark: SparkSession, *, check_workers: bool = True) -> None:
    """Register format "oncelog" with ``spark``. First checks (one tiny job) that Spark's
    Python workers can import oncelog, pyarrow and confluent_kafka: a clear
    WorkerPythonError now beats a cloudpickle ModuleNotFoundError deep in a query."""
    from oncelog.spark.source import OncelogDataSource

    if check_workers:
        check_worker_python(spark)
    spark.dataSource.register(OncelogDataSource)


#: What spark_session() sets, each overridable through its ``conf`` argument. Quiet and small
#: defaults for local runs; none of them is needed by the data source itself.
SESSION_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",  # no web UI port per session
    "spark.ui.showConsoleProgress": "false",  # no progress bars on stderr
    "spark.sql.shuffle.partitions": "4",  # Spark's 200 is far too many for local[2]
    "spark.sql.session.timeZone": "UTC",  # the `timestamp` column displays in UTC
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=WARN",  # JVM start-up logging
    # pyspark's daemon, but importing pyspark from its package rather than Spark's zips
    "spark.python.daemon.module": "oncelog.spark.daemon",
}
DEFAULT_LOG_LEVEL = "ERROR"

# A Unix domain socket path must fit sockaddr_un (108 bytes); Spark names its sockets
# "<dir>/.<uuid>.sock" (PythonWorkerFactory), 43 bytes past the directory.
_MAX_SOCKET_DIR = 60


def _context_running() -> bool:
    """A SparkContext already runs in this process: getOrCreate() will return it, and
    settings such as the socket directory no longer apply."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def local_socket_defaults() -> dict[str, str]:
    """What spark_session() adds for a local master: Python workers talk to the JVM over
    Unix domain sockets (``spark.python.unix.domain.socket.enabled``, Spark 4.1) in a
    private directory (mode 0700, removed at exit).

    Over loopback TCP each hand-off between the JVM and a Python worker waited out
    delayed acknowledgements: a task's source worker started ~40 ms after its sink worker,
    and a 300-record micro-batch cost ~300 ms instead of ~200 ms. Spark does not
    authenticate a Unix socket, so the directory's permissions are what keeps other local
    users out; Spark's own default (``java.io.tmpdir``) would leave that to the umask.
    Empty when no short enough private directory can be made (then TCP, as Spark's
    default)."""
    import atexit
    import shutil
    import tempfile

    try:
        path = tempfile.mkdtemp(prefix="oncelog-spark-")
    except OSError:
        return {}
    if len(path) > _MAX_SOCKET_DIR:
        shutil.rmtree(path, ignore_errors=True)
        return {}
    atexit.register(shutil.rmtree, path, True)
    return {
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.python.unix.domain.socket.dir": path,
    }


def spark_session(
    app_name: str = "oncelog",
    master: str | None = "local[2]",
    conf: dict[str, str] | None = None,
    *,
    log_level: str | None = DEFAULT_LOG_LEVEL,
    worker_python: str | None = None,
) -> SparkSession:
    """A SparkSession with the oncelog data source registered.

    What it changes, and how to override each:

    * Java is checked first (:func:`require_java`).
    * ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON``: the workers run ``worker_python``
      (default: this interpreter, so they import oncelog, pyarrow and confluent-kafka,
      through its ``oncelog-spark-python`` launcher when installed:
      :mod:`oncelog.spark.python_launcher`); a value already in the environment is kept.
    * :data:`SESSION_DEFAULTS` (UI off, no console progress, 4 shuffle partitions, UTC
      session time zone, JVM log level WARN, the Python workers' daemon
      :mod:`oncelog.spark.daemon`), and for a ``local`` master Unix domain sockets
      between the JVM and its Python workers (:func:`local_socket_defaults`): any key
      in ``conf`` replaces the default.
    * ``sparkContext.setLogLevel(log_level)``: default ERROR; ``log_level=None`` keeps
      Spark's own level.
    * ``master``: default ``local[2]``. Under spark-submit (or ``master=None``) the master
      given to spark-submit is kept.
    """
    from oncelog.spark.python_launcher import installed_launcher

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: the JVM exists
    if not submitted:
        require_java()
        launcher = installed_launcher()
        os.environ.setdefault("PYSPARK_PYTHON", worker_python or launcher or sys.executable)
        # Spark also starts driver-side Python (the data source lookup) with this one.
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", launcher or sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    defaults = dict(SESSION_DEFAULTS)
    if master is not None and not submitted:
        builder = builder.master(master)
        if (
            master.startswith("local")
            and "spark.python.unix.domain.socket.enabled" not in (conf or {})
            and not _context_running()
        ):
            defaults.update(local_socket_defaults())
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_level is not None:
        spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark

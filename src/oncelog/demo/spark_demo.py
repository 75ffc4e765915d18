"""The exactly-once Spark demo: ``run_demo()`` (``make demo`` / ``oncelog demo``).

1. start a broker in a temporary directory;
2. generate orders with a transactional producer, aborting about a fifth of the
   transactions (aborted orders must never count);
3. run the orders pipeline (:mod:`oncelog.demo.pipeline`) as a subprocess: a real Spark
   driver on ``local[2]``;
4. SIGKILL the driver (its whole process tree: Python, JVM, Python workers) mid-run;
5. restart it from the same checkpoint with Trigger.AvailableNow and let it catch up;
6. verify with an independent read_committed consumer: every committed order appears in
   ``orders-enriched`` exactly once, the per-customer totals match, and no transaction is
   left open; print one verdict line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from oncelog.demo.pipeline import (
    ENRICHED,
    ORDERS,
    TOTALS,
    WATERMARK_MS,
    WINDOW_MS,
    create_topics,
    generate_orders,
)
from oncelog.testing import faults
from oncelog.testing.verify import (
    check_window_totals,
    compare,
    open_transactions,
    order_ids,
    read_topic,
    stable,
)

TXN_PREFIX = "oncelog-spark-"


class OutputWatcher(threading.Thread):
    """A read_committed consumer following a topic while the pipeline runs (the concurrent
    reader of Kafka's transactions system test): counts records and duplicates."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.seen: Counter[bytes] = Counter()
        self.count = 0
        self.duplicates = 0
        self.error: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        from oncelog.client.config import ClientConfig
        from oncelog.client.consumer import KafkaConsumer

        c = KafkaConsumer.of(
            ClientConfig(self.bootstrap),
            **{
                "group.id": "oncelog-demo-watcher",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.sparse.connections": False,
            },
        )
        try:
            c.assign([(self.topic, p, 0) for p in range(self.partitions)])
            while not self._stop_event.is_set():
                for m in c.consume(5000, 0.2).records:  # errors: the consumer retries
                    key = m.key or b""
                    self.seen[key] += 1
                    if self.seen[key] > 1:
                        self.duplicates += 1
                    self.count += 1
        except Exception as exc:  # noqa: BLE001 - reported by the demo
            self.error = str(exc)
        finally:
            c.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)


class Driver:
    """The pipeline's Spark driver as a subprocess leading its own session."""

    def __init__(
        self,
        bootstrap: str,
        checkpoint: Path,
        log_path: Path,
        *,
        max_offsets: int,
        available_now: bool,
    ) -> None:
        cmd = [
            sys.executable,
            "-m",
            "oncelog.demo.pipeline",
            "--bootstrap",
            bootstrap,
            "--checkpoint",
            str(checkpoint),
            "--max-offsets-per-trigger",
            str(max_offsets),
        ]
        if available_now:
            cmd.append("--available-now")
        from oncelog.spark.python_launcher import installed_launcher

        env = {
            **os.environ,
            # as spark_session() chooses: pyspark from its package, not Spark's zips
            "PYSPARK_PYTHON": installed_launcher() or sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        env.pop(faults.KILL_AT_ENV, None)
        self.log = open(log_path, "a")  # noqa: SIM115 - closed in wait()/kill()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True, env=env
        )
        self.batches: dict[str, int] = {}
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if line.startswith("progress "):
                fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
                self.batches[fields.get("query", "?")] = int(fields.get("batch", "0"))

    def describe(self) -> str:
        return (
            ", ".join(
                f"{q.removeprefix('orders-')} batch {b}" for q, b in sorted(self.batches.items())
            )
            or "starting (JVM, first batch)"
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        faults.kill_session(self.proc.pid)
        self.proc.wait()
        self.log.close()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()


def _progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[note]}"),
        console=console,
    )


def _log_tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text().splitlines()[-lines:])


def run_demo(
    records: int = 50_000,
    *,
    partitions: int = 3,
    max_offsets: int = 12_000,
    kill_at: float = 0.4,
    console: Console | None = None,
) -> int:
    """Run the demo; return 0 when exactly-once is verified, 1 otherwise."""
    from oncelog.embedded import DEMO_METRICS_LISTENER, EmbeddedBroker
    from oncelog.spark import JavaMissingError, require_java

    console = console or Console()
    try:
        require_java()
    except JavaMissingError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 1
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="oncelog-spark-demo-") as tmp_name:
        tmp = Path(tmp_name)
        log_path = tmp / "spark-driver.log"
        settings = {"metrics.listener": DEMO_METRICS_LISTENER}
        with EmbeddedBroker(tmp / "data", settings=settings) as broker:
            bootstrap = broker.bootstrap
            console.print(f"[bold]broker[/] ready on {bootstrap} (data in {broker.data_dir})")
            console.print(f"[bold]metrics and console[/] on {broker.http_url}")
            create_topics(bootstrap, [ORDERS, ENRICHED, TOTALS], partitions)
            notes: list[str] = []
            with _progress(console) as progress:
                gen = progress.add_task(
                    "generate orders", total=records, note="transactional, ~20% aborted"
                )
                # ~10 minutes of event time whatever the size, so that windows close
                step = max(1, 600_000 * 4 // (records * 5))
                stats = generate_orders(
                    bootstrap,
                    records,
                    event_step_ms=step,
                    on_progress=lambda s: progress.update(gen, completed=s.committed),
                )
                notes.append(
                    f"generated {stats.committed} committed orders in {stats.transactions - stats.aborted_transactions} transactions, "
                    f"and {stats.aborted} aborted orders in {stats.aborted_transactions} aborted transactions"
                )
                watcher = OutputWatcher(bootstrap, ENRICHED, partitions)
                watcher.start()
                visible = progress.add_task(f"{ENRICHED} (read_committed)", total=records, note="")

                def tick(task: Any, driver: Driver) -> None:
                    progress.update(
                        visible,
                        completed=min(watcher.count, records),
                        note=f"{watcher.duplicates} duplicates seen",
                    )
                    progress.update(task, note=driver.describe())

                def start_driver(*, available_now: bool) -> Driver:
                    # Both runs share one checkpoint: the second resumes where the first died.
                    return Driver(
                        bootstrap,
                        tmp / "checkpoint",
                        log_path,
                        max_offsets=max_offsets,
                        available_now=available_now,
                    )

                # Run 1: continuous micro-batches; SIGKILL the driver mid-run.
                run1 = progress.add_task("spark driver #1", total=None, note="")
                d1 = start_driver(available_now=False)
                deadline = time.monotonic() + 240
                while (
                    watcher.count < kill_at * records and d1.alive() and time.monotonic() < deadline
                ):
                    tick(run1, d1)
                    time.sleep(0.1)
                if not d1.alive():
                    progress.stop()
                    console.print(
                        f"[red]the Spark driver exited early[/] (code {d1.proc.returncode}); log: {log_path}"
                    )
                    console.print(_log_tail(log_path))
                    return 1
                where = d1.describe()
                d1.kill()
                tick(run1, d1)
                progress.update(run1, total=1, completed=1, note=f"SIGKILLed at {where}")
                left_open = open_transactions(bootstrap, TXN_PREFIX)
                notes.append(
                    f"driver #1 SIGKILLed mid-run ({where}; {watcher.count} of {records} enriched orders visible); "
                    f"it left {len(left_open)} transaction(s) open"
                )

                # Run 2: restart from the same checkpoint and catch up.
                run2 = progress.add_task("spark driver #2 (restart)", total=None, note="")
                d2 = start_driver(available_now=True)
                t2 = time.monotonic()
                while d2.alive() and time.monotonic() - t2 < 300:
                    tick(run2, d2)
                    time.sleep(0.1)
                if d2.alive():
                    d2.kill()
                    progress.stop()
                    console.print(
                        f"[red]the restarted driver did not finish in time[/]; log: {log_path}"
                    )
                    return 1
                code = d2.wait(10)
                progress.update(
                    run2,
                    total=1,
                    completed=1,
                    note=f"caught up in {time.monotonic() - t2:.0f} s (exit {code})",
                )
                settle = time.monotonic() + 10
                while watcher.count < records and time.monotonic() < settle:
                    tick(run2, d2)
                    time.sleep(0.1)
                tick(run2, d2)
                watcher.stop()
            if code != 0:
                console.print(f"[red]the restarted driver failed[/] (exit {code}); log: {log_path}")
                console.print(_log_tail(log_path))
            notes.append(f"driver #2 restarted from the checkpoint and caught up (exit {code})")

            # Verify with fresh read_committed reads.
            inputs = read_topic(bootstrap, ORDERS)
            verdict = compare(order_ids(inputs), order_ids(read_topic(bootstrap, ENRICHED)))
            totals = check_window_totals(
                inputs, read_topic(bootstrap, TOTALS), WINDOW_MS, WATERMARK_MS
            )
            totals_ok = totals.ok
            lingering = open_transactions(bootstrap, TXN_PREFIX)
            pinned = [t for t in (ENRICHED, TOTALS) if not stable(bootstrap, t)]
            notes.append(
                f"{TOTALS}: {totals.emitted} per-customer window totals emitted (append mode, each once), "
                f"{totals.duplicates} duplicates, {totals.wrong} wrong, {totals.missing} missing of {totals.expected_closed} closed windows"
            )
            notes.append(
                f"concurrent read_committed reader saw {watcher.duplicates} duplicates; "
                f"{len(lingering)} transaction(s) left open; LSO == high watermark on outputs: {not pinned}"
            )
    for line in notes:
        console.print(f"  {line}")
    for example in verdict.examples + totals.examples:
        console.print(f"  [red]{example}[/]")
    ok = (
        verdict.ok
        and totals_ok
        and code == 0
        and not watcher.duplicates
        and not lingering
        and not pinned
        and watcher.error is None
    )
    if watcher.error:
        console.print(f"  [red]watcher error:[/] {watcher.error}")
    line = (
        verdict.line()
        if ok or not verdict.ok
        else verdict.line().replace("verified", "NOT verified")
    )
    console.print(f"  demo took {time.monotonic() - started:.0f} s")
    console.print(f"[bold {'green' if ok else 'red'}]{line}[/]")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m oncelog.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--records", "-n", type=int, default=50_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=12_000)
    args = ap.parse_args(argv)
    return run_demo(
        args.records, partitions=args.partitions, max_offsets=args.max_offsets_per_trigger
    )


if __name__ == "__main__":
    sys.exit(main())

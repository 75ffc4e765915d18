"""A canary's latency while passwords are guessed: one authenticated SASL/PLAIN connection
sends Metadata every 10 ms, first alone, then beside ``--connections`` guessers that
send wrong PLAIN passwords for ``--seconds`` (raw asyncio sockets in another process,
each hanging up as soon as its refusal arrives: tests/integration/auth_flood.py).

Prints, per phase: the canary's requests and latency p50/p99/max, the guesses refused
per second, the broker's CPU share, and the broker log's lines about failed
authentication. ``--delay-ms`` sets connection.failed.authentication.delay.ms (Kafka's
default 100; 0 shows the flood the delay holds back).

    python bench/auth_flood.py --connections 50 --seconds 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics_scrape import cpu_seconds  # noqa: E402

from oncelog.embedded import EmbeddedBroker  # noqa: E402
from tests.integration.auth_flood import CanaryResult, canary, start_flood  # noqa: E402
from tests.integration.metrics_scrape import scrape, value  # noqa: E402
from tests.integration.security import PLAIN_USERS, plain_jaas  # noqa: E402


def _row(phase: str, c: CanaryResult, cpu: float, extra: str = "") -> None:
    print(
        f"{phase:<8} canary {len(c.latencies_ms):5d} req  p50 {c.percentile(50):6.2f} ms  "
        f"p99 {c.percentile(99):6.2f} ms  max {max(c.latencies_ms):7.2f} ms  "
        f"broker CPU {cpu * 100:4.0f}%{extra}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--delay-ms", type=int, default=100)
    args = ap.parse_args()
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "connection.failed.authentication.delay.ms": str(args.delay_ms),
        "metrics.listener": "http://127.0.0.1:0",
    }
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-") as tmp:
        with EmbeddedBroker(Path(tmp) / "data", settings=settings) as broker:
            assert broker.proc is not None and broker.http_url is not None
            pid = broker.proc.pid
            user, password = "bob", PLAIN_USERS["bob"]

            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            alone = canary(broker.bootstrap, user, password, args.seconds)
            _row("alone", alone, (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0))

            pool, flood = start_flood(broker.bootstrap, "alice", args.connections, args.seconds)
            try:
                time.sleep(0.5)  # the flood's process is up and guessing
                cpu0, t0 = cpu_seconds(pid), time.monotonic()
                flooded = canary(broker.bootstrap, user, password, args.seconds - 1.0)
                cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
                guessed = flood.result(timeout=args.seconds + 60)  # type: ignore[attr-defined]
            finally:
                pool.shutdown()
            counted = value(scrape(broker.http_url), "oncelog_failed_authentication_total")
            _row(
                "flooded",
                flooded,
                cpu,
                f"  guesses refused {guessed.refused / guessed.seconds:5.0f}/s "
                f"({guessed.refused} in {guessed.seconds:.1f} s, {guessed.broken} broken, "
                f"{len(guessed.unexpected)} unexpected; counted {counted:.0f})",
            )
        lines = [
            line
            for line in broker.log_path.read_text().splitlines()
            if "failed authentication" in line.lower()
        ]
        print(f"broker log lines about failed authentication: {len(lines)}")
        for line in lines:
            print("  " + line[:200])
        if alone.errors or flooded.errors:
            print(f"canary errors: {alone.errors + flooded.errors}")


if __name__ == "__main__":
    main()

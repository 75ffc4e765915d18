"""Cold fetch: a consumer reading data that is no longer in the page cache.

On some hosts the page cache does not keep data for long: this VM runs DAMON's
``pageout`` of file pages untouched for about a minute, so a consumer that reads data
written a minute ago reads it from disk. This benchmark fills a topic, then per round
either leaves the pages cached ("hot") or evicts them first ("cold": fdatasync, then
``POSIX_FADV_DONTNEED`` on every segment of the topic), and reads the topic whole with
confluent-kafka. Meanwhile another connection sends an ApiVersions request every 5 ms;
its round trips show whether the broker keeps serving other clients while the disk is
read (a broker that reads cold pages on its event loop stalls them all).

``--disk-read-mb-s N`` puts the broker in a blkio cgroup (cgroup v1, root) that reads
the disk at N MB/s, as a slow or shared disk would; it shows what a cold read does to
the other clients' latency.

Prints, per round: MB/s, the broker's CPU-s, the bytes the broker read from storage
(``/proc/<pid>/io``), and the ping's p50/p99/max in ms. Run it with two source trees on
PYTHONPATH to compare them.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench.fetch import fill, read_all  # noqa: E402
from bench.produce import cpu_seconds  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402
from oncelog.testing.faults import evict_segment_pages as evict  # noqa: E402

TOPIC = "cold-fetch"


def throttle_reads(pid: int, data_dir: Path, mb_s: int) -> None:
    """Move ``pid`` into a blkio cgroup reading ``data_dir``'s disk at ``mb_s`` MB/s."""
    dev = os.stat(data_dir).st_dev
    disk = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if (disk / "partition").exists():
        disk = disk.resolve().parent  # throttling is per whole disk
    major_minor = (disk / "dev").read_text().strip()
    group = Path("/sys/fs/cgroup/blkio/oncelog-bench-slow-disk")
    group.mkdir(exist_ok=True)
    (group / "blkio.throttle.read_bps_device").write_text(f"{major_minor} {mb_s * 1_000_000}")
    (group / "cgroup.procs").write_text(str(pid))


def storage_read_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


class Pinger(threading.Thread):
    """ApiVersions v0 round trips every 5 ms on a connection of its own."""

    REQUEST = (
        (2 + 2 + 4 + 2 + 6).to_bytes(4, "big")
        + (18).to_bytes(2, "big")
        + (0).to_bytes(2, "big")
        + (7).to_bytes(4, "big")
        + (6).to_bytes(2, "big")
        + b"pinger"
    )

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stop_flag = threading.Event()
        self.rtts: list[float] = []

    def run(self) -> None:
        while not self.stop_flag.is_set():
            start = time.perf_counter()
            self.sock.sendall(self.REQUEST)
            size = int.from_bytes(self._read(4), "big")
            self._read(size)
            self.rtts.append((time.perf_counter() - start) * 1000)
            time.sleep(0.005)
        self.sock.close()

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=600, help="megabytes in the topic")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each kind, alternating")
    ap.add_argument("--disk-read-mb-s", type=int, help="throttle the broker's disk reads")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("ONCELOG_BENCH_DIR")) as tmp:
        data = Path(tmp) / "data"
        broker = EmbeddedBroker(data, log_level="WARNING").start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            count = fill(broker.bootstrap, TOPIC, args.mb * 1_000_000, 1000, 3)
            if args.disk_read_mb_s:
                throttle_reads(pid, data, args.disk_read_mb_s)
            mb = count * 1000 / 1e6
            for r in range(args.rounds * 2):
                kind = "cold" if r % 2 == 0 else "hot"
                if kind == "cold":
                    evict(data, TOPIC)
                pinger = Pinger(broker.bootstrap)
                cpu0, io0 = cpu_seconds(pid), storage_read_bytes(pid)
                pinger.start()
                elapsed = read_all(broker.bootstrap, TOPIC, 3, count, "read_uncommitted")
                pinger.stop_flag.set()
                pinger.join()
                cpu, io = cpu_seconds(pid) - cpu0, storage_read_bytes(pid) - io0
                rtts = sorted(pinger.rtts)
                p99 = rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))]
                print(
                    f"{kind:4s}  {mb / elapsed:6.0f} MB/s  broker CPU {cpu:.2f} s  "
                    f"storage read {io / 1e6:5.0f} MB  ping ms p50 "
                    f"{statistics.median(rtts):.2f} p99 {p99:.1f} max {rtts[-1]:.1f} "
                    f"({len(rtts)} pings)",
                    flush=True,
                )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()

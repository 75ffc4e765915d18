"""A closed connection leaves nothing to the cycle collector, even one closed while it
owed answers. The protocol fuzzer closes hundreds of connections a second; whatever they
left in reference cycles made full collections run every second, each a pause of every
client (with the answers the connection held: tens of thousands of objects)."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
from pathlib import Path

from kio.schema.metadata.v1 import request as md

from oncelog.broker.broker import Broker
from oncelog.broker.config import BrokerConfig
from oncelog.broker.server import ENCODE_IN_THREAD_ENTRIES, Connection
from oncelog.client.wire import encode_request


def _metadata_frame(topics: int, correlation_id: int) -> bytes:
    request = md.MetadataRequest(
        topics=tuple(md.MetadataRequestTopic(name=f"t{i}") for i in range(topics))
    )
    return encode_request(request, correlation_id, "garbage-test")


def _hit_and_run(port: int, frames: list[bytes]) -> None:
    """Pipeline ``frames``, read nothing, and close: the broker owes every answer."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"".join(frames))


def test_connections_closed_while_owing_answers_leave_no_cyclic_garbage(tmp_path: Path) -> None:
    async def main() -> list[object]:
        broker = Broker(
            BrokerConfig.build(
                overrides={"log.dirs": str(tmp_path), "auto.create.topics.enable": "false"}
            ),
            listen=("127.0.0.1", 0),
        )
        await broker.start()
        port = next(iter(broker.bound_ports.values()))
        try:
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            # answers over the threshold are encoded in a thread: owed while the client
            # is already gone; a bad frame last makes the broker close the connection
            big = _metadata_frame(ENCODE_IN_THREAD_ENTRIES + 1, 1)
            bad = struct.pack(">ihhih", 10, 999, 0, 2, -1)  # an unknown API key
            for _ in range(5):
                await asyncio.to_thread(_hit_and_run, port, [big, big, bad])
            for _ in range(100):
                await asyncio.sleep(0.02)
                if broker.stats.connections_closed == 5:
                    break
            assert broker.stats.connections_closed == 5
            await asyncio.sleep(0.2)  # encodings still running finish
            gc.collect()
            return [o for o in gc.garbage if isinstance(o, Connection)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
            await broker.stop()

    assert asyncio.run(main()) == []

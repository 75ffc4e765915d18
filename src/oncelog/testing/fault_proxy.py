"""A fault-injecting TCP proxy that understands Kafka framing, for network fault tests.

Put it between clients and a broker that advertises the proxy's address (Kafka's
``advertised.listeners``), and every client connection goes through it, the bootstrap one
and those opened from Metadata alike. It forwards whole frames (a 4-byte size, then the
request or response) and knows which request each response answers (its correlation id),
so a fault can pick a kind of request: drop the response to a Produce, hold an EndTxn.

Faults, each bounded in time (``for_s``, at most :data:`MAX_FAULT_S`; a hold at most as
long), so a test cannot leave a proxy that never heals:

- :meth:`FaultProxy.latency`: every frame delayed by ``ms`` ± ``jitter_ms``, order kept;
- :meth:`FaultProxy.bandwidth`: at most ``bytes_per_s`` each way (all connections);
- :meth:`FaultProxy.drop_responses`: a response dropped after its request reached the
  broker (the request took effect, the client never learns it), at random or the next one;
  ``then_reset`` also resets that connection, as a cut cable does, so the client retries at
  once instead of after its request timeout;
- :meth:`FaultProxy.hold_requests`: a request held for ``hold_s`` (past the client's
  timeout) and then delivered late on the still-open upstream connection, even after the
  client gave up on that connection: the reordering of KAFKA-17754;
- :meth:`FaultProxy.reset`: every open connection reset (RST) now; :meth:`FaultProxy.resets`:
  a connection reset at random when a request arrives;
- :meth:`FaultProxy.blackhole`: nothing flows either way for ``for_s``; what was sent in the
  meantime is delivered when it ends, as TCP retransmits it (if the client has not reset).

Runs its own asyncio loop in a daemon thread; the fault methods are thread-safe. ``events``
lists what was done (``dropped Produce response``, ...) and ``counts`` totals it, for test
messages. The pytest plugin's ``oncelog_fault_proxy`` fixture gives a broker behind one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from oncelog.protocol.api_keys import ApiKey

__all__ = ["MAX_FAULT_S", "FaultProxy"]

MAX_FAULT_S = 600.0
# After the client closed its side, how long the upstream connection stays open for what
# is still queued (held requests) to be delivered and answered (the answers are discarded).
_UPSTREAM_GRACE_S = 1.0
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # request: api key, api version, correlation id
_MAX_FRAME = 256 << 20
_LINGER_RST = struct.pack("ii", 1, 0)


def _api_name(api_key: int | None) -> str:
    if api_key is None:
        return "unknown"
    try:
        return ApiKey(api_key).name.title().replace("_", "")
    except ValueError:
        return f"api {api_key}"


def _bounded(for_s: float) -> float:
    if not 0 < for_s <= MAX_FAULT_S:
        raise ValueError(f"a fault lasts more than 0 and at most {MAX_FAULT_S:.0f} s, got {for_s}")
    return time.monotonic() + for_s


def _keys(api_keys: Iterable[int] | None) -> frozenset[int] | None:
    return None if api_keys is None else frozenset(int(k) for k in api_keys)


@dataclass
class _Random:
    """A fault drawn per frame with ``p`` while ``until`` (monotonic) is ahead."""

    p: float = 0.0
    until: float = 0.0
    api_keys: frozenset[int] | None = None  # None: every API
    remaining: int | None = None  # at most this many more, then the fault ends
    then_reset: bool = False
    hold_s: float = 0.0

    def draw(self, rng: random.Random, api_key: int | None, now: float) -> bool:
        if now >= self.until or self.remaining == 0:
            return False
        if self.api_keys is not None and api_key not in self.api_keys:
            return False
        if self.p < 1.0 and rng.random() >= self.p:
            return False
        if self.remaining is not None:
            self.remaining -= 1
        return True


class _Bucket:
    """A bandwidth cap shared by every connection in one direction (a virtual clock)."""

    def __init__(self) -> None:
        self.rate = 0.0
        self.until = 0.0
        self.free_at = 0.0

    async def take(self, n: int) -> None:
        now = time.monotonic()
        if self.rate <= 0 or now >= self.until:
            return
        start = max(now, self.free_at)
        self.free_at = start + n / self.rate
        await asyncio.sleep(self.free_at - now)


class _Rules:
    def __init__(self) -> None:
        self.latency_ms = 0.0
        self.jitter_ms = 0.0
        self.latency_until = 0.0
        self.blackhole_until = 0.0
        self.drop = _Random()
        self.hold = _Random()
        self.reset = _Random()
        self.up = _Bucket()
        self.down = _Bucket()


class _Conn:
    """One client connection and its upstream connection: two directions, each a reader
    that stamps frames as they arrive and a writer that delivers them in order."""

    def __init__(self, proxy: FaultProxy, number: int, client: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.number = number
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.inflight: dict[int, int] = {}  # correlation id -> api key
        self.client_open = True
        self.tasks: list[asyncio.Task[None]] = []

    def reset(self, why: str) -> None:
        self.proxy._event(f"reset connection {self.number}: {why}", "resets")
        for w in (self.client, self.upstream):
            if w is None:
                continue
            sock = w.get_extra_info("socket")
            with contextlib.suppress(OSError):
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            w.transport.abort()
        self.client_open = False
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()


async def _read_frame(reader: asyncio.StreamReader, min_size: int) -> bytes | None:
    """One frame, or None at the end of the stream or on a frame no peer would send."""
    try:
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        if not min_size <= size <= _MAX_FRAME:
            return None
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return None


class FaultProxy:
    def __init__(
        self,
        upstream: tuple[str, int] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
    ) -> None:
        self._upstream = upstream
        self._host, self._port = host, port
        self._rng = random.Random(seed)
        self._rules = _Rules()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._conns: dict[int, _Conn] = {}
        self._next_conn = 0
        self.counts: Counter[str] = Counter()
        self.events: deque[str] = deque(maxlen=10_000)

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Listen (before the upstream is known: the broker must advertise this port)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, self._host, self._port)
                )
                self._port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def close(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._conns.values()):
                for w in (conn.client, conn.upstream):
                    if w is not None:
                        w.transport.abort()
                for t in conn.tasks:
                    t.cancel()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(5)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{self._host}:{self._port}"

    def set_upstream(self, host: str, port: int) -> None:
        """Where new connections go (open ones keep theirs)."""
        self._upstream = (host, port)

    # -- faults ----------------------------------------------------------------------------

    def latency(self, ms: float, jitter_ms: float = 0.0, *, for_s: float) -> None:
        """Delay every frame, both ways, by ``ms`` ± ``jitter_ms`` (order is kept)."""
        if ms < 0 or not 0 <= jitter_ms <= ms:
            raise ValueError("latency needs ms >= 0 and 0 <= jitter_ms <= ms")
        with self._lock:
            r = self._rules
            r.latency_ms, r.jitter_ms, r.latency_until = ms, jitter_ms, _bounded(for_s)

    def bandwidth(self, bytes_per_s: float, *, for_s: float) -> None:
        """At most ``bytes_per_s`` each way, shared by every connection."""
        if bytes_per_s <= 0:
            raise ValueError("bandwidth must be positive")
        until = _bounded(for_s)
        with self._lock:
            for bucket in (self._rules.up, self._rules.down):
                bucket.rate, bucket.until = float(bytes_per_s), until

    def drop_responses(
        self,
        p: float = 1.0,
        *,
        for_s: float,
        api_keys: Iterable[int] | None = (ApiKey.PRODUCE,),
        count: int | None = None,
        then_reset: bool = False,
    ) -> None:
        """Drop responses (to ``api_keys``; None: any) with probability ``p``, at most
        ``count`` of them. The request reached the broker: only its answer is lost."""
        with self._lock:
            self._rules.drop = _Random(
                _probability(p), _bounded(for_s), _keys(api_keys), count, then_reset
            )

    def hold_requests(
        self,
        p: float = 1.0,
        *,
        hold_s: float,
        for_s: float,
        api_keys: Iterable[int] | None = (ApiKey.PRODUCE,),
        count: int | None = None,
    ) -> None:
        """Hold requests (to ``api_keys``) for ``hold_s``, then deliver them on the same
        upstream connection, even if the client has since closed it."""
        _bounded(hold_s)
        with self._lock:
            self._rules.hold = _Random(
                _probability(p), _bounded(for_s), _keys(api_keys), count, hold_s=hold_s
            )

    def resets(self, p: float, *, for_s: float, api_keys: Iterable[int] | None = None) -> None:
        """Reset a connection when a request (to ``api_keys``) arrives, with probability p;
        that request is not forwarded."""
        with self._lock:
            self._rules.reset = _Random(_probability(p), _bounded(for_s), _keys(api_keys))

    def blackhole(self, for_s: float) -> None:
        """Nothing flows, either way, for ``for_s`` (new connections wait too)."""
        until = _bounded(for_s)
        with self._lock:
            self._rules.blackhole_until = until
        self._event(f"blackhole for {for_s:.3g} s", "blackholes")

    def reset(self) -> None:
        """Reset every open connection now."""
        loop = self._loop
        if loop is None:
            return

        async def all_conns() -> None:
            for conn in list(self._conns.values()):
                conn.reset("reset()")

        asyncio.run_coroutine_threadsafe(all_conns(), loop).result(5)

    def clear(self) -> None:
        """End every fault now."""
        with self._lock:
            self._rules = _Rules()

    # -- the forwarding --------------------------------------------------------------------

    def _event(self, text: str, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.events.append(text)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._next_conn += 1
        conn = _Conn(self, self._next_conn, writer)
        self._conns[conn.number] = conn
        self._event(f"connection {conn.number} accepted", "connections")
        try:
            await self._wait_blackhole()
            if self._upstream is None:
                raise ConnectionError("no upstream set")
            up_reader, conn.upstream = await asyncio.open_connection(*self._upstream)
        except (ConnectionError, OSError) as exc:
            self._event(f"connection {conn.number}: upstream unreachable: {exc}", "refused")
            writer.transport.abort()
            del self._conns[conn.number]
            return
        requests: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        responses: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        conn.tasks = [
            asyncio.ensure_future(self._read_requests(conn, reader, requests)),
            asyncio.ensure_future(self._write_requests(conn, requests)),
            asyncio.ensure_future(self._read_responses(conn, up_reader, responses)),
            asyncio.ensure_future(self._write_responses(conn, responses)),
        ]
        try:
            await asyncio.gather(*conn.tasks, return_exceptions=True)
        finally:
            for w in (writer, conn.upstream):
                w.transport.abort()
            self._conns.pop(conn.number, None)

    async def _wait_blackhole(self) -> None:
        while (left := self._rules.blackhole_until - time.monotonic()) > 0:
            await asyncio.sleep(left)

    async def _pace(self, due: float, bucket: _Bucket | None, size: int) -> None:
        """Wait until a frame may go: its latency, any blackhole, then the bandwidth cap."""
        await _sleep_until(due)
        await self._wait_blackhole()
        if bucket is not None:
            await bucket.take(size + _SIZE.size)

    def _delay_s(self) -> float:
        r = self._rules
        if r.latency_ms <= 0 or time.monotonic() >= r.latency_until:
            return 0.0
        return (r.latency_ms + self._rng.uniform(-r.jitter_ms, r.jitter_ms)) / 1000

    async def _read_requests(
        self,
        conn: _Conn,
        reader: asyncio.StreamReader,
        queue: asyncio.Queue[tuple[float, bytes] | None],
    ) -> None:
        due = 0.0
        try:
            while (frame := await _read_frame(reader, _HEADER.size)) is not None:
                api_key, version, correlation = _HEADER.unpack_from(frame)
                now = time.monotonic()
                name = _api_name(api_key)
                with self._lock:
                    reset = self._rules.reset.draw(self._rng, api_key, now)
                    hold = self._rules.hold.draw(self._rng, api_key, now)
                    hold_s = self._rules.hold.hold_s
                if reset:
                    conn.reset(f"on {name} v{version} request {correlation}")
                    return
                conn.inflight[correlation] = api_key
                with self._lock:
                    self.counts["requests"] += 1
                due = max(due, now + self._delay_s())
                if hold:
                    due = max(due, now + hold_s)
                    self._event(
                        f"held {name} v{version} request {correlation} on connection "
                        f"{conn.number} for {hold_s:.3g} s",
                        "held",
                    )
                await queue.put((due, frame))
        finally:
            conn.client_open = False
            await queue.put(None)

    async def _write_requests(
        self, conn: _Conn, queue: asyncio.Queue[tuple[float, bytes] | None]
    ) -> None:
        upstream = conn.upstream
        assert upstream is not None
        while (item := await queue.get()) is not None:
            due, frame = item
            await self._pace(due, self._rules.up, len(frame))
            upstream.write(_SIZE.pack(len(frame)) + frame)
            with contextlib.suppress(ConnectionError, OSError):
                await upstream.drain()
        # The client is gone: held requests were delivered above; give their answers a
        # moment (they are discarded), then close the upstream side.
        await asyncio.sleep(_UPSTREAM_GRACE_S)
        upstream.transport.abort()

    async def _read_responses(
        self,
        conn: _Conn,
        reader: asyncio.StreamReader,
        queue: asyncio.Queue[tuple[float, bytes] | None],
    ) -> None:
        due = 0.0
        try:
            while (frame := await _read_frame(reader, _SIZE.size)) is not None:
                correlation = _SIZE.unpack_from(frame)[0]
                api_key = conn.inflight.pop(correlation, None)
                now = time.monotonic()
                with self._lock:
                    drop = self._rules.drop.draw(self._rng, api_key, now)
                    then_reset = self._rules.drop.then_reset
                if drop:
                    self._event(
                        f"dropped {_api_name(api_key)} response {correlation} on connection "
                        f"{conn.number}" + (", then reset it" if then_reset else ""),
                        "dropped",
                    )
                    if then_reset:
                        # Reset only after what was queued before it reached the client.
                        await queue.put((max(due, now), b""))
                    continue
                due = max(due, now + self._delay_s())
                await queue.put((due, frame))
        finally:
            await queue.put(None)

    async def _write_responses(
        self, conn: _Conn, queue: asyncio.Queue[tuple[float, bytes] | None]
    ) -> None:
        while (item := await queue.get()) is not None:
            due, frame = item
            if not frame:  # a reset after a dropped response
                await self._pace(due, None, 0)
                conn.reset("after a dropped response")
                return
            await self._pace(due, self._rules.down, len(frame))
            if conn.client_open:
                conn.client.write(_SIZE.pack(len(frame)) + frame)
                with contextlib.suppress(ConnectionError, OSError):
                    await conn.client.drain()
        # The broker closed the connection: so does the client's side.
        conn.client.transport.abort()


def _probability(p: float) -> float:
    if not 0.0 < p <= 1.0:
        raise ValueError(f"a probability is in (0, 1], got {p}")
    return p


async def _sleep_until(due: float) -> None:
    delay = due - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)

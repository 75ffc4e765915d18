"""A SASL/PLAIN password-guessing flood and a canary client beside it
(test_connection_quotas.py checks correctness, bench/auth_flood.py prints the canary's
latency).

The flood runs in its own process, on one event loop with raw asyncio sockets: each of
``connections`` guessers connects, sends a prebuilt SaslHandshake and a SaslAuthenticate
with a wrong password, reads the two answers, hangs up at once (the cheapest attacker,
not one that waits for the broker's close) and starts over. A separate process keeps the
guessers' CPU off the canary's interpreter (the GIL); on this 2-core machine the broker,
the flood and the canary then get a core's worth each at most.

The canary is one authenticated connection sending a Metadata request every
``interval_s`` and timing each answer.
"""

from __future__ import annotations

import asyncio
import struct
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from oncelog.client.security import SecurityConfig
from oncelog.client.wire import WireClient, encode_request

_SIZE = struct.Struct(">i")
HANDSHAKE = SaslHandshakeRequest(mechanism="PLAIN")
METADATA = md.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


@dataclass
class FloodResult:
    attempts: int = 0  # SaslAuthenticate requests sent
    refused: int = 0  # answered SASL_AUTHENTICATION_FAILED
    unexpected: list[str] = field(default_factory=list)  # any other answer (first few)
    broken: int = 0  # connections lost before the answer (reset, closed early)
    seconds: float = 0.0


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def _guesser(
    host: str, port: int, user: str, deadline: float, frames: list[bytes], out: FloodResult
) -> None:
    handshake = encode_request(HANDSHAKE, 1, "guesser")
    i = 0
    while time.monotonic() < deadline:
        guess = frames[i % len(frames)]
        i += 1
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            out.broken += 1
            await asyncio.sleep(0.01)
            continue
        try:
            writer.write(handshake)
            answer = WireClient.decode_response(
                HANDSHAKE.__api_key__, HANDSHAKE.__version__, await _read_frame(reader)
            )
            if answer.error_code != ErrorCode.none:
                out.unexpected.append(f"SaslHandshake: {answer.error_code!r}")
                continue
            writer.write(guess)
            out.attempts += 1
            answer = WireClient.decode_response(
                SaslAuthenticateRequest.__api_key__,
                SaslAuthenticateRequest.__version__,
                await _read_frame(reader),
            )
            if answer.error_code == ErrorCode.sasl_authentication_failed:
                out.refused += 1
            elif len(out.unexpected) < 10:
                out.unexpected.append(f"SaslAuthenticate: {answer.error_code!r}")
        except (OSError, asyncio.IncompleteReadError):
            out.broken += 1
        finally:
            writer.close()  # at once: the broker's close is not waited for


async def _flood(host: str, port: int, user: str, connections: int, seconds: float) -> FloodResult:
    # A few hundred distinct wrong passwords, encoded once: the loop stays cheap.
    frames = [
        encode_request(
            SaslAuthenticateRequest(auth_bytes=f"\0{user}\0guess-{n:06d}".encode()), 2, "guesser"
        )
        for n in range(500)
    ]
    out = FloodResult()
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(
        *(
            _guesser(host, port, user, deadline, frames[k::connections], out)
            for k in range(connections)
        )
    )
    out.seconds = time.monotonic() - started
    return out


def run_flood(host: str, port: int, user: str, connections: int, seconds: float) -> FloodResult:
    """The flood, in this process (the entry point of :func:`start_flood`)."""
    try:
        import uvloop

        return uvloop.run(_flood(host, port, user, connections, seconds))
    except ImportError:
        return asyncio.run(_flood(host, port, user, connections, seconds))


def start_flood(
    bootstrap: str, user: str, connections: int = 50, seconds: float = 10.0
) -> tuple[ProcessPoolExecutor, object]:
    """The flood in a fresh process; ``(pool, future)``: ``future.result()`` is its
    :class:`FloodResult`, then shut the pool down."""
    host, _, port = bootstrap.rpartition(":")
    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
    return pool, pool.submit(run_flood, host, int(port), user, connections, seconds)


@dataclass
class CanaryResult:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def canary(
    bootstrap: str, user: str, password: str, seconds: float, interval_s: float = 0.01
) -> CanaryResult:
    """Metadata every ``interval_s`` for ``seconds`` on one SASL_PLAINTEXT connection
    authenticated as ``user``; each answer timed from send to receipt."""
    security = SecurityConfig(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username=user,
        sasl_password=password,
    )
    out = CanaryResult()
    with WireClient(bootstrap, security=security, client_id="canary", timeout=30) as c:
        deadline = time.monotonic() + seconds
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            sent = time.perf_counter()
            try:
                answer = c.request(METADATA)
            except (OSError, ValueError) as exc:
                out.errors.append(repr(exc))
                break
            out.latencies_ms.append((time.perf_counter() - sent) * 1000)
            if not answer.brokers:
                out.errors.append(f"Metadata without brokers: {answer!r}")
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))
    return out

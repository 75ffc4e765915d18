"""Connection hygiene with Kafka's settings: idle connections are closed after
``connections.max.idle.ms`` (1,000 unauthenticated sockets that never send a byte),
``max.connections.per.ip`` refuses connections past the limit, and
``max.connection.creation.rate`` slows accepting down without refusing anything."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

VERSIONS = ApiVersionsRequest(client_software_name="probe", client_software_version="1")


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def _closed(sock: socket.socket, timeout_s: float) -> bool:
    """True once the broker closed ``sock`` (end of stream) within ``timeout_s``."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_connections_are_closed_and_busy_ones_kept(tmp_path: Path) -> None:
    settings = {"connections.max.idle.ms": "1500"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        address = _host_port(broker.bootstrap)
        idle = [socket.create_connection(address) for _ in range(1000)]
        with WireClient(broker.bootstrap) as busy:
            started = time.monotonic()
            while time.monotonic() - started < 4:
                assert busy.request(VERSIONS).error_code == ErrorCode.none
                time.sleep(0.3)
            # Every idle socket was closed by the broker; the busy one is still served.
            assert sum(_closed(s, 5) for s in idle) == 1000
            assert busy.request(VERSIONS).error_code == ErrorCode.none
        for s in idle:
            s.close()


def test_max_connections_per_ip(tmp_path: Path) -> None:
    settings = {"max.connections.per.ip": "5"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        clients = [WireClient(broker.bootstrap) for _ in range(5)]
        try:
            for c in clients:
                assert c.request(VERSIONS).error_code == ErrorCode.none
            extra = socket.create_connection(_host_port(broker.bootstrap))
            assert _closed(extra, 5), "the sixth connection from one address was kept"
            extra.close()
            clients.pop().close()
            time.sleep(0.3)  # the broker sees the close
            with WireClient(broker.bootstrap) as again:
                assert again.request(VERSIONS).error_code == ErrorCode.none
        finally:
            for c in clients:
                c.close()


def test_password_guessing_is_counted_not_logged_line_by_line(tmp_path: Path) -> None:
    """50 wrong PLAIN passwords: each is refused and counted in /metrics; the broker log
    gets one line per window (client_faults), not one per attempt."""
    from concurrent.futures import ThreadPoolExecutor

    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from tests.integration.metrics_scrape import scrape, value
    from tests.integration.security import PLAIN_USERS, plain_jaas

    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "metrics.listener": "http://127.0.0.1:0",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:

        def guess(i: int) -> int:
            with WireClient(broker.bootstrap) as c:
                c.request(SaslHandshakeRequest(mechanism="PLAIN"))
                answer = c.request(
                    SaslAuthenticateRequest(auth_bytes=f"\0alice\0guess{i}".encode())
                )
                return int(answer.error_code)

        with ThreadPoolExecutor(10) as pool:
            codes = list(pool.map(guess, range(50)))
        assert codes == [int(ErrorCode.sasl_authentication_failed)] * 50
        assert value(scrape(broker.http_url), "oncelog_failed_authentication_total") == 50
    lines = [
        line
        for line in (tmp_path / "data-broker.log").read_text().splitlines()
        if "Failed authentication with" in line
    ]
    assert 1 <= len(lines) <= 3, lines


def _open_and_ask(bootstrap: str, n: int) -> tuple[float, list[ErrorCode]]:
    """Open ``n`` connections at once (the kernel completes them: they wait in the listen
    backlog), send ApiVersions on each, then read every answer: the seconds until the
    last one came, and the error codes."""
    started = time.monotonic()
    clients = [WireClient(bootstrap, timeout=60) for _ in range(n)]
    try:
        sent = [(c, c.send(VERSIONS)) for c in clients]
        codes = [c.receive(VERSIONS, cid).error_code for c, cid in sent]
        return time.monotonic() - started, codes
    finally:
        for c in clients:
            c.close()


def test_max_connection_creation_rate_delays_accepting_and_refuses_nothing(
    tmp_path: Path,
) -> None:
    """40 connections at once with the rate at 10/s: the first 10 are the burst one 1 s
    sensor window allows (quota.window.num=2), the other 30 are accepted at 10/s, so the
    last answer takes about 3 s, and every connection is served."""
    from tests.integration.metrics_scrape import scrape, value

    settings = {
        "max.connection.creation.rate": "10",
        "quota.window.num": "2",
        "metrics.listener": "http://127.0.0.1:0",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        assert broker.http_url is not None
        elapsed, codes = _open_and_ask(broker.bootstrap, 40)
        assert codes == [ErrorCode.none] * 40
        assert elapsed >= 2.0, f"40 connections at 10/s after a burst of 10 took {elapsed:.2f} s"
        samples = scrape(broker.http_url)
        assert value(samples, "oncelog_connections_refused_total") == 0
        assert value(samples, "oncelog_connections_throttled_total") >= 10


def test_a_listener_creation_rate_slows_only_that_listener(tmp_path: Path) -> None:
    """listener.name.slow.max.connection.creation.rate=5: 25 connections on SLOW take
    about (25 - 5) / 5 = 4 s; 25 on FAST meanwhile take no such time."""
    settings = {
        "listeners": "FAST://127.0.0.1:0,SLOW://127.0.0.1:0",
        "listener.security.protocol.map": "FAST:PLAINTEXT,SLOW:PLAINTEXT",
        "listener.name.slow.max.connection.creation.rate": "5",
        "quota.window.num": "2",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        fast_s, fast_codes = _open_and_ask(broker.bootstrap_for("FAST"), 25)
        slow_s, slow_codes = _open_and_ask(broker.bootstrap_for("SLOW"), 25)
        assert fast_codes == slow_codes == [ErrorCode.none] * 25
        assert slow_s >= 3.0, f"25 connections at 5/s after a burst of 5 took {slow_s:.2f} s"
        assert fast_s < slow_s


def test_a_password_guessing_flood_leaves_a_canary_served_and_the_log_quiet(
    tmp_path: Path,
) -> None:
    """50 connections guessing PLAIN passwords for 10 s (raw asyncio sockets in another
    process, hanging up as soon as the refusal arrives) while an authenticated canary
    sends Metadata every 10 ms: every guess is refused and counted, every canary request
    is answered, and the broker log has about one line per second at most about failed
    authentication. The canary's latency is a figure, not asserted here:
    bench/auth_flood.py prints it."""
    from tests.integration.auth_flood import canary, start_flood
    from tests.integration.metrics_scrape import scrape, value
    from tests.integration.security import PLAIN_USERS, plain_jaas

    seconds = 10.0
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "metrics.listener": "http://127.0.0.1:0",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        assert broker.http_url is not None
        pool, flood = start_flood(broker.bootstrap, "alice", connections=50, seconds=seconds)
        try:
            served = canary(broker.bootstrap, "bob", PLAIN_USERS["bob"], seconds)
            guessed = flood.result(timeout=seconds + 60)  # type: ignore[attr-defined]
        finally:
            pool.shutdown()
        assert served.errors == []
        assert len(served.latencies_ms) >= seconds * 10  # answered, if not every 10 ms
        assert guessed.unexpected == []
        assert guessed.refused >= 50  # the flood ran
        counted = value(scrape(broker.http_url), "oncelog_failed_authentication_total")
        # Every refusal the guessers read was counted; a guess whose connection broke
        # before its answer may have been counted too.
        assert guessed.refused <= counted <= guessed.attempts
    about_auth = [
        line
        for line in broker.log_path.read_text().splitlines()
        if "failed authentication" in line.lower()
    ]
    assert 1 <= len(about_auth) <= seconds + 2, about_auth

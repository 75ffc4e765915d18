"""Connection hygiene with Kafka's settings: idle connections are closed after
``connections.max.idle.ms`` (1,000 unauthenticated sockets that never send a byte),
and ``max.connections.per.ip`` refuses connections past the limit."""

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

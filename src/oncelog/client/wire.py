"""A minimal blocking Kafka connection built on kio, over PLAINTEXT, TLS and/or SASL.

For what no client library offers: admin RPCs such as DescribeProducers, raw
frames in fault tests, protocol probes, and the requests of oncelog's own producer
(:mod:`oncelog.client.producer`).
"""

from __future__ import annotations

import io
import itertools
import socket
import ssl
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from oncelog.client.errors import AuthenticationError
from oncelog.client.sasl import authenticate, mechanism_for
from oncelog.client.security import PLAINTEXT, SecurityConfig
from oncelog.client.tolerant_responses import TOLERANT_RESPONSES

_SIZE = struct.Struct(">i")


def encode_request(request: Any, correlation_id: int, client_id: str) -> bytes:
    """A size-prefixed request frame of a kio request entity."""
    header_schema = request.__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header = header_schema(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    entity_writer(header_schema)(buf, header)
    entity_writer(type(request))(buf, request)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buf.getvalue()


class WireClient:
    """One connection to one broker (``host:port``); TLS and SASL as ``security`` says."""

    def __init__(
        self,
        address: str,
        *,
        client_id: str = "oncelog-wire",
        timeout: float = 30.0,
        security: SecurityConfig = PLAINTEXT,
    ) -> None:
        host, _, port = address.rpartition(":")
        self.client_id = client_id
        self._correlation = itertools.count(1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        try:
            if security.tls:
                try:
                    sock = security.ssl_context().wrap_socket(sock, server_hostname=host)
                except ssl.SSLCertVerificationError as exc:
                    raise AuthenticationError(
                        f"TLS handshake with {address} failed: {exc.verify_message}"
                    ) from exc
            self.sock = sock
            if security.sasl:
                authenticate(self.request, mechanism_for(security))
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, request: Any, correlation_id: int) -> bytes:
        return encode_request(request, correlation_id, self.client_id)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = _SIZE.unpack(self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, request: Any) -> Any:
        """Send a kio request entity and return the decoded response entity."""
        return self.receive(request, self.send(request))

    def send(self, request: Any) -> int:
        """Send a kio request entity without waiting for the answer: its correlation id."""
        correlation_id = next(self._correlation)
        self.send_raw(self.encode(request, correlation_id))
        return correlation_id

    def receive(self, request: Any, correlation_id: int) -> Any:
        """The answer to ``request``, sent with :meth:`send` (a broker answers in order)."""
        return self.decode_response(
            request.__api_key__, request.__version__, self.recv_frame(), correlation_id
        )

    @staticmethod
    def decode_response(
        api_key: int, version: int, frame: bytes, correlation_id: int | None = None
    ) -> Any:
        schema = TOLERANT_RESPONSES.get((api_key, version)) or load_response_schema(
            api_key, version
        )
        header, pos = entity_reader(schema.__header_schema__)(frame, 0)
        if correlation_id is not None and header.correlation_id != correlation_id:
            raise ValueError(f"correlation id {header.correlation_id} != {correlation_id}")
        body, _ = entity_reader(schema)(frame, pos)
        return body

"""A TLS- and SASL-terminating proxy in front of a real broker, for testing the client
layer's security until the broker has listeners of its own.

Per connection: TLS handshake (if given a server context), then SaslHandshake v1 and
SaslAuthenticate v2 round trips checked with scramp's server (SCRAM) or a plain password
comparison (PLAIN), then bytes piped both ways to the broker. Thread-based; ``close()``
stops the listener and every piped connection.
"""

from __future__ import annotations

import datetime
import io
import socket
import ssl
import struct
import threading
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_SIZE = struct.Struct(">i")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_request(sock: socket.socket) -> tuple[Any, Any]:
    frame = _recv_exact(sock, _SIZE.unpack(_recv_exact(sock, 4))[0])
    api_key, version = struct.unpack_from(">hh", frame, 0)
    schema = load_request_schema(api_key, version)
    header, pos = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, pos)
    return header, body


def write_response(sock: socket.socket, correlation_id: int, response: Any) -> None:
    buf = io.BytesIO()
    entity_writer(response.__header_schema__)(
        buf, response.__header_schema__(correlation_id=correlation_id)
    )
    entity_writer(type(response))(buf, response)
    data = buf.getvalue()
    sock.sendall(_SIZE.pack(len(data)) + data)


class SaslAuthenticator:
    """The broker side of the SASL exchange, for one connection."""

    def __init__(self, users: dict[str, str], mechanisms: tuple[str, ...]) -> None:
        self.users = users
        self.mechanisms = mechanisms
        self.authenticated: str | None = None

    def run(self, sock: socket.socket) -> bool:
        header, hs = read_request(sock)
        hs_resp = load_response_schema(SASL_HANDSHAKE, 1)
        if hs.mechanism not in self.mechanisms:
            write_response(
                sock,
                header.correlation_id,
                hs_resp(
                    error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=self.mechanisms
                ),
            )
            return False
        write_response(
            sock,
            header.correlation_id,
            hs_resp(error_code=ErrorCode.none, mechanisms=self.mechanisms),
        )
        return self._plain(sock) if hs.mechanism == "PLAIN" else self._scram(sock, hs.mechanism)

    def _reply(
        self,
        sock: socket.socket,
        correlation_id: int,
        auth_bytes: bytes,
        error: ErrorCode = ErrorCode.none,
    ) -> None:
        resp = load_response_schema(SASL_AUTHENTICATE, 2)
        message = None if error == ErrorCode.none else "Authentication failed"
        write_response(
            sock,
            correlation_id,
            resp(
                error_code=error,
                error_message=message,
                auth_bytes=auth_bytes,
                session_lifetime=datetime.timedelta(0),
            ),
        )

    def _plain(self, sock: socket.socket) -> bool:
        header, req = read_request(sock)
        _, user, password = req.auth_bytes.split(b"\0")
        ok = self.users.get(user.decode()) == password.decode()
        self.authenticated = user.decode() if ok else None
        self._reply(
            sock,
            header.correlation_id,
            b"",
            ErrorCode.none if ok else ErrorCode.sasl_authentication_failed,
        )
        return ok

    def _scram(self, sock: socket.socket, name: str) -> bool:
        from scramp import ScramException, ScramMechanism

        mech = ScramMechanism(name)
        auth = {u: mech.make_auth_info(p) for u, p in self.users.items()}
        users: list[str] = []

        def auth_fn(user: str) -> Any:
            users.append(user)
            return auth[user]

        server = mech.make_server(auth_fn)
        header, first = read_request(sock)
        try:
            server.set_client_first(first.auth_bytes.decode())
        except (ScramException, KeyError):
            self._reply(sock, header.correlation_id, b"", ErrorCode.sasl_authentication_failed)
            return False
        self._reply(sock, header.correlation_id, server.get_server_first().encode())
        header, final = read_request(sock)
        try:
            server.set_client_final(final.auth_bytes.decode())
        except ScramException:
            self._reply(sock, header.correlation_id, b"", ErrorCode.sasl_authentication_failed)
            return False
        self.authenticated = users[0]
        self._reply(sock, header.correlation_id, server.get_server_final().encode())
        return True


class SecureProxy:
    """Listens at once (``address``); pipes to ``upstream`` (host:port), which may be set
    after construction, e.g. once a broker advertising this proxy's address started."""

    def __init__(
        self,
        *,
        tls: ssl.SSLContext | None = None,
        users: dict[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ) -> None:
        self.upstream = ""
        self.tls = tls
        self.users = users
        self.mechanisms = mechanisms
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self.authenticated: list[str] = []
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._socks.append(client)
        try:
            if self.tls is not None:
                client = self.tls.wrap_socket(client, server_side=True)
                self._socks.append(client)
            if self.users is not None:
                sasl = SaslAuthenticator(self.users, self.mechanisms)
                if not sasl.run(client):
                    client.close()
                    return
                assert sasl.authenticated is not None
                self.authenticated.append(sasl.authenticated)
            host, _, port = self.upstream.rpartition(":")
            upstream = socket.create_connection((host, int(port)))
            self._socks.append(upstream)
        except (OSError, ConnectionError):
            client.close()
            return
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> SecureProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""A tiny HTTP forward proxy on loopback for tests: absolute-URI requests (GET, POST, ...) and
CONNECT tunnels, each counted by the host:port it goes to, optionally behind a Basic login
(407 until the client answers with it, as a paid proxy does).

Each request is relayed on a connection of its own (`Connection: close` upstream) and the bytes
are piped both ways as they come, so a streamed answer (server-sent events) streams through."""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import threading
from collections import Counter
from urllib.parse import urlsplit

HOP_HEADERS = {b"proxy-authorization", b"proxy-connection", b"connection", b"keep-alive"}


class ForwardProxy:
    def __init__(self, username: str = "", password: str = ""):
        self.login = f"{username}:{password}" if username or password else ""
        self.counts: Counter[str] = Counter()  # host:port -> requests relayed (tunnels too)
        self.tunnels: Counter[str] = Counter()  # host:port -> CONNECT tunnels among them
        self.refused = 0  # requests answered 407 (no or wrong login)
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]

    def url(self, username: str = "", password: str = "") -> str:
        login = f"{username}:{password}@" if username or password else ""
        return f"http://{login}127.0.0.1:{self.port}"

    def relayed(self, host_port: str) -> int:
        with self._lock:
            return self.counts[host_port]

    def __enter__(self) -> ForwardProxy:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- one client connection: one request --------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        head, rest = _read_head(client)
        if not head:
            return
        lines = head.split(b"\r\n")
        method, target, version = lines[0].split(b" ", 2)
        headers = [line for line in lines[1:] if line]
        if not self._authorized(headers):
            with self._lock:
                self.refused += 1
            client.sendall(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
            )
            return
        if method == b"CONNECT":
            host, _, port = target.decode().rpartition(":")
            upstream = socket.create_connection((host.strip("[]"), int(port)))
            self._count(f"{host}:{port}", tunnel=True)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(client, upstream, rest)
            return
        url = urlsplit(target.decode())
        port = url.port or (443 if url.scheme == "https" else 80)
        upstream = socket.create_connection((url.hostname, port))
        self._count(f"{url.hostname}:{port}")
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in HOP_HEADERS]
        request = b" ".join((method, path.encode(), version)) + b"\r\n"
        request += b"".join(h + b"\r\n" for h in kept) + b"Connection: close\r\n\r\n"
        upstream.sendall(request)
        _pipe(client, upstream, rest)

    def _authorized(self, headers: list[bytes]) -> bool:
        if not self.login:
            return True
        wanted = b"basic " + base64.b64encode(self.login.encode())
        for header in headers:
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"proxy-authorization":
                return value.strip().lower() == wanted.lower()
        return False

    def _count(self, host_port: str, *, tunnel: bool = False) -> None:
        with self._lock:
            self.counts[host_port] += 1
            self.tunnels[host_port] += tunnel


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return b"", b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _pipe(client: socket.socket, upstream: socket.socket, pending: bytes) -> None:
    """Bytes both ways until the server closes (or the client goes away)."""
    try:
        if pending:
            upstream.sendall(pending)
        sockets = [client, upstream]
        while True:
            readable, _, _ = select.select(sockets, [], [], 60)
            if not readable:
                return
            for sock in readable:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                (upstream if sock is client else client).sendall(chunk)
    except OSError:
        return
    finally:
        upstream.close()

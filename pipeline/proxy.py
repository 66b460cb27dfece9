"""An account's proxy: `[browser] proxy` / `[accounts.NAME] proxy`, a URL such as
`http://user:password@proxy.example:8080`, parsed and checked in one place.

Chromium takes the server (scheme, host, port) on its own and the login apart (Playwright
answers the proxy's challenge with it), and cannot log in to a SOCKS5 proxy at all. The
password is a secret: it is shown nowhere (`shown`), and the workspace registers it for
masking (pipeline.redact) before anything is written.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote, urlsplit

SCHEMES = ("http", "https", "socks5")
EXAMPLE = "http://user:password@proxy.example:8080"


class ProxyError(ValueError):
    """The proxy URL cannot be used; the message never holds the password."""


class Proxy(NamedTuple):
    scheme: str
    host: str
    port: int
    username: str = ""
    password: str = ""
    raw_password: str = ""  # as written in the URL (percent-encoded): masked too

    @property
    def server(self) -> str:
        """What Chromium is given: scheme://host:port, no login."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def shown(self) -> str:
        """The proxy as messages show it: the user, never the password."""
        login = f" (user {self.username})" if self.username else ""
        return self.server + login

    def playwright(self) -> dict[str, str]:
        """Playwright's `proxy` option of a launch or a context."""
        options = {"server": self.server}
        if self.username or self.password:
            options.update(username=self.username, password=self.password)
        return options

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in {self.password, self.raw_password} if s)


def parse(url: str) -> Proxy:
    """The proxy of `url`; ProxyError saying what is wrong (never showing the password)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ProxyError(f"is not a proxy URL such as {EXAMPLE}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ProxyError(f"must start with {', '.join(s + '://' for s in SCHEMES)} (e.g. {EXAMPLE})")
    if not parts.hostname:
        raise ProxyError(f"names no host (e.g. {EXAMPLE})")
    if port is None or port == 0:
        raise ProxyError(f"names no port: add it after the host, e.g. {EXAMPLE}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ProxyError(f"must be only scheme://[user:password@]host:port (e.g. {EXAMPLE})")
    password = parts.password or ""
    if scheme == "socks5" and (password or parts.username):
        raise ProxyError(
            "is a SOCKS5 proxy with a login, which Chromium cannot use: use the provider's "
            "http:// endpoint with the login, or a SOCKS5 proxy that allows your IP without one"
        )
    return Proxy(
        scheme=scheme,
        host=parts.hostname,
        port=port,
        username=unquote(parts.username or ""),
        password=unquote(password),
        raw_password=password,
    )


def problem(url: str) -> str | None:
    """Why `url` is not a usable proxy (None: it is, or it is empty: no proxy)."""
    if url == "":
        return None
    try:
        parse(url)
    except ProxyError as err:
        return str(err)
    return None


def secrets(url: str) -> tuple[str, ...]:
    """The password of a proxy URL, as written and decoded; () when it has none or is not one."""
    try:
        return parse(url).secrets if url else ()
    except ProxyError:
        return ()


class Probe(NamedTuple):
    ok: bool
    detail: str  # what was found, never the password


def probe(proxy: Proxy, target: str, timeout: float = 5.0) -> Probe:
    """Whether the proxy answers: a TCP connection to it, and for an http:// proxy a CONNECT to
    `target` (host:port, the chat site) with its login, which tells a wrong login (407) from a
    working one. An https:// or socks5:// proxy is only reached (its handshake is Chromium's)."""
    import base64
    import socket

    try:
        sock = socket.create_connection((proxy.host, proxy.port), timeout=timeout)
    except OSError as err:
        return Probe(False, f"cannot connect to {proxy.host}:{proxy.port} ({err.strerror or err})")
    with sock:
        if proxy.scheme != "http":
            return Probe(True, f"reachable at {proxy.host}:{proxy.port} (TCP; the browser does the rest)")
        request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        if proxy.username or proxy.password:
            login = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
            request += f"Proxy-Authorization: Basic {login}\r\n"
        try:
            sock.sendall((request + "\r\n").encode())
            answer = sock.recv(4096).split(b"\r\n", 1)[0].decode("latin-1").strip()
        except OSError as err:
            return Probe(False, f"connected, but no answer to CONNECT {target} ({err.strerror or err})")
    code = answer.split(" ")[1] if answer.startswith("HTTP/") and " " in answer else ""
    if code.startswith("2"):
        return Probe(True, f"reachable, lets the browser through to {target}")
    if code == "407":
        given = "refuses the login given" if proxy.username or proxy.password else "wants a login"
        return Probe(False, f"reachable, but {given} (407 Proxy Authentication Required)")
    return Probe(False, f"reachable, but answered CONNECT {target} with {answer[:80]!r}")

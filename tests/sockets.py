"""The kernel's table of TCP sockets (/proc/net/tcp and tcp6), read once for the tests and
benches that count connections: a host's database backends (hosts.py), a browser's DevTools
clients (test_qwen_engine.py, bench/bench_attached_runs.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

ESTABLISHED = "01"


def tcp_sockets() -> Iterator[list[str]]:
    """Each socket's columns: [1] the local address:port (hex), [3] the state, [9] the inode."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        yield from (line.split() for line in lines)


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def devtools_clients(endpoint: str) -> int:
    """Connections the browser at `endpoint` (http://host:port) has open on its DevTools port."""
    port = int(endpoint.rsplit(":", 1)[1])
    return sum(1 for columns in tcp_sockets() if columns[3] == ESTABLISHED and port_of(columns[1]) == port)

"""A throwaway PostgreSQL server for the tests: Debian's binaries (`initdb`, `pg_ctl`) in a temp
folder, on a free loopback port, no system service; stopped (and its folder removed) afterwards,
by its guard (tests/orphan_guard.py) when the test process is killed outright.

initdb refuses to run as root, so as root the server runs as the `postgres` user (Debian's
package creates it). Every test gets its own database (`new_database`), so a test never sees
another's rows and a migration test starts from nothing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from orphan_guard import Guard

INSTALL = "apt-get install -y postgresql (scripts/setup.sh does)"


def find_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} not found under /usr/lib/postgresql: {INSTALL}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """`with PostgresServer() as server:` a running server; `server.url(db)` to reach it."""

    def __init__(self, folder: Path | None = None, port: int = 0) -> None:
        """A new server's folder and port, or (`folder`, `port`) those of one already made."""
        self.folder = folder or Path(tempfile.mkdtemp(prefix="qwenpipe-pg-"))
        self.data = self.folder / "data"
        self.port = port or _free_port()
        self.user = "postgres" if os.geteuid() == 0 else ""
        self._guard: Guard | None = None  # stops it if the test process is killed outright

    def _command(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else list(argv)

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self._command(*argv), capture_output=True, text=True, check=check, timeout=120)

    def start(self) -> PostgresServer:
        """Start the server (made with initdb the first time; a stopped one keeps its databases)."""
        if not self.data.exists():
            if self.user:
                shutil.chown(self.folder, self.user)
            self._run(find_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            find_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "log"),
            "-w",
            "start",
        )
        if self._guard is None:
            stop = self._command(find_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self._guard = Guard(command=stop, remove=[self.folder])
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same port: every connection is cut (`fast` rolls back what
        is under way; `immediate` is a crash, recovered from the WAL at the start)."""
        self.stop(mode)
        self.start()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server and keep its databases (`start` brings it back): the store unreachable."""
        self._run(find_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def backends(self, database: str, application_name: str = "qwenpipe") -> list[tuple[int, int, str]]:
        """(server pid, client port, state) of every connection to `database` by that application;
        the state is pg_stat_activity's ("idle", "active", "idle in transaction"...)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid, client_port, coalesce(state, '') FROM pg_stat_activity"
                " WHERE datname = %s AND application_name = %s",
                (database, application_name),
            ).fetchall()
        return [(int(pid), int(port or 0), state) for pid, port, state in rows]

    def terminate(self, pids) -> int:
        """pg_terminate_backend each server pid (a connection cut mid-step); how many were cut."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            return sum(
                bool(conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]) for pid in pids
            )

    def close(self) -> None:
        """Stop the server and remove its folder."""
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

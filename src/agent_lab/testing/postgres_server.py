"""``PostgresServer``: a throwaway PostgreSQL server for tests and benchmarks.

For example::

    with PostgresServer() as server:
        url = server.create_database("conformance_1")
        store = PostgresSessionStore(url)

It runs Debian's ``postgresql`` binaries (``initdb``, ``pg_ctl``; found on ``PATH`` or
under ``/usr/lib/postgresql/<version>/bin``) on a new data directory in the system's
temporary directory, listening on a free loopback port only (no Unix socket), with
``trust`` authentication for the ``postgres`` role, and deletes everything on exit.
``initdb`` refuses to run as root, so as root the server runs as the ``postgres``
system user (created by the Debian package) through ``runuser``.

``fsync`` is off: these servers hold test data, and the tests kill clients, not the
server, so a commit never depends on the disk surviving.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from agent_lab.domain.errors import ConfigError

__all__ = ["PostgresServer", "find_postgres_bin", "postgres_available"]

_SERVER_USER: Final = "postgres"
_DEBIAN_ROOT: Final = Path("/usr/lib/postgresql")


def find_postgres_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None``."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    if _DEBIAN_ROOT.is_dir():
        versions = sorted(
            (p for p in _DEBIAN_ROOT.iterdir() if (p / "bin" / "initdb").exists()),
            key=lambda p: int(p.name) if p.name.isdigit() else 0,
        )
        if versions:
            return versions[-1] / "bin"
    return None


def postgres_available() -> bool:
    """Whether a server can be started here (binaries present; a user to run them)."""
    if find_postgres_bin() is None:
        return False
    if os.geteuid() != 0:
        return True
    return shutil.which("runuser") is not None and _user_exists(_SERVER_USER)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server on a temporary data directory (see the module docstring)."""

    def __init__(self, *, max_connections: int = 200) -> None:
        bin_dir = find_postgres_bin()
        if bin_dir is None:
            raise ConfigError("PostgreSQL is not installed (apt-get install postgresql)")
        self._bin = bin_dir
        self._max_connections = max_connections
        self._root: Path | None = None
        self.port = 0

    @property
    def data_dir(self) -> Path:
        assert self._root is not None, "the server is not started"
        return self._root / "data"

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database`` on this server, as the ``postgres`` role."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        command = [str(arg) for arg in args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", _SERVER_USER, "--", *command]
        return subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=120, cwd="/"
        )

    def start(self) -> None:
        """Create the data directory and start the server; wait until it accepts."""
        self._root = Path(tempfile.mkdtemp(prefix="agent-lab-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self._root, _SERVER_USER, _SERVER_USER)
        self._run(
            self._bin / "initdb", "-D", self.data_dir, "-U", "postgres", "--auth=trust",
            "--no-sync", "-E", "UTF8", "--locale=C.UTF-8",
        )  # fmt: skip
        for _ in range(5):
            self.port = _free_port()
            try:
                self._start_on_port()
                return
            except subprocess.CalledProcessError:
                continue
        raise ConfigError(f"PostgreSQL did not start; see {self._root / 'server.log'}")

    def _start_on_port(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories=''"
            f" -c fsync=off -c full_page_writes=off -c max_connections={self._max_connections}"
            " -c shared_buffers=32MB"
        )
        assert self._root is not None
        self._run(
            self._bin / "pg_ctl", "-D", self.data_dir, "-l", self._root / "server.log",
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory. Idempotent."""
        root, self._root = self._root, None
        if root is None:
            return
        try:
            if (root / "data" / "postmaster.pid").exists():
                command = [str(self._bin / "pg_ctl"), "-D", str(root / "data"), "-m", "fast"]
                if os.geteuid() == 0:
                    command = ["runuser", "-u", _SERVER_USER, "--", *command]
                with contextlib.suppress(subprocess.SubprocessError):
                    subprocess.run(
                        [*command, "-w", "stop"], capture_output=True, timeout=60, check=False
                    )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """Create an empty database; return its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

"""A throw-away PostgreSQL cluster for the tests and the soak benchmark: Debian's ``postgresql`` binaries,
a data directory in a temp dir, the server on a free loopback port, a fresh database per use (test),
everything removed at the end.

PostgreSQL refuses to run as root: when the tests run as root, the cluster
belongs to the ``postgres`` user the Debian package creates, and its
commands run through ``runuser``.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class PostgresUnavailable(Exception):
    """The cluster cannot be made or started here (binaries missing, initdb or pg_ctl failed)."""


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise PostgresUnavailable("initdb not found: apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    base: Path
    port: int
    bin_dir: Path
    run_as: str | None
    _names = itertools.count()

    @classmethod
    def start(cls) -> "PostgresServer":
        bin_dir = _bin_dir()
        run_as = "postgres" if os.geteuid() == 0 else None
        base = Path(tempfile.mkdtemp(prefix="iobo-pg-"))
        if run_as:
            user = pwd.getpwnam(run_as)
            os.chown(base, user.pw_uid, user.pw_gid)
        server = cls(base, _free_port(), bin_dir, run_as)
        server._run("initdb", "-D", str(base / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        # fsync off: a throw-away cluster; more connections for several tuners and their workers
        options = (f"-p {server.port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off "
                   f"-c synchronous_commit=off -c max_connections=200")
        server._run("pg_ctl", "-D", str(base / "data"), "-o", options, "-l", str(base / "server.log"), "-w",
                    "-t", "60", "start")
        return server

    def _run(self, tool: str, *args: str) -> str:
        command = [str(self.bin_dir / tool), *args]
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.base)
        if done.returncode != 0:
            log = self.base / "server.log"
            raise PostgresUnavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip()}"
                                      + (f"\n{log.read_text()[-2000:]}" if log.exists() else ""))
        return done.stdout

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database (one per test: a study name can then mean the only study)."""
        name = f"iobo_test_{os.getpid()}_{next(self._names)}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.base / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

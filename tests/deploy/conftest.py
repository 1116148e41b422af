"""A throwaway PostgreSQL server for the team-deployment tests, started once per session.

Debian's server binaries (``apt-get install postgresql``; ``.ci/run`` installs them) are looked
up under ``/usr/lib/postgresql/<version>/bin``, else on ``PATH``; without them the tests are
skipped. The cluster lives in a temporary folder: ``initdb`` there, the server listening on
127.0.0.1 only, on a free port, with its unix socket inside the folder. TCP connections need a
password (scram-sha-256): the test role ``lmforge`` owns the databases ``dagster`` and
``mlflow``. ``initdb`` and ``postgres`` refuse to run as root: as root, the folder belongs to the
``postgres`` OS user (the Debian package creates it) and the server commands run as that user.
The server is stopped (``pg_ctl stop -m fast``) and the folder removed at the end of the session.

The training tests' tiny project (``project``: a cleaned, tokenised synthetic corpus) is
re-exported for the MLflow test.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from ..training.conftest import project, tiny_data
from ..training.test_pretrain import _free_port as free_port

__all__ = ["PostgresServer", "postgres", "project", "tiny_data", "free_port", "server_binaries"]

SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
ROLE = "lmforge"
PASSWORD = "lmforge-test-only"  # a throwaway server on loopback, gone after the session
DATABASES = ("dagster", "mlflow")


def server_binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: the newest /usr/lib/postgresql/*/bin, else PATH's."""
    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", Path(folder).parent.name))

    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if all(os.access(Path(folder) / p, os.X_OK) for p in SERVER_PROGRAMS):
            return Path(folder)
    found = shutil.which("pg_ctl")
    if found and all(os.access(Path(found).parent / p, os.X_OK) for p in SERVER_PROGRAMS):
        return Path(found).parent
    return None


@dataclass
class PostgresServer:
    bin: Path
    home: Path
    port: int
    host: str = "127.0.0.1"
    user: str = ROLE
    password: str = PASSWORD

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def socket_dir(self) -> Path:
        return self.home / "socket"

    def uri(self, database: str) -> str:
        """A SQLAlchemy URI for ``database`` over TCP with the test role's password, naming the
        driver: SQLAlchemy 2.1 reads a plain ``postgresql://`` as psycopg 3, which the team extra
        does not install (it installs psycopg2)."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def connect(self, database: str, **overrides):
        """A psycopg2 connection (autocommit) over TCP, as the test role unless overridden."""
        import psycopg2

        kwargs = {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                  "dbname": database, "connect_timeout": 10, **overrides}
        connection = psycopg2.connect(**kwargs)
        connection.autocommit = True
        return connection

    def query(self, database: str, sql: str, *args) -> list[tuple]:
        with self.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute(sql, args)
            rows = cursor.fetchall()
        connection.close()
        return rows


def _as_server_user() -> list[str]:
    """The prefix that runs a server command as the ``postgres`` OS user when we are root."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _run(command: list[str], home: Path) -> subprocess.CompletedProcess:
    # cwd: the server user must be able to read its working directory
    return subprocess.run(_as_server_user() + command, cwd=home, capture_output=True, text=True, timeout=120)


def _start(server: PostgresServer) -> subprocess.CompletedProcess:
    conf = server.data / "postgresql.conf"
    with open(conf, "a", encoding="utf-8") as f:  # later settings win: the last port written is used
        f.write("\n# lmforge tests: loopback only, a private socket, no durability needed\n"
                f"listen_addresses = '127.0.0.1'\nport = {server.port}\n"
                f"unix_socket_directories = '{server.socket_dir}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
    return _run([str(server.bin / "pg_ctl"), "-D", str(server.data), "-l", str(server.home / "server.log"),
                 "-w", "-t", "60", "start"], server.home)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A running PostgreSQL server on 127.0.0.1 with the role ``lmforge`` (password auth over
    TCP) owning the databases ``dagster`` and ``mlflow``."""
    pytest.importorskip("psycopg2", reason="psycopg2 (the team extra, part of dev) is not installed")
    binaries = server_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin "
                    "or on PATH: apt-get install postgresql (.ci/run installs it)")
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, and initdb/postgres refuse root: no `postgres` OS user to run "
                        "them as (Debian's postgresql package creates it)")
    # as root, under /tmp: the postgres user must reach it (a $TMPDIR below /root would not do)
    home = Path(tempfile.mkdtemp(prefix="lmforge-pg-", dir="/tmp" if os.geteuid() == 0 else None))
    try:
        (home / "socket").mkdir()
        if os.geteuid() == 0:
            for path in (home, home / "socket"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        done = _run([str(binaries / "initdb"), "-D", str(home / "data"), "-U", "postgres", "--encoding=UTF8",
                     "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"], home)
        if done.returncode != 0:
            pytest.fail(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        for _ in range(3):  # another process may take the free port before the server does
            server = PostgresServer(bin=binaries, home=home, port=free_port())
            done = _start(server)
            if done.returncode == 0:
                break
        else:
            log = (home / "server.log").read_text(encoding="utf-8", errors="replace")[-3000:]
            pytest.fail(f"pg_ctl start failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{log}")
        try:
            # the superuser over the private unix socket (trust), to create the test role and databases
            admin = server.connect("postgres", host=str(server.socket_dir), user="postgres", password=None)
            with admin.cursor() as cursor:
                cursor.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD %s", (PASSWORD,))
                for database in DATABASES:
                    cursor.execute(f"CREATE DATABASE {database} OWNER {ROLE}")
            admin.close()
            yield server
        finally:
            _run([str(binaries / "pg_ctl"), "-D", str(server.data), "-m", "fast", "-w", "stop"], home)
    finally:
        shutil.rmtree(home, ignore_errors=True)

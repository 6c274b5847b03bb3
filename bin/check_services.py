"""Says clearly which of PostgreSQL and Redis is unreachable, and how to start it."""

import os
import socket
import sys
from urllib.parse import parse_qs, urlparse

SERVICES = [
    (
        "PostgreSQL",
        "DATABASE_URL",
        5432,
        "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    ),
    (
        "Redis",
        "REDIS_URL",
        6379,
        "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no",
    ),
]


def reachable(host: str, port: int) -> bool:
    """A TCP host, or a Unix socket directory (the embedded server's ?host=/dir)."""
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX) as unix:
                unix.settimeout(2)
                unix.connect(f"{host}/.s.PGSQL.{port}")
                return True
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def main() -> int:
    missing = []
    for name, variable, default_port, how in SERVICES:
        url = urlparse(os.environ.get(variable, ""))
        socket_dir = parse_qs(url.query).get("host", [""])[0]
        host, port = url.hostname or socket_dir or "127.0.0.1", url.port or default_port
        if not reachable(host, port):
            missing.append(
                f"  {name} is not reachable at {host}:{port} ({variable}). Start it:\n    {how}"
            )
    if missing:
        print(
            "make test needs a running PostgreSQL and Redis:\n" + "\n".join(missing),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

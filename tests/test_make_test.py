"""`make test`'s services (bin/test-services): a private redis-server on a free port when no
Redis is named, gone after the command; one line saying how to install Redis where there is
none. (.ci/run runs a fresh clone's `make test` with nothing named, embedded PostgreSQL too.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bin" / "test-services"

REPORT = """
import json, os, redis
client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
client.set("cowry-test-services", "here")
print(json.dumps({
    "redis": os.environ["REDIS_URL"],
    "broker": os.environ["CELERY_BROKER_URL"],
    "database": os.environ["DATABASE_URL"],
    "ping": redis.Redis.from_url(os.environ["REDIS_URL"]).ping(),
}))
"""


def _environment(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "CELERY_BROKER_URL") and not key.startswith("DJANGO_")
    }
    return {**env, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused", **extra}


def test_with_no_redis_named_a_private_one_serves_the_command_and_stops_after_it():
    done = subprocess.run(
        [sys.executable, SCRIPT, sys.executable, "-c", REPORT],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout.splitlines()[-1])
    base = seen["redis"].rsplit("/", 1)[0]
    assert seen["ping"] is True
    assert (seen["redis"], seen["broker"]) == (f"{base}/0", f"{base}/1")
    assert not base.endswith(":6379")  # not whatever answers on the standard port
    assert seen["database"].endswith("/unused")  # a named database is used as it is
    client = redis.Redis.from_url(seen["redis"], socket_connect_timeout=1)
    try:
        client.ping()
        raise AssertionError("the private Redis outlived make test")
    except redis.ConnectionError:
        pass


def test_without_redis_server_one_line_says_how_to_install_it(tmp_path):
    done = subprocess.run(
        [sys.executable, SCRIPT, "true"],
        env=_environment(PATH=str(tmp_path)),  # no redis-server on it
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "install redis-server" in line and "REDIS_URL" in line


def test_named_services_are_used_as_they_are():
    named = {"REDIS_URL": "redis://127.0.0.1:6379/5", "CELERY_BROKER_URL": "redis://h:1/2"}
    done = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            sys.executable,
            "-c",
            "import os; print(os.environ['REDIS_URL'], os.environ['CELERY_BROKER_URL'])",
        ],
        env=_environment(**named),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == [named["REDIS_URL"], named["CELERY_BROKER_URL"]]

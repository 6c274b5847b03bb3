"""What /health checks: the database, the broker, the shared Redis and that a Celery worker
answered recently. Only the database and the broker decide its status (REQUIRED): the web
serves without the others, so they are reported, as "degraded", never a 503.

A worker's consumer records a heartbeat every WORKER_HEARTBEAT_SECONDS (config.celery.Heartbeat)
in the "health" cache, where it lasts WORKER_SILENT_AFTER_SECONDS: the web reads one key, with
no round trip through the broker to the workers on each request."""

import logging
import socket

from celery import current_app
from django.conf import settings
from django.core.cache import caches
from django.db import connection

from core.log_limits import OnChange

logger = logging.getLogger("cowry")

HEARTBEAT_KEY = "worker-heartbeat"
# The checks /health's status and code follow; the others (redis, worker) only inform.
REQUIRED = ("database", "broker")


def heartbeat_record() -> None:
    """This worker is alive: what /health's worker check reads."""
    caches["health"].set(
        HEARTBEAT_KEY, socket.gethostname(), timeout=settings.WORKER_SILENT_AFTER_SECONDS
    )


def _failed(exc: Exception) -> str:
    return f"error: {type(exc).__name__}"


def database_check() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means "not healthy", whatever the driver raised
        return _failed(exc)
    return "ok"


def broker_check() -> str:
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return _failed(exc)
    return "ok"


def redis_and_worker_checks() -> dict[str, str]:
    """The heartbeat's read is the Redis check too (none in embedded mode: a file under var/)."""
    try:
        heartbeat = caches["health"].get(HEARTBEAT_KEY)
    except Exception as exc:
        return {"redis": _failed(exc), "worker": "unknown"}
    worker = "ok" if heartbeat else f"error: silent for {settings.WORKER_SILENT_AFTER_SECONDS}s"
    return {"redis": "ok", "worker": worker} if settings.REDIS_URL else {"worker": worker}


def checks() -> dict[str, str]:
    return {"database": database_check(), "broker": broker_check(), **redis_and_worker_checks()}


# The required checks that failed at this process's last /health: an outage is a WARNING when
# it starts (or what fails changes) and an INFO when it ends, not a line per probe.
_REQUIRED_FAILING = OnChange(())


def _change_log(results: dict[str, str]) -> None:
    failing = tuple(name for name in REQUIRED if results[name] != "ok")
    if not _REQUIRED_FAILING.changed(failing):
        return
    if failing:
        logger.warning(
            "/health unavailable (503): %s (logged again when this changes, per web process)",
            ", ".join(f"{name} {results[name]}" for name in failing),
        )
    else:
        logger.info("/health ok again: the database and the broker answer")


def report() -> tuple[bool, dict]:
    """Whether the required checks pass, and /health's body: `status` from the required checks
    only, `degraded` naming the optional ones that did not answer "ok", and every check."""
    results = checks()
    _change_log(results)
    healthy = all(results[name] == "ok" for name in REQUIRED)
    degraded = [name for name, value in results.items() if name not in REQUIRED and value != "ok"]
    body = {
        "status": "ok" if healthy else "unavailable",
        "version": "1.0.0",
        "degraded": degraded,
        "checks": results,
    }
    return healthy, body

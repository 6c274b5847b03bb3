"""Work handed to Celery by task name. A service names the task it enqueues; the app's
`tasks` module defines it and calls the services: neither module imports the other."""

import logging
from datetime import datetime
from typing import Any

from celery import Task, current_app
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

logger = logging.getLogger("cowry")


def registered(name: str) -> Task:
    """The task registered as `name`; NotRegistered if none. A web process imports the apps'
    tasks modules the first time it asks (a worker has them from its start)."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def enqueue(
    name: str, /, *, eta: datetime | None = None, countdown: float | None = None, **kwargs: Any
) -> None:
    """Send the task `name` with these keyword arguments, at `eta` or after `countdown`
    seconds if given. An unknown name raises NotRegistered and sends nothing."""
    registered(name).apply_async(kwargs=kwargs, eta=eta, countdown=countdown)


def enqueue_on_commit(name: str, /, *, countdown: float | None = None, **kwargs: Any) -> None:
    """`enqueue` once the caller's transaction commits. For work a beat sweep finds again: a
    broker that is down is logged, never an error for the caller, whose writes are committed."""

    def send() -> None:
        try:
            enqueue(name, countdown=countdown, **kwargs)
        except BrokerError:
            named = ", ".join(f"{key}={value}" for key, value in kwargs.items())
            logger.warning("Broker unreachable; %s (%s) left to its sweep", name, named)

    # robust: anything else it raises is logged too (a function, not a partial: Django logs a
    # robust callback's failure by its __qualname__)
    transaction.on_commit(send, robust=True)

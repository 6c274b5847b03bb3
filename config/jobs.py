"""Work handed to Celery by task name. A service names the task it enqueues; the app's
`tasks` module defines it and calls the services: neither module imports the other."""

from datetime import datetime
from typing import Any

from celery import Task, current_app


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

"""Transaction helpers."""

import contextlib
import logging
from functools import partial

from django.db import transaction


def joined_atomic() -> contextlib.AbstractContextManager:
    """Join the caller's transaction when there is one, else open one.

    For service steps that must run in a transaction but never roll back on their own: a
    nested `transaction.atomic()` would cost a SAVEPOINT and a RELEASE round trip each time.
    The step must raise its domain errors before it writes anything, so a caller that catches
    one can go on with its transaction."""
    if transaction.get_connection().in_atomic_block:
        return contextlib.nullcontext()
    return transaction.atomic()


def log_on_commit(logger: logging.Logger, level: int, message: str, *args: object) -> None:
    """Log the line once the caller's transaction commits (at once outside one), and never if
    it rolls back: a line about a change must not outlive the change."""
    transaction.on_commit(partial(logger.log, level, message, *args))

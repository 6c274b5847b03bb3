"""Provider gateways for the fault tests' workers (`worker_settings`): the sandbox, with a fault
at a chosen point of a provider call. Their state lives in the shared Redis, so it outlives the
worker processes the tests kill."""

import contextlib
import os
import signal

from django.db import DatabaseError, connection

from core import shared_cache
from payments.provider import sandbox_gateway
from payments.provider.simulator import SimulatorGateway

# FAULT_RUN: a token of the test run (its Redis keys); FAULT_KILL_AFTER / FAULT_CUT_AFTER: the
# kinds of call (collection, disbursement) whose first request per reference kills the calling
# worker / terminates its PostgreSQL backend.
RUN_ENV, KILL_ENV, CUT_ENV = "FAULT_RUN", "FAULT_KILL_AFTER", "FAULT_CUT_AFTER"


def requests_key(run: str) -> str:
    return shared_cache.cache_key(f"faults:{run}:requests")


def _named(env: str, kind: str) -> bool:
    return kind in os.environ.get(env, "").split(",")


@sandbox_gateway("fault-after-the-call")
class FaultAfterTheCallGateway(SimulatorGateway):
    """The sandbox (deciding at once). The first request of a kind named in FAULT_KILL_AFTER
    (FAULT_CUT_AFTER) for each reference is taken by the provider (it decides: a disbursement
    is paid), then the worker that made it is SIGKILLed (its database connection terminated,
    pg_terminate_backend) before it hears the answer. Every request is recorded
    ("kind:reference") in the list `requests_key(run)`."""

    def _submit(self, *, kind: str, reference: str, **kwargs):
        receipt = super()._submit(kind=kind, reference=reference, **kwargs)
        run = os.environ[RUN_ENV]
        client = shared_cache.redis_client()
        client.rpush(requests_key(run), f"{kind}:{reference}")
        first = client.set(shared_cache.cache_key(f"faults:{run}:{kind}:{reference}"), 1, nx=True)
        if first and _named(KILL_ENV, kind):
            os.kill(os.getpid(), signal.SIGKILL)
        if first and _named(CUT_ENV, kind):
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return receipt

"""Settings of a fault test's worker: the project's, with a faulty provider gateway."""

from config.settings import *  # noqa: F403

PAYMENTS_PROVIDER_GATEWAY = "tests.faults.gateways.FaultAfterTheCallGateway"

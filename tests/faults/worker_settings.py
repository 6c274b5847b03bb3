"""Settings of a fault test's worker: the project's, with a faulty provider gateway."""

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.faults.apps.FaultGatewaysConfig"]  # noqa: F405
PAYMENTS_PROVIDER_GATEWAY = "fault-after-the-call"

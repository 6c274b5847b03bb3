from django.apps import AppConfig


class FaultGatewaysConfig(AppConfig):
    """Registers the fault tests' sandbox gateways in their workers (`worker_settings`)."""

    name = "tests.faults"
    label = "fault_gateways"

    def ready(self) -> None:
        from tests.faults import gateways  # noqa: F401 - registers on import

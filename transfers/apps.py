from django.apps import AppConfig


class TransfersConfig(AppConfig):
    name = "transfers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What transfers adds to payments' reconciliation, statements and admin: payments
        # never imports transfers.
        from transfers import admin_discrepancies, reconciliation
        from transfers.services import submission  # noqa: F401 (registers its answer appliers)

        reconciliation.register()
        admin_discrepancies.register()

from django.apps import AppConfig


class TransfersConfig(AppConfig):
    name = "transfers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What transfers adds to payments' reconciliation, statements and admin: payments
        # never imports transfers.
        from transfers import admin_discrepancies, reconciliation

        reconciliation.register()
        admin_discrepancies.register()

from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    name = "payments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The modules whose functions apply the provider's answers register them on import.
        from payments.services import payins, payouts, refunds  # noqa: F401

from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    name = "payments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The modules whose functions apply the provider's answers register them on import.
        # The legs a provider callback names, and the unfinished legs that keep a connection.
        from payments import provider
        from payments.provider import simulator  # noqa: F401 - the sandbox's gateway
        from payments.services import payins, payouts, refunds, transitions  # noqa: F401
        from payments.services.sweeps import unfinished_legs_on
        from rails import services as rails_services

        for name, kind, callback in (
            ("payin", provider.COLLECTION, transitions.PAYIN_CALLBACK),
            ("payout", provider.DISBURSEMENT, transitions.PAYOUT_CALLBACK),
            ("refund", provider.DISBURSEMENT, transitions.REFUND_CALLBACK),
        ):
            provider.callback_leg_register(name, kind=kind, callback=callback)
        rails_services.unfinished_legs_counter_register(unfinished_legs_on)

from django.apps import AppConfig


class TransfersConfig(AppConfig):
    name = "transfers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What transfers adds to payments' reconciliation, statements and admin: payments
        # never imports transfers.
        from transfers import admin_discrepancies, reconciliation
        from transfers.services import submission

        reconciliation.register()
        admin_discrepancies.register()

        from payments import provider
        from rails import services as rails_services
        from transfers.services import sweeps

        provider.callback_leg_register(
            "transfer-collection", kind=provider.COLLECTION, callback=submission.COLLECTION_CALLBACK
        )
        provider.callback_leg_register(
            "transfer-disbursement",
            kind=provider.DISBURSEMENT,
            callback=submission.DISBURSEMENT_CALLBACK,
        )
        rails_services.unfinished_legs_counter_register(sweeps.unfinished_legs_on)

from django.apps import AppConfig


class KycConfig(AppConfig):
    name = "kyc"
    verbose_name = "KYC"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class KycConfig(AppConfig):
    name = "kyc"
    default_auto_field = "django.db.models.BigAutoField"

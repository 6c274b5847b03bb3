from django.apps import AppConfig


class TransfersConfig(AppConfig):
    name = "transfers"
    default_auto_field = "django.db.models.BigAutoField"

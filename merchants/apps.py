from django.apps import AppConfig


class MerchantsConfig(AppConfig):
    name = "merchants"
    default_auto_field = "django.db.models.BigAutoField"

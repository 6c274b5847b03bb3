from django.apps import AppConfig


class RailsConfig(AppConfig):
    """Provider connections (how an operator API is reached), the operators' routes to them, and
    the wire clients of the real operator APIs (MTN MoMo first). Below payments: it knows no leg."""

    name = "rails"
    default_auto_field = "django.db.models.BigAutoField"

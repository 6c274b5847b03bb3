from django.apps import AppConfig


class MerchantsConfig(AppConfig):
    name = "merchants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from merchants.models import ApiKey, Merchant

        post_save.connect(_api_key_changed, sender=ApiKey)
        post_delete.connect(_api_key_changed, sender=ApiKey)
        post_save.connect(_merchant_changed, sender=Merchant)


def _api_key_changed(sender, instance, **_) -> None:
    """A saved or deleted key is read again from the database by the next request."""
    from merchants.services import api_key_cache_drop

    api_key_cache_drop(keys=[instance.key])


def _merchant_changed(sender, instance, created: bool = False, **_) -> None:
    """So are a saved merchant's keys (its status and rate limit come with them)."""
    from merchants.models import ApiKey
    from merchants.services import api_key_cache_drop

    if not created:
        api_key_cache_drop(
            keys=ApiKey.objects.filter(merchant=instance).values_list("key", flat=True)
        )

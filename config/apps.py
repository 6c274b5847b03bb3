from django.contrib.admin.apps import AdminConfig


class CowryAdminConfig(AdminConfig):
    default_site = "config.admin_site.CowryAdminSite"

    def ready(self) -> None:
        super().ready()  # autodiscovers every app's admin.py
        from django.contrib import admin
        from django_otp.plugins.otp_static.models import StaticDevice
        from django_otp.plugins.otp_totp.models import TOTPDevice

        # django-otp's own device pages hold TOTP keys of every user; a lost phone is
        # `reset_two_factor`, and a user sets up their own device on the two-factor page.
        for model in (TOTPDevice, StaticDevice):
            if admin.site.is_registered(model):
                admin.site.unregister(model)

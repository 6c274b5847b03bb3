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
        # Ops' logins and groups in the theme's forms, as every other page.
        from django.contrib.auth import admin as auth_admin
        from django.contrib.auth.models import Group, User
        from unfold import admin as unfold_admin
        from unfold import forms as unfold_forms

        class UserAdmin(auth_admin.UserAdmin, unfold_admin.ModelAdmin):
            form = unfold_forms.UserChangeForm
            add_form = unfold_forms.UserCreationForm
            change_password_form = unfold_forms.AdminPasswordChangeForm
            filter_horizontal = ()  # Django's two-box picker is wider than the page at 1400 px

        class GroupAdmin(auth_admin.GroupAdmin, unfold_admin.ModelAdmin):
            filter_horizontal = ()

        for model, model_admin in ((User, UserAdmin), (Group, GroupAdmin)):
            if admin.site.is_registered(model):
                admin.site.unregister(model)
            admin.site.register(model, model_admin)

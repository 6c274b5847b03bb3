from django.contrib.admin.apps import AdminConfig


class CowryAdminConfig(AdminConfig):
    default_site = "config.admin_site.CowryAdminSite"

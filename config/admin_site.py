from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.utils import timezone

from merchants import logins


class CowryAdminSite(admin.AdminSite):
    site_header = "Cowry dashboard"
    site_title = "Cowry"
    index_title = "Payments, customers and credentials"
    login_form = logins.DashboardLoginForm

    def login(self, request, extra_context=None):
        """A session lasts DASHBOARD_SESSION_SECONDS from its login, however busy it is: the
        expiry is a fixed time, not the idle age Django renews at each write of the session."""
        response = super().login(request, extra_context)
        logged_in = response.status_code == 302 and request.user.is_authenticated
        if request.method == "POST" and logged_in:
            lifetime = timedelta(seconds=settings.DASHBOARD_SESSION_SECONDS)
            request.session.set_expiry(timezone.now() + lifetime)
        return response

    def index(self, request, extra_context=None):
        """Merchant staff land on their merchant's day: balances, today's payments by status,
        failing webhook deliveries."""
        from config import dashboard_home
        from merchants import dashboard

        merchant = dashboard.merchant_of(request.user)
        if merchant is not None:
            extra_context = {
                **(extra_context or {}),
                "merchant_summary": dashboard_home.dashboard_summary(merchant=merchant),
            }
        return super().index(request, extra_context)

from django.contrib import admin

from merchants import logins


class CowryAdminSite(admin.AdminSite):
    site_header = "Cowry dashboard"
    site_title = "Cowry"
    index_title = "Payments, customers and credentials"
    login_form = logins.DashboardLoginForm

    def index(self, request, extra_context=None):
        """Merchant staff land on their merchant's day: balances, today's payments by status,
        failing webhook deliveries."""
        from merchants import dashboard
        from merchants import selectors as merchant_selectors

        merchant = dashboard.merchant_of(request.user)
        if merchant is not None:
            extra_context = {
                **(extra_context or {}),
                "merchant_summary": merchant_selectors.dashboard_summary(merchant=merchant),
            }
        return super().index(request, extra_context)

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from unfold.sites import UnfoldAdminSite

from merchants import logins


class CowryAdminSite(UnfoldAdminSite):
    site_header = "Cowry dashboard"
    site_title = "Cowry"
    index_title = "Payments, customers and credentials"
    login_form = logins.DashboardLoginForm
    site_url = None  # no public site (UNFOLD["SITE_URL"] too)

    def get_urls(self):
        from django.urls import path

        from merchants import two_factor_views

        own = [
            path(
                "two-factor/setup/",
                self.admin_view(lambda request: two_factor_views.setup(request, site=self)),
                name="two_factor_setup",
            ),
            path(
                "two-factor/verify/",
                self.admin_view(lambda request: two_factor_views.verify(request, site=self)),
                name="two_factor_verify",
            ),
        ]
        return own + super().get_urls()

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
        """Merchant staff land on their merchant's day; support and ops on their worklist, ops
        also on the platform's totals and the ledger check."""
        from config import home_charts, worklist
        from merchants import dashboard
        from payments import selectors as payment_selectors
        from rails import selectors as rails_selectors

        now = timezone.now()
        context = dict(extra_context or {})
        merchant = dashboard.merchant_of(request.user)
        if merchant is not None:
            context["title"] = f"{merchant.name}: merchant dashboard"
            context["merchant_summary"] = worklist.merchant_summary(
                merchant_id=merchant.pk, now=now
            )
            context["merchant_charts"] = home_charts.merchant_charts(
                merchant_id=merchant.pk, now=now
            )
        elif request.user.is_superuser or dashboard.is_support(request.user):
            context["title"] = "Support dashboard: what needs attention"
            context["worklist"] = worklist.support_worklist(now=now)
        if request.user.is_superuser:
            context["title"] = "Ops dashboard: the platform and what needs attention"
            context["platform_totals"] = worklist.platform_totals()
            context["ledger_check"] = payment_selectors.ledger_check_last()
            context["ops_charts"] = home_charts.ops_charts(now=now)
            context["provider_connections"] = rails_selectors.connections_overview(
                now=now.timestamp()
            )
        return super().index(request, context)

"""The dashboard's sidebar: each role sees the pages it uses (UNFOLD["SIDEBAR"]).

Merchant staff: their payments, customers, balances and statements, keys and webhooks, team.
Support and ops: every merchant's operations; ops also the ledger, the catalog and prices
(FX rates, fee schedules). A link is shown only when its page opens for the user."""

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from merchants import dashboard

# (group, [(title, icon, "app_label.model" or "app_label.model:url name")])
MERCHANT_PAGES = [
    (
        "Payments",
        [
            ("Payins", "call_received", "payments.payin"),
            ("Payouts", "call_made", "payments.payout"),
            ("Transfers", "swap_horiz", "transfers.transfer"),
            ("Refunds", "undo", "payments.refund"),
        ],
    ),
    (
        "Customers",
        [
            ("Customers", "group", "customers.customer"),
            ("KYC checks", "badge", "kyc.kycsubmission"),
        ],
    ),
    (
        "Money",
        [
            ("Balances", "account_balance_wallet", "payments.wallet"),
            ("Statements", "receipt_long", "payments.wallet:admin:payments_wallet_statement"),
        ],
    ),
    (
        "Developers",
        [
            ("API keys", "key", "merchants.apikey"),
            ("Webhook endpoints", "webhook", "webhooks.webhookendpoint"),
            ("Events", "notifications", "webhooks.event"),
            ("Webhook deliveries", "send", "webhooks.delivery"),
        ],
    ),
    (
        "Account",
        [
            ("Team", "group_add", "merchants.merchantmembership"),
            ("Audit log", "history", "merchants.auditlogentry"),
            ("Operators you can use", "cell_tower", "quotes.merchantoperator"),
            ("Corridors you can use", "route", "quotes.merchantcorridor"),
        ],
    ),
]

STAFF_PAGES = [
    (
        "Payments",
        [
            ("Payins", "call_received", "payments.payin"),
            ("Payouts", "call_made", "payments.payout"),
            ("Transfers", "swap_horiz", "transfers.transfer"),
            ("Refunds", "undo", "payments.refund"),
            ("Provider discrepancies", "report", "payments.providerdiscrepancy"),
        ],
    ),
    (
        "Merchants",
        [
            ("Merchants", "storefront", "merchants.merchant"),
            ("Customers", "group", "customers.customer"),
            ("KYC submissions", "badge", "kyc.kycsubmission"),
            ("KYC documents", "description", "kyc.kycdocument"),
            ("API keys", "key", "merchants.apikey"),
            ("Teams", "group_add", "merchants.merchantmembership"),
            ("Audit log", "history", "merchants.auditlogentry"),
        ],
    ),
    (
        "Webhooks",
        [
            ("Webhook endpoints", "webhook", "webhooks.webhookendpoint"),
            ("Events", "notifications", "webhooks.event"),
            ("Deliveries", "send", "webhooks.delivery"),
        ],
    ),
    (
        "Ledger",
        [
            ("Wallets", "account_balance_wallet", "payments.wallet"),
            ("Statements", "receipt_long", "payments.wallet:admin:payments_wallet_statement"),
            ("Journals", "book", "payments.journal"),
            ("Journal lines", "list", "payments.journalline"),
            ("Ledger accounts", "account_tree", "payments.ledgeraccount"),
        ],
    ),
    (
        "Catalog and prices",
        [
            ("Operators", "cell_tower", "quotes.operator"),
            ("Corridors", "route", "quotes.corridor"),
            ("Enabled operators", "toggle_on", "quotes.merchantoperator"),
            ("Enabled corridors", "alt_route", "quotes.merchantcorridor"),
            ("FX rates", "currency_exchange", "quotes.fxrate"),
            ("Fee schedules", "sell", "quotes.feeschedule"),
            ("Quotes", "request_quote", "quotes.quote"),
        ],
    ),
    (
        "Logins",
        [
            ("Users", "person", "auth.user"),
            ("Groups", "groups", "auth.group"),
        ],
    ),
]


def _link(request: HttpRequest, page: str) -> str | None:
    """The page's URL when its model's admin lets the user view it, else None."""
    model_label, _, url_name = page.partition(":")
    model_admin = next(
        (
            ma
            for model, ma in admin.site._registry.items()
            if model._meta.label_lower == model_label
        ),
        None,
    )
    if model_admin is None or not model_admin.has_view_permission(request):
        return None
    app_label, model_name = model_label.split(".")
    return reverse(url_name or f"admin:{app_label}_{model_name}_changelist")


def navigation(request: HttpRequest) -> list[dict]:
    """The sidebar's groups for this user: UNFOLD["SIDEBAR"]["navigation"]."""
    user = request.user
    staff_wide = dashboard.is_ops(user) or dashboard.is_support(user)
    pages = STAFF_PAGES if staff_wide else MERCHANT_PAGES
    groups = [{"items": [{"title": "Home", "icon": "home", "link": reverse("admin:index")}]}]
    for title, entries in pages:
        items = [
            {"title": name, "icon": icon, "link": link}
            for name, icon, page in entries
            if (link := _link(request, page)) is not None
        ]
        if items:
            groups.append({"title": title, "separator": True, "items": items})
    return groups

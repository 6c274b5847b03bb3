from django.urls import path

from payments import views
from payments.provider.callbacks import provider_callback

urlpatterns = [
    path("payins", views.PayinCreateView.as_view(), name="payin-create"),
    path("payins/<id:payin_id>", views.PayinDetailView.as_view(), name="payin-detail"),
    path("payins/<id:payin_id>/refunds", views.RefundCreateView.as_view(), name="refund-create"),
    path("refunds", views.RefundListView.as_view(), name="refund-list"),
    path("refunds/<id:refund_id>", views.RefundDetailView.as_view(), name="refund-detail"),
    path("payouts", views.PayoutCreateView.as_view(), name="payout-create"),
    path("balances", views.BalanceListView.as_view(), name="balance-list"),
    path("statements", views.StatementView.as_view(), name="statement"),
    path("payouts/<id:payout_id>", views.PayoutDetailView.as_view(), name="payout-detail"),
    path(
        "provider-callbacks/<slug:connection>/<slug:leg>/<str:reference>",
        provider_callback,
        name="provider-callback",
    ),
]

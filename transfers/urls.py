from django.urls import path

from transfers import views

urlpatterns = [
    path("transfers", views.TransferCreateView.as_view(), name="transfer-create"),
    path("transfers/<id:transfer_id>", views.TransferDetailView.as_view(), name="transfer-detail"),
    path(
        "transfers/<id:transfer_id>/relaunch-payout",
        views.TransferRelaunchPayoutView.as_view(),
        name="transfer-relaunch-payout",
    ),
]

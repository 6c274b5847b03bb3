from django.urls import path

from quotes import views

urlpatterns = [
    path("operators", views.OperatorListView.as_view(), name="operator-list"),
    path("operators/predict", views.OperatorPredictView.as_view(), name="operator-predict"),
    path("corridors", views.CorridorListView.as_view(), name="corridor-list"),
    path("quotes", views.QuoteListView.as_view(), name="quote-list"),
    path("quotes/payin", views.QuotePayinCreateView.as_view(), name="quote-payin-create"),
    path("quotes/payout", views.QuotePayoutCreateView.as_view(), name="quote-payout-create"),
    path("quotes/transfer", views.QuoteTransferCreateView.as_view(), name="quote-transfer-create"),
    path("quotes/<id:quote_id>", views.QuoteDetailView.as_view(), name="quote-detail"),
]

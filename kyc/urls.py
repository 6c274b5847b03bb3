from django.urls import path

from kyc import views

urlpatterns = [
    path("customers/<id:customer_id>/kyc", views.CustomerKycView.as_view(), name="customer-kyc"),
]

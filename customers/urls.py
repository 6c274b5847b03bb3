from django.urls import path

from customers import views

urlpatterns = [
    path("customers", views.CustomerCreateView.as_view(), name="customer-create"),
    path("customers/<id:customer_id>", views.CustomerDetailView.as_view(), name="customer-detail"),
]

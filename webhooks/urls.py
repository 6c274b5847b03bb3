from django.urls import path

from webhooks import views

urlpatterns = [
    path("events", views.EventListView.as_view(), name="event-list"),
    path("events/resend-failed", views.EventResendFailedView.as_view(), name="event-resend-failed"),
    path("events/<id:event_id>", views.EventDetailView.as_view(), name="event-detail"),
    path("events/<id:event_id>/resend", views.EventResendView.as_view(), name="event-resend"),
]

import pytest
from django.test import Client

from merchants import services


@pytest.fixture
def staff_client(db):
    """staff_client(merchant=..., role=...) or staff_client(support=True): a logged-in browser."""

    def make(*, merchant=None, role=None, support=False, username=None):
        username = username or f"user-{role or 'support'}-{merchant.pk if merchant else 'x'}"
        services.staff_user_create(
            username=username,
            password="pw-123456-staff",
            merchant=merchant,
            role=role,
            support=support,
        )
        client = Client()
        assert client.login(username=username, password="pw-123456-staff")
        return client

    return make

import re
import uuid
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from merchants import services
from payments.ledger.discrepancies import provider_discrepancy_record
from payments.models import ProviderDiscrepancy
from tests.browsers import headless_chromium
from tests.payments.conftest import create_customer, create_quote, payin_body


def late_completion(
    merchant, reference: str = "ref-1", *, resource_type: str = "payout"
) -> ProviderDiscrepancy:
    """A payment failed on our side (a payout unless told) that the provider says it
    completed."""
    return provider_discrepancy_record(
        merchant=merchant,
        resource_type=resource_type,
        resource_id=uuid.uuid4(),
        reference=reference,
        provider_reference="SIM-late",
        outcome="completed",
        reason="",
        our_status="failed",
        at=timezone.now(),
    )


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


@pytest.fixture(autouse=True)
def _no_login_failures_left():
    """No dashboard login counted as failed by another test (they share one Redis)."""
    from core import shared_cache

    client = shared_cache.redis_client()
    if client is not None:
        stale = list(client.scan_iter(match=shared_cache.cache_key("login-failures:*")))
        if stale:
            client.delete(*stale)


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def browser():
    with headless_chromium() as driver:
        yield driver


def shown_choices(spec, cl) -> list[str]:
    """A filter's choices as shown: links, or a dropdown's options."""
    shown = []
    for choice in spec.choices(cl):
        if "form" in choice:
            for field in choice["form"].fields.values():
                shown += [str(label) for _, label in getattr(field, "choices", ())]
        elif "display" in choice:
            shown.append(str(choice["display"]))
    return shown


@pytest.fixture
def completed_payin(enabled_api, django_capture_on_commit_callbacks) -> dict:
    customer = create_customer(enabled_api)
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post(
            "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
        ).json()
    return enabled_api.get(f"/payins/{payin['id']}").json()


def page_token(page) -> str:
    """The one-time token of a confirmation page (a refund, an action on a record's page)."""
    return re.search(r'name="token" value="([^"]+)"', page.content.decode()).group(1)

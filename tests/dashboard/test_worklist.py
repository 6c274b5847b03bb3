"""Support's worklist: each card's count opens the list of exactly the rows it counts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from config import worklist
from payments.models import Payin
from tests.payments.conftest import create_customer, create_quote, payin_body

pytestmark = pytest.mark.django_db


def test_every_worklist_link_opens_its_filtered_list(staff_client):
    support = staff_client(support=True)
    for item in worklist.support_worklist(now=timezone.now()):
        response = support.get(item.url)
        # Django's admin answers an unknown filter with a redirect to "?e=1", its error page.
        assert response.status_code == 200, (item.label, item.url, response.get("Location"))


def test_the_past_timeout_card_lists_the_payin_still_waiting_past_its_timeout(
    enabled_api, staff_client, django_capture_on_commit_callbacks
):
    customer = create_customer(enabled_api)
    silent = "+221770001999"  # the provider never answers
    waiting, on_time = (
        enabled_api.post("/payins", payin_body(create_quote(enabled_api), customer, silent)).json()
        for _ in range(2)
    )
    Payin.objects.filter(pk=waiting["id"]).update(
        provider_timeout_at=timezone.now() - timedelta(minutes=1)
    )
    item = next(
        item
        for item in worklist.support_worklist(now=timezone.now())
        if item.label == "Payins past their provider timeout"
    )
    assert item.count == 1

    page = staff_client(support=True).get(item.url).content.decode()

    assert waiting["id"][:8] in page
    assert on_time["id"][:8] not in page

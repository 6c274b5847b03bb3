"""Legs MTN has not answered are polled by beat: overdue first, then at growing intervals whose
due times are in the database, until the provider timeout."""

from datetime import timedelta

import pytest
from django.utils import timezone

from payments.models import Payin
from payments.services.sweeps import payments_ask_provider
from rails import selectors, services
from tests.payments.conftest import create_customer, payin_body
from tests.rails.conftest import CM_PHONE, CONNECTION, cm_quote, connection_add, tokens_forget
from tests.support import MerchantClient

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_unanswered_leg_is_polled_at_growing_intervals_until_mtn_decides(
    enabled_merchant, fake_mtn, settings
):
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    settings.PROVIDER_POLL_AFTER_SECONDS = 60
    connection_add(fake_mtn, callback_base="https://cowry.example")
    services.operator_route_set(operator_code="CM_MTN_MOMO", name=CONNECTION, at=timezone.now())
    selectors.memo_forget()
    fake_mtn.switches.pending = True  # the payer has not approved yet
    api = MerchantClient(enabled_merchant)
    customer = create_customer(api, phone=CM_PHONE)
    payin_id = api.post("/payins", payin_body(cm_quote(api), customer, CM_PHONE)).json()["id"]
    submitted = Payin.objects.get(pk=payin_id).submitted_at

    def reads() -> int:
        return sum(1 for _, reference in fake_mtn.status_reads if reference == payin_id)

    assert payments_ask_provider(now=submitted + timedelta(seconds=20)) == 0
    assert reads() == 0  # not overdue yet
    first = submitted + timedelta(seconds=31)
    assert payments_ask_provider(now=first) == 0
    assert reads() == 1
    due = Payin.objects.get(pk=payin_id).provider_poll_at
    assert due == first + timedelta(seconds=60)
    assert payments_ask_provider(now=due - timedelta(seconds=1)) == 0
    assert reads() == 1  # not due
    assert payments_ask_provider(now=due) == 0
    assert reads() == 2
    # the interval grows: as long as the leg has waited (151 s), more than 60 s
    assert Payin.objects.get(pk=payin_id).provider_poll_at == due + (due - submitted)
    fake_mtn.switches.pending = False  # the payer approves
    later = Payin.objects.get(pk=payin_id).provider_poll_at
    assert payments_ask_provider(now=later) == 1
    assert Payin.objects.get(pk=payin_id).status == "completed"
    tokens_forget()

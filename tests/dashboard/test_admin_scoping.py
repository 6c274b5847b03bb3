"""Generated over every registered admin, so a new admin cannot forget the merchant scoping:
merchant staff of B cannot list, open, search or filter to anything of merchant A; support
staff read everything but never a secret."""

from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from merchants import services as merchant_services
from merchants.dashboard import MerchantScopedAdmin
from merchants.models import Merchant
from payments.ledger.adjustments import wallet_credit
from tests.catalog import enable_everything
from tests.support import MerchantClient
from tests.webhooks.conftest import signing_secret
from webhooks.services.endpoints import endpoint_set

pytestmark = pytest.mark.django_db

# Global configuration with no merchant: readable by staff, writable by ops only, or
# Django's own models, guarded by Django's model permissions (merchant staff have none).
NOT_MERCHANT_OWNED = {"auth.User", "auth.Group", "quotes.Operator", "quotes.Corridor"}


def _registered():
    return sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def _rows_of(model_admin, model, merchant: Merchant):
    path = model_admin.merchant_path
    lookup = {"pk": merchant.pk} if path == "pk" else {path: merchant}
    return model._default_manager.filter(**lookup)


def _result_pks(response) -> set:
    """The primary keys the changelist actually shows (an invalid filter redirects: none)."""
    if response.status_code != 200 or not response.context or "cl" not in response.context:
        return set()
    return {obj.pk for obj in response.context["cl"].result_list}


def _build_merchant_world(merchant: Merchant, settings) -> dict:
    """Everything a merchant can own, made through the real API and services."""
    # Port 9 refuses at once: KYC fetches and webhook deliveries fail fast, offline.
    settings.ALLOW_PRIVATE_NETWORK_URLS = True
    enable_everything(merchant)
    api = MerchantClient(merchant)
    customer = api.post(
        "/customers",
        {
            "first_name": "Awa",
            "last_name": "Diallo",
            "external_ref": f"ref-{merchant.pk}",
            "address_line1": "1 Rue A",
            "city": "Dakar",
            "occupation": "trader",
            "source_of_funds": "salary",
        },
    ).json()
    api.client.post(
        f"/customers/{customer['id']}/kyc",
        {
            "documents": [
                {"document_type": "passport", "front_file_url": "http://127.0.0.1:9/id.png"}
            ]
        },
        format="json",
    )
    endpoint_set(merchant=merchant, url="https://127.0.0.1:9/hook", now=timezone.now())
    quote = api.post(
        "/quotes/payin",
        {
            "customer_id": customer["id"],
            "country_code": "SN",
            "operator_code": "SN_ORANGE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "10000",
            "send_currency": "XOF",
        },
    ).json()
    payin = api.post(
        "/payins",
        {
            "quote_id": quote["id"],
            "customer_id": customer["id"],
            "source": {"phone": "+221770000123"},
        },
    )
    assert payin.status_code == 201, payin.json()
    wallet_credit(
        merchant=merchant,
        currency="XOF",
        amount=Decimal("100000"),
        reason="float",
        at=timezone.now(),
    )
    payout_quote = api.post(
        "/quotes/payout",
        {
            "customer_id": customer["id"],
            "country_code": "SN",
            "operator_code": "SN_WAVE_MOMO",
            "rail_type": "mobile_money",
            "send_amount": "5000",
            "send_currency": "XOF",
        },
    ).json()
    payout = api.post(
        "/payouts",
        {
            "quote_id": payout_quote["id"],
            "customer_id": customer["id"],
            "recipient": {
                "recipient_type": "individual",
                "first_name": "Moussa",
                "last_name": "Ndiaye",
                "phone": "+221770000456",
            },
        },
    )
    assert payout.status_code == 201, payout.json()
    transfer_quote = api.post(
        "/quotes/transfer",
        {
            "customer_id": customer["id"],
            "corridor_code": "SN-SN-XOF-XOF",
            "payer_operator_code": "SN_ORANGE_MOMO",
            "recipient_operator_code": "SN_WAVE_MOMO",
            "payin_amount": "8000",
            "payin_currency": "XOF",
            "payout_currency": "XOF",
        },
    ).json()
    transfer = api.post(
        "/transfers",
        {
            "quote_id": transfer_quote["id"],
            "customer_id": customer["id"],
            "payer": {"phone": "+221770000789"},
            "recipient": {
                "recipient_type": "individual",
                "first_name": "Fatou",
                "last_name": "Sow",
                "phone": "+221770000321",
            },
        },
    )
    assert transfer.status_code == 201, transfer.json()
    merchant_services.api_key_create_by(merchant=merchant, actor=None, label="scoping")
    return {"api": api}


@pytest.fixture
def two_worlds(settings, django_capture_on_commit_callbacks):
    from tests.factories import MerchantFactory

    merchant_a, merchant_b = MerchantFactory(name="Alpha"), MerchantFactory(name="Bravo")
    with django_capture_on_commit_callbacks(execute=True):
        world_a = _build_merchant_world(merchant_a, settings)
    with django_capture_on_commit_callbacks(execute=True):
        _build_merchant_world(merchant_b, settings)
    return merchant_a, merchant_b, world_a


def test_every_registered_admin_of_merchant_data_is_scoped():
    unscoped = [
        model._meta.label
        for model, model_admin in _registered()
        if not isinstance(model_admin, MerchantScopedAdmin)
        and model._meta.label not in NOT_MERCHANT_OWNED
    ]
    assert unscoped == []


def test_merchant_staff_never_reach_another_merchants_objects(two_worlds, staff_client):
    merchant_a, merchant_b, _ = two_worlds
    intruder = staff_client(merchant=merchant_b, role="owner")
    checked_models = []

    for model, model_admin in _registered():
        if not isinstance(model_admin, MerchantScopedAdmin):
            continue
        label = f"{model._meta.app_label}_{model._meta.model_name}"
        rows = list(_rows_of(model_admin, model, merchant_a)[:3])
        if not rows:
            continue
        checked_models.append(model._meta.label)
        changelist = reverse(f"admin:{label}_changelist")
        listing = intruder.get(changelist)
        if listing.status_code == 200:
            for row in rows:
                assert row.pk not in _result_pks(listing), (
                    f"{model._meta.label} lists {row.pk} of A"
                )
                if len(str(row.pk)) == 36:  # a UUID is specific enough to look for in the page
                    assert str(row.pk) not in listing.content.decode()
            searched = intruder.get(changelist, {"q": str(rows[0].pk)})
            assert rows[0].pk not in _result_pks(searched)
            filtered = intruder.get(
                changelist, {model_admin.merchant_path + "__id__exact": merchant_a.pk}
            )
            assert rows[0].pk not in _result_pks(filtered)
        else:
            assert listing.status_code == 403, f"{model._meta.label}: {listing.status_code}"
        for row in rows:
            detail = intruder.get(reverse(f"admin:{label}_change", args=[quote(row.pk)]))
            assert detail.status_code in (403, 404), (
                f"{model._meta.label} {row.pk}: {detail.status_code}"
            )
            assert detail.status_code == 404 or listing.status_code == 403

    expected = {
        "merchants.Merchant",
        "merchants.ApiKey",
        "customers.Customer",
        "kyc.KycDocument",
        "quotes.Quote",
        "payments.Payin",
        "payments.Payout",
        "payments.Wallet",
        "payments.Journal",
        "transfers.Transfer",
        "webhooks.WebhookEndpoint",
        "webhooks.Event",
    }
    assert expected <= set(checked_models)


def test_merchant_staff_cannot_open_django_user_admin(merchant, staff_client):
    browser = staff_client(merchant=merchant, role="owner")
    assert browser.get("/admin/auth/user/").status_code == 403


def test_support_reads_every_merchant_but_never_a_secret(two_worlds, staff_client):
    merchant_a, _, _ = two_worlds
    support = staff_client(support=True)
    endpoints = merchant_a.webhook_endpoint.__class__.objects.all()
    secrets = [signing_secret(endpoint) for endpoint in endpoints]
    secrets += [endpoint.signing_secret for endpoint in endpoints]  # as stored, encrypted
    secrets += list(merchant_a.api_keys.values_list("secret_hash", flat=True))

    for model, model_admin in _registered():
        if not isinstance(model_admin, MerchantScopedAdmin):
            continue
        label = f"{model._meta.app_label}_{model._meta.model_name}"
        listing = support.get(reverse(f"admin:{label}_changelist"))
        pages = [listing.content.decode()] if listing.status_code == 200 else []
        for row in _rows_of(model_admin, model, merchant_a)[:2]:
            detail = support.get(reverse(f"admin:{label}_change", args=[quote(row.pk)]))
            if detail.status_code == 200:
                pages.append(detail.content.decode())
        for page in pages:
            for secret in secrets:
                assert secret not in page, f"{model._meta.label} shows a secret to support"

    endpoint = merchant_a.webhook_endpoint.__class__.objects.filter(merchant=merchant_a).first()
    reveal = support.post(reverse("admin:webhooks_webhookendpoint_reveal", args=[endpoint.pk]))
    assert reveal.status_code == 403


def test_owner_reveals_own_signing_secret_on_request_and_it_is_audited(two_worlds, staff_client):
    from merchants.models import AuditLogEntry
    from webhooks.models import WebhookEndpoint

    merchant_a, merchant_b, _ = two_worlds
    endpoint = WebhookEndpoint.objects.filter(merchant=merchant_a).first()
    owner = staff_client(merchant=merchant_a, role="owner")
    url = reverse("admin:webhooks_webhookendpoint_reveal", args=[endpoint.pk])

    assert signing_secret(endpoint) not in owner.get(url).content.decode()
    assert signing_secret(endpoint) in owner.post(url).content.decode()
    assert (
        AuditLogEntry.objects.filter(merchant=merchant_a, action="webhook.secret_revealed").count()
        == 1
    )
    assert staff_client(merchant=merchant_a, role="viewer").post(url).status_code == 403
    assert staff_client(merchant=merchant_b, role="owner").post(url).status_code == 404


@pytest.mark.parametrize(
    ("changelist", "term"),
    [
        ("/admin/payments/payin/", "+221770000123"),
        ("/admin/payments/payout/", "+221770000456"),
        ("/admin/transfers/transfer/", "+221770000321"),
        ("/admin/payments/payin/", "ref-"),
        ("/admin/customers/customer/", "ref-"),
    ],
)
def test_support_finds_payments_by_phone_and_external_ref(
    two_worlds, staff_client, changelist, term
):
    support = staff_client(support=True)
    response = support.get(changelist, {"q": term})
    assert response.status_code == 200
    assert len(_result_pks(response)) >= 1


def test_support_filters_payments_by_status_operator_and_date(two_worlds, staff_client):
    support = staff_client(support=True)
    today = timezone.now()
    response = support.get(
        "/admin/payments/payin/",
        {
            "status__exact": "completed",
            "operator_code__exact": "SN_ORANGE_MOMO",
            "created_at__year": today.year,
            "created_at__month": today.month,
        },
    )
    assert response.status_code == 200
    assert len(_result_pks(response)) == 2


OPS_ONLY = ["payments.journal", "payments.journalline", "payments.ledgeraccount"]
OPS_ONLY += ["quotes.fxrate", "quotes.feeschedule"]


@pytest.mark.parametrize("who", ["owner", "viewer", "support", "ops"])
def test_ledger_internals_fx_rates_and_fee_schedules_open_for_ops_alone(
    merchant, other_merchant, staff_client, who
):
    """Ledger internals and prices are ops' pages: merchant staff (their own rows included) and
    support get 403 on each list and add page, 404 on a record, and no sidebar link; a merchant
    reads its fee and rate on each payment's page."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from payments.models import Journal, JournalLine, LedgerAccount
    from quotes.models import FeeSchedule, FxRate

    wallet_credit(
        merchant=merchant, currency="XOF", amount=Decimal("100"), reason="f", at=timezone.now()
    )
    LedgerAccount.objects.create(
        merchant=other_merchant, currency="XAF", code="provider_clearing:CM_MTN_MOMO"
    )
    rows = {
        "payments.journal": Journal.objects.filter(merchant=merchant).first(),
        "payments.journalline": JournalLine.objects.filter(journal__merchant=merchant).first(),
        "payments.ledgeraccount": LedgerAccount.objects.filter(merchant=merchant).first(),
        "quotes.fxrate": FxRate.objects.create(
            merchant=merchant, source_currency="XOF", target_currency="XAF", rate=Decimal("1")
        ),
        "quotes.feeschedule": FeeSchedule.objects.create(
            merchant=merchant, flow_type="payin", percentage=Decimal("1.5")
        ),
    }
    if who == "ops":
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("olu", password="pw-1234567"))
    elif who == "support":
        client = staff_client(support=True)
    else:
        client = staff_client(merchant=merchant, role=who)
    ops = who == "ops"

    for label in OPS_ONLY:
        app_label, model_name = label.split(".")
        pages = {reverse(f"admin:{app_label}_{model_name}_changelist"): 403}
        if label.startswith("quotes."):
            pages[reverse(f"admin:{app_label}_{model_name}_add")] = 403
        # A record of a page one may not open does not exist for them, as elsewhere.
        pages[reverse(f"admin:{app_label}_{model_name}_change", args=[quote(rows[label].pk)])] = 404
        for page, refused in pages.items():
            assert client.get(page).status_code == (200 if ops else refused), (who, page)
    home = client.get("/admin/").content.decode()
    for label in OPS_ONLY:
        link = reverse(f"admin:{label.replace('.', '_')}_changelist")
        assert (f'href="{link}"' in home) is ops, (who, link)
    if ops:  # every merchant's accounts
        listing = client.get("/admin/payments/ledgeraccount/").content.decode()
        assert "provider_clearing:CM_MTN_MOMO" in listing


def test_merchant_staff_reach_nothing_of_another_merchant_by_the_admins_side_doors(
    two_worlds, staff_client
):
    """Autocomplete, history and delete pages, `_changelist_filters`, and actions posted with
    another merchant's ids: nothing of A, and nothing of A changes."""
    from merchants.models import AuditLogEntry
    from webhooks.models import Delivery, Event, WebhookEndpoint

    merchant_a, merchant_b, _ = two_worlds
    intruder = staff_client(merchant=merchant_b, role="owner")

    for model in ("feeschedule", "fxrate"):
        found = intruder.get(
            "/admin/autocomplete/",
            {"app_label": "quotes", "model_name": model, "field_name": "merchant", "term": ""},
        ).json()
        assert [result["id"] for result in found["results"]] == [str(merchant_b.pk)]

    for model, model_admin in _registered():
        if not isinstance(model_admin, MerchantScopedAdmin):
            continue
        label = f"{model._meta.app_label}_{model._meta.model_name}"
        for row in _rows_of(model_admin, model, merchant_a)[:1]:
            for page in ("history", "delete"):
                url = reverse(f"admin:{label}_{page}", args=[quote(row.pk)])
                assert intruder.get(url).status_code in (403, 404), url

    payin = merchant_a.payins.first()
    filters = f"merchant__id__exact={merchant_a.pk}"
    listing = intruder.get("/admin/payments/payin/", {"_changelist_filters": filters})
    assert payin.pk not in _result_pks(listing)

    endpoint = WebhookEndpoint.objects.get(merchant=merchant_a)
    secret = signing_secret(endpoint)
    event = Event.objects.filter(merchant=merchant_a).first()
    deliveries = Delivery.objects.filter(event__merchant=merchant_a).count()
    audit = AuditLogEntry.objects.filter(merchant=merchant_a).count()
    for changelist, action, pk in [
        ("/admin/webhooks/webhookendpoint/", "rotate_signing_secret", endpoint.pk),
        ("/admin/webhooks/webhookendpoint/", "send_test_event", endpoint.pk),
        ("/admin/webhooks/event/", "resend_events", event.pk),
    ]:
        for extra in ({}, {"select_across": "1", "index": "0"}):
            response = intruder.post(
                changelist, {"action": action, "_selected_action": [str(pk)], **extra}, follow=True
            )
            assert secret not in response.content.decode()
    endpoint.refresh_from_db()
    assert signing_secret(endpoint) == secret
    assert Delivery.objects.filter(event__merchant=merchant_a).count() == deliveries
    assert AuditLogEntry.objects.filter(merchant=merchant_a).count() == audit


def test_every_inline_is_shown_to_whoever_may_open_its_page(two_worlds, staff_client):
    """Django shows an inline only to users holding the inline model's own permissions, which
    support and merchant staff never have: a payin's or payout's history, an event's deliveries
    and their attempts, a customer's KYC documents were on the page for ops only."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    merchant_a, _, _ = two_worlds
    ops = Client()  # a journal and its lines are ops' alone
    ops.force_login(get_user_model().objects.create_superuser("olu", password="pw-1234567"))
    readers = {
        "support": staff_client(support=True),
        "owner": staff_client(merchant=merchant_a, role="owner"),
        "ops": ops,
    }
    checked = set()

    for model, model_admin in _registered():
        if not isinstance(model_admin, MerchantScopedAdmin) or not model_admin.inlines:
            continue
        label = f"{model._meta.app_label}_{model._meta.model_name}"
        row = _rows_of(model_admin, model, merchant_a).first()
        if row is None:
            continue
        for who, browser in readers.items():
            page = browser.get(reverse(f"admin:{label}_change", args=[quote(row.pk)]))
            if page.status_code != 200:
                continue
            shown = [formset.opts.__class__ for formset in page.context["inline_admin_formsets"]]
            assert shown == list(model_admin.inlines), f"{model._meta.label} to {who}"
            checked.add(model._meta.label)

    assert {
        "customers.Customer",
        "payments.Payin",
        "payments.Payout",
        "payments.Journal",
        "transfers.Transfer",
        "webhooks.Event",
        "webhooks.Delivery",
    } <= checked

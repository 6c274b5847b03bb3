import pytest
from django.contrib.auth import get_user_model

from tests.payments.conftest import create_quote, fund, payin_body, payout_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def test_payment_and_ledger_admin_pages_render_read_only(
    admin_client, enabled_api, enabled_merchant, customer, django_capture_on_commit_callbacks
):
    fund(enabled_merchant, "50000")
    with django_capture_on_commit_callbacks(execute=True):
        payin = enabled_api.post(
            "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
        ).json()
        payout = enabled_api.post(
            "/payouts", payout_body(create_quote(enabled_api, "payout"), customer)
        ).json()
    pages = [
        "/admin/payments/payin/",
        f"/admin/payments/payin/{payin['id']}/change/",
        "/admin/payments/payout/",
        f"/admin/payments/payout/{payout['id']}/change/",
        "/admin/payments/wallet/",
        "/admin/payments/journal/",
        "/admin/payments/journalline/",
        "/admin/payments/ledgeraccount/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
    assert admin_client.get("/admin/payments/payin/add/").status_code == 403
    detail = admin_client.get(f"/admin/payments/payin/{payin['id']}/change/").content.decode()
    assert "provider_declined" not in detail
    assert "completed" in detail

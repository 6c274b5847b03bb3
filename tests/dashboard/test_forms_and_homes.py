"""Every dashboard form drawn with the theme's boxes, the invitation's least role, one count of
failing deliveries on every home, and each role's sidebar (links that open)."""

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from config import worklist
from merchants import services as merchant_services
from merchants import team
from tests.webhooks.conftest import record_event
from webhooks.models import Delivery
from webhooks.services.endpoints import endpoint_add

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456-staff"
BOXED = {"border", "bg-white"}  # the theme's input classes that draw a field's box


class Fields(HTMLParser):
    """The visible inputs, selects and textareas of a page, each as (tag, name, classes)."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str, set[str]]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag not in ("input", "select", "textarea"):
            return
        if attrs.get("type") in ("hidden", "submit") or attrs.get("name") == "s":
            return  # "s": the theme's own search box, drawn its way
        self.fields.append((tag, attrs.get("name", ""), set((attrs.get("class") or "").split())))


def unboxed(page: str) -> list[str]:
    """The names of the page's visible fields drawn without the theme's box."""
    parser = Fields()
    parser.feed(page)
    assert parser.fields, "no field on the page"
    return [name for tag, name, classes in parser.fields if not classes >= BOXED]


def logged_in(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


@pytest.fixture
def owner(merchant) -> Client:
    merchant_services.staff_user_create(
        username="ama", password=PASSWORD, merchant=merchant, role="owner"
    )
    return logged_in("ama")


def test_login_and_the_invited_teammates_password_page_have_boxed_fields(merchant):
    assert unboxed(Client().get("/admin/login/").content.decode()) == []
    owner = get_user_model().objects.create_user("ama", password=PASSWORD)
    invitation = team.teammate_invite(
        merchant=merchant, by=owner, username="kofi", email="", role="viewer"
    )
    client = Client()
    page = client.get(invitation.path, follow=True)  # the token moves into the session
    assert page.status_code == 200 and "Set my password" in page.content.decode()
    assert unboxed(page.content.decode()) == []
    # the theme's colours, or the button is white on white
    assert "--color-primary-600:" in page.content.decode()


def test_every_owner_form_and_confirmation_has_boxed_fields(merchant, owner):
    key = merchant_services.api_key_create(merchant=merchant, label="shop").api_key
    pages = [
        "/admin/merchants/merchantmembership/add/",
        "/admin/merchants/apikey/add/",
        f"/admin/merchants/apikey/{key.pk}/rotate/",
        "/admin/webhooks/webhookendpoint/add/",
        "/admin/payments/wallet/statement/",
        "/admin/two-factor/setup/",
    ]
    for path in pages:
        response = owner.get(path)
        assert response.status_code == 200, path
        assert unboxed(response.content.decode()) == [], path


def test_a_refused_field_shows_its_error_beside_it(merchant, owner):
    key = merchant_services.api_key_create(merchant=merchant, label="shop").api_key
    page = owner.post(f"/admin/merchants/apikey/{key.pk}/rotate/", {"grace_hours": "-1"})
    text = page.content.decode()
    assert page.status_code == 200
    field = text.index('name="grace_hours"')
    error = text.index("greater than or equal to 0")
    assert 0 < error - field < 2000  # in the field's own block, after its box


def test_revoke_is_the_one_confirmation_page_with_a_button(merchant, owner):
    key = merchant_services.api_key_create(merchant=merchant, label="shop").api_key
    page = owner.get(f"/admin/merchants/apikey/{key.pk}/revoke/").content.decode()
    assert 'class="action-page' in page and "every request with it gets 401" in page
    assert re.search(r'<button\s+type="submit"[^>]*\n?[^>]*bg-red-600', page)


def test_the_invitation_offers_the_least_role_first(owner):
    page = owner.get("/admin/merchants/merchantmembership/add/").content.decode()
    selected = re.search(r'<option value="(\w+)"\s+selected>', page)
    assert selected and selected.group(1) == "viewer"


def test_failing_deliveries_are_one_number_on_the_merchants_and_supports_homes(merchant, owner):
    endpoint_add(merchant=merchant, url="https://93.184.216.34/hook", now=timezone.now())
    events = [record_event(merchant, "payin.completed") for _ in range(4)]
    retried, failed, delivered, new = (Delivery.objects.get(event=e) for e in events)
    Delivery.objects.filter(pk=retried.pk).update(attempts=1)  # pending, retried after a failure
    Delivery.objects.filter(pk=failed.pk).update(status="failed", attempts=6)  # retries ran out
    Delivery.objects.filter(pk=delivered.pk).update(status="succeeded", attempts=2)
    merchant_services.staff_user_create(username="sam", password=PASSWORD, support=True)
    support = logged_in("sam")

    summary = worklist.merchant_summary(merchant_id=merchant.pk, now=timezone.now())
    card = next(
        item
        for item in worklist.support_worklist(now=timezone.now())
        if item.label == "Failing webhook deliveries"
    )
    assert summary["failing_deliveries"] == card.count == 2
    home = owner.get("/admin/").content.decode()
    assert re.search(r'id="failing-deliveries"[^>]*>2<', home)
    for client, url in ((owner, summary["deliveries_url"]), (support, card.url)):
        listed = client.get(url).content.decode()
        for shown in (retried, failed):
            assert str(shown.pk)[:8] in listed
        for hidden in (delivered, new):
            assert str(hidden.pk)[:8] not in listed


MERCHANT_LINKS = {"Payins", "Payouts", "Customers", "Balances", "Statements", "API keys"}
MERCHANT_LINKS |= {"Webhook endpoints", "Team"}
OPS_ONLY = {"Journal lines", "Ledger accounts", "FX rates", "Fee schedules"}


SIDEBAR_LINK = re.compile(
    r'<li>\s*<a href="([^"]+)"[^>]*>\s*<span class="material-symbols-outlined[^"]*">'
    r"\s*\w+\s*</span>\s*<span>([^<]+)</span>"
)


def sidebar(client: Client) -> dict[str, str]:
    """The sidebar's links: title to URL."""
    page = client.get("/admin/").content.decode()
    return {title.strip(): url for url, title in SIDEBAR_LINK.findall(page)}


def test_each_role_sees_its_pages_and_every_link_opens(merchant, owner):
    merchant_services.staff_user_create(username="sam", password=PASSWORD, support=True)
    get_user_model().objects.create_superuser("olu", "olu@example.com", PASSWORD)
    for client, wanted, unwanted in (
        (owner, MERCHANT_LINKS, OPS_ONLY),
        (logged_in("sam"), {"Payins", "Provider discrepancies", "Merchants"}, {"Team"} | OPS_ONLY),
        (logged_in("olu"), OPS_ONLY | {"Payins", "Merchants"}, set()),
    ):
        links = sidebar(client)
        assert wanted <= set(links), set(links)
        assert not unwanted & set(links), set(links)
        for title, url in links.items():
            assert client.get(url).status_code == 200, (title, url)


def test_no_link_leads_to_a_page_that_does_not_exist(owner):
    for page in (Client().get("/admin/login/"), owner.get("/admin/")):
        assert "View site" not in page.content.decode()
        assert "Return to site" not in page.content.decode()

import pytest
from django.urls import reverse

from quotes.models import Corridor, FeeSchedule, Operator
from tests.quotes.test_consume_and_expiry import make_quote

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    return client.get("/schema", {"format": "json"}).json()


def _request_schema(schema, path):
    ref = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


@pytest.mark.parametrize("path", ["/quotes/payin", "/quotes/payout"])
def test_schema_shows_payin_and_payout_quote_bodies(schema, path):
    body = _request_schema(schema, path)
    assert set(body["required"]) == {
        "country_code",
        "operator_code",
        "rail_type",
        "send_amount",
        "send_currency",
    }
    assert "customer_id" in body["properties"]
    assert body["properties"]["send_amount"]["pattern"] == "^[0-9]+(\\.[0-9]+)?$"


def test_schema_shows_the_transfer_quote_body(schema):
    body = _request_schema(schema, "/quotes/transfer")
    assert set(body["required"]) == {
        "corridor_code",
        "payer_operator_code",
        "recipient_operator_code",
        "payout_currency",
    }
    for optional in (
        "customer_id",
        "payin_amount",
        "payin_currency",
        "payout_amount",
        "send_amount",
        "send_currency",
    ):
        assert optional in body["properties"]


def test_schema_shows_the_quote_response(schema):
    ok = schema["paths"]["/quotes/{quote_id}"]["get"]["responses"]["200"]
    name = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    fields = set(schema["components"]["schemas"][name]["properties"])
    assert fields == {
        "id", "customer_id", "flow_type", "status", "expires_at", "send_amount", "send_currency",
        "receive_amount", "receive_currency", "country_code", "operator_code", "rail_type",
        "corridor_code", "corridor_type", "payer_operator_code", "recipient_operator_code",
        "total_fee", "wallet_impact", "created_at", "_meta",
    }  # fmt: skip
    assert "404" in schema["paths"]["/quotes/{quote_id}"]["get"]["responses"]
    assert "409" in schema["paths"]["/quotes/payin"]["post"]["responses"]


def test_admin_edits_catalog_fees_and_fx(admin_client, enabled_merchant):
    for model in ("operator", "corridor", "feeschedule", "fxrate"):
        assert admin_client.get(reverse(f"admin:quotes_{model}_changelist")).status_code == 200
        assert admin_client.get(reverse(f"admin:quotes_{model}_add")).status_code == 200
    operator = Operator.objects.get(code="CM_MTN_MOMO")
    assert (
        admin_client.get(reverse("admin:quotes_operator_change", args=[operator.pk])).status_code
        == 200
    )
    fee = FeeSchedule.objects.filter(merchant=None).first()
    assert (
        admin_client.get(reverse("admin:quotes_feeschedule_change", args=[fee.pk])).status_code
        == 200
    )


@pytest.mark.parametrize(
    ("flow_type", "field", "code"),
    [("transfer", "operator", "CM_MTN_MOMO"), ("payin", "corridor", "CM-SN-XAF-XOF")],
)
def test_admin_refuses_a_fee_schedule_whose_route_its_flow_never_has(
    admin_client, enabled_merchant, flow_type, field, code
):
    """A transfer is priced by corridor, a payin or payout by operator: a schedule narrowed the
    other way would be saved and never apply (the flow-wide one would be charged instead)."""
    route = (Operator if field == "operator" else Corridor).objects.get(code=code)
    before = FeeSchedule.objects.count()
    response = admin_client.post(
        reverse("admin:quotes_feeschedule_add"),
        {
            "merchant": enabled_merchant.pk,
            "flow_type": flow_type,
            field: route.pk,
            "percentage": "1",
            "fixed_amount": "0",
            "minimum_fee": "0",
            "active": "on",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert field in response.context["adminform"].form.errors
    assert FeeSchedule.objects.count() == before


def test_admin_shows_quotes_read_only(admin_client, enabled_merchant):
    quote = make_quote(enabled_merchant)
    assert admin_client.get(reverse("admin:quotes_quote_changelist")).status_code == 200
    page = admin_client.get(reverse("admin:quotes_quote_change", args=[quote.pk]))
    assert page.status_code == 200
    assert b'name="send_amount"' not in page.content
    assert admin_client.get(reverse("admin:quotes_quote_add")).status_code == 403
    response = admin_client.post(
        reverse("admin:quotes_quote_change", args=[quote.pk]), {"status": "expired"}
    )
    assert response.status_code == 403
    quote.refresh_from_db()
    assert quote.status == "active"


def test_admin_lists_merchant_configuration(admin_client, enabled_merchant):
    assert admin_client.get(reverse("admin:quotes_merchantoperator_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:quotes_merchantcorridor_changelist")).status_code == 200


def test_the_merchant_configurations_former_addresses_lead_to_it(admin_client, enabled_merchant):
    link = enabled_merchant.operator_links.first()
    former = f"/admin/merchants/merchantoperator/{link.pk}/change/?_changelist_filters=x"
    response = admin_client.get(former, follow=True)
    assert response.redirect_chain[0] == (
        f"/admin/quotes/merchantoperator/{link.pk}/change/?_changelist_filters=x",
        302,
    )
    assert response.status_code == 200
    assert admin_client.get("/admin/merchants/merchantcorridor/", follow=True).status_code == 200


def test_merchant_staff_see_only_their_own_quotes(client, enabled_merchant, django_user_model):
    from merchants.models import MerchantMembership
    from tests.catalog import enable_everything
    from tests.factories import MerchantFactory

    other = MerchantFactory()
    enable_everything(other)
    mine = make_quote(enabled_merchant)
    theirs = make_quote(other)
    user = django_user_model.objects.create_user("owner", password="pw-123456-staff", is_staff=True)
    MerchantMembership.objects.create(user=user, merchant=enabled_merchant, role="owner")
    client.force_login(user)

    listing = client.get(reverse("admin:quotes_quote_changelist"))
    assert listing.status_code == 200
    assert str(mine.pk).encode() in listing.content
    assert str(theirs.pk).encode() not in listing.content
    assert client.get(reverse("admin:quotes_quote_change", args=[theirs.pk])).status_code == 404


def test_schema_says_a_kyc_submission_needs_at_least_one_document(schema):
    body = _request_schema(schema, "/customers/{customer_id}/kyc")  # minimum 1 item
    assert body["required"] == ["documents"]
    assert body["properties"]["documents"]["minItems"] == 1


def _ref_name(node) -> str:
    return node["$ref"].rsplit("/", 1)[1]


def test_schema_request_components_carry_the_spec_type_names(schema):
    """docs/api.md names these types; a merchant's generated client gets them."""
    components = schema["components"]["schemas"]
    customer = schema["paths"]["/customers"]["post"]["requestBody"]["content"]
    assert _ref_name(customer["application/json"]["schema"]) == "CreateCustomerRequest"
    kyc = _request_schema(schema, "/customers/{customer_id}/kyc")
    assert _ref_name(kyc["properties"]["documents"]["items"]) == "KycDocumentInput"
    payin = _request_schema(schema, "/payins")
    assert _ref_name(payin["properties"]["source"]) == "PayinSourceRequest"
    transfer = _request_schema(schema, "/transfers")
    assert _ref_name(transfer["properties"]["payer"]) == "RailParty"
    for name in ("CreateCustomerRequest", "KycDocumentInput", "PayinSourceRequest", "RailParty"):
        assert name in components
    assert {"KycStatus", "ErrorResponse"} <= components.keys()
    dangling = {
        ref.rsplit("/", 1)[1]
        for ref in _all_refs(schema)
        if ref.rsplit("/", 1)[1] not in components
    }
    assert dangling == set()


def _all_refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _all_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _all_refs(item)


def test_schema_operations_name_the_api_key_pair_once(schema):
    """Both headers together, stated once per operation (not the same requirement twice)."""
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["security"] == [{"ApiKey": [], "ApiSecret": []}], (method, path)


def test_schema_meta_is_optional_and_untitled(schema):
    for name, component in schema["components"]["schemas"].items():
        if "_meta" in component.get("properties", {}):
            assert "_meta" not in component.get("required", []), name
            assert "title" not in component["properties"]["_meta"], name

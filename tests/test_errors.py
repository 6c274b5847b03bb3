import json

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def test_unknown_path_is_404_in_the_error_shape(api):
    _assert_error(api.get("/no-such-thing"), 404, "not_found")


def test_malformed_uuid_in_path_is_404(api):
    _assert_error(api.get("/customers/not-a-uuid"), 404, "not_found")


def test_unknown_path_without_credentials_is_json_not_html():
    response = APIClient().get("/definitely/not/here")
    _assert_error(response, 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [("delete", "/customers"), ("get", "/operators/predict"), ("put", "/payins")],
)
def test_wrong_method_is_405_with_its_documented_reason(api, method, path):
    response = getattr(api.client, method)(path)
    error = _assert_error(response, 405, "method_not_allowed")
    assert error["reason"] == "method_not_allowed"
    assert method.upper() in error["message"]


def test_malformed_json_is_400_and_creates_nothing(api):
    from customers.models import Customer

    response = api.client.post(
        "/customers", data="{not json", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    error = _assert_error(response, 400, "bad_request")
    assert error["reason"] == "malformed_json"
    assert Customer.objects.count() == 0


def test_wrong_content_type_is_415(api):
    response = api.client.post(
        "/customers",
        data="first_name=A",
        content_type="application/x-www-form-urlencoded",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    error = _assert_error(response, 415, "unsupported_media_type")
    assert error["reason"] == "unsupported_media_type"


def test_validation_error_names_the_field(api):
    error = _assert_error(api.post("/customers", {"email": "not-an-email"}), 400, "bad_request")
    assert "email" in error["fields"]


def test_unhandled_exception_in_api_view_is_500_in_the_error_shape(api, settings):
    settings.ROOT_URLCONF = "tests.urls_errors"
    api.client.raise_request_exception = False
    error = _assert_error(api.get("/test-explode"), 500, "internal_error")
    assert "boom" not in error["message"]


def test_unhandled_exception_in_plain_view_is_500_json(settings):
    settings.ROOT_URLCONF = "tests.urls_errors"
    client = APIClient(raise_request_exception=False)
    _assert_error(client.get("/test-explode-plain"), 500, "internal_error")


def test_health_reports_database_broker_redis_and_worker(worker_heartbeat):
    response = APIClient().get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["degraded"] == []
    assert response.json()["checks"] == {
        "database": "ok",
        "broker": "ok",
        "redis": "ok",
        "worker": "ok",
    }


@pytest.mark.parametrize("path", ["/health", "/health/live"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_health_answers_other_methods_with_a_json_405(method, path):
    from django.test import Client

    response = getattr(Client(enforce_csrf_checks=True), method)(path)
    error = _assert_error(response, 405, "method_not_allowed")
    assert error["reason"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD"


def test_a_csrf_refusal_outside_the_dashboard_is_json():
    from django.test import RequestFactory

    from config.views import csrf_failure

    response = csrf_failure(RequestFactory().post("/customers"), reason="no token")
    assert response.status_code == 403
    assert json.loads(response.content)["error"]["reason"] == "csrf_failed"
    page = csrf_failure(RequestFactory().post("/admin/login/"), reason="no token")
    assert page.status_code == 403 and "html" in page["Content-Type"]


def test_schema_is_public_and_labelled_1_0_0():
    response = APIClient().get("/schema?format=json")
    assert response.status_code == 200
    document = response.json()
    assert document["info"]["version"] == "1.0.0"
    assert document["openapi"].startswith("3.")
    schemes = document["components"]["securitySchemes"]
    assert {s["name"] for s in schemes.values()} == {"X-Api-Key", "X-Api-Secret"}


def test_body_over_the_size_limit_is_400_and_creates_nothing(api, settings):
    from customers.models import Customer

    body = '{"first_name": "' + "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + '"}'
    response = api.client.post(
        "/customers", data=body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    error = _assert_error(response, 400, "bad_request")
    assert error["reason"] == "body_too_large"
    assert Customer.objects.count() == 0


def test_json_nested_too_deeply_is_400_and_creates_nothing(api):
    from customers.models import Customer

    response = api.client.post(
        "/customers",
        data="[" * 100_000 + "]" * 100_000,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    error = _assert_error(response, 400, "bad_request")
    assert error["reason"] == "malformed_json"
    assert Customer.objects.count() == 0


@pytest.mark.parametrize(
    "text",
    [
        '{"external_ref": "ref-a", "first_name": "Awa", "external_ref": "ref-b"}',
        '{"first_name": "Awa", "first\\u005fname": "Other"}',  # the same name, escaped
    ],
)
def test_a_member_named_twice_is_400_malformed_json_and_creates_nothing(api, text):
    from customers.models import Customer

    response = api.client.post(
        "/customers", data=text, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    error = _assert_error(response, 400, "bad_request")
    assert error["reason"] == "malformed_json"
    assert "appears more than once" in error["message"]
    assert Customer.objects.count() == 0


def test_a_member_named_twice_in_a_nested_object_is_400_and_writes_nothing(api):
    from kyc.models import KycSubmission
    from tests.factories import CustomerFactory

    customer = CustomerFactory(merchant=api.merchant)
    text = (
        '{"documents": [{"document_type": "voter_card", "document_type": "passport", '
        '"front_file_url": "https://files.example.com/a.png"}]}'
    )
    response = api.client.post(
        f"/customers/{customer.id}/kyc", data=text, content_type="application/json"
    )
    assert _assert_error(response, 400, "bad_request")["reason"] == "malformed_json"
    assert KycSubmission.objects.count() == 0


def test_a_body_in_a_compressing_charset_is_400_and_is_not_inflated(api):
    """A bytes-to-bytes codec would inflate the body after its size was checked."""
    import bz2

    from customers.models import Customer

    response = api.client.post(
        "/customers",
        data=bz2.compress(b'{"first_name": "Awa"}'),
        content_type="application/json; charset=bz2_codec",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    assert _assert_error(response, 400, "bad_request")["reason"] == "malformed_json"
    assert Customer.objects.count() == 0


def test_an_accept_header_without_json_still_gets_json(api):
    customer = api.post("/customers", {"first_name": "Awa"}).json()
    response = api.client.get(f"/customers/{customer['id']}", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["id"] == customer["id"]
    _assert_error(api.client.get("/no-such-thing", HTTP_ACCEPT="text/html"), 404, "not_found")


def test_path_ids_are_uuids_in_either_case(api):
    customer = api.post("/customers", {"first_name": "Awa"}).json()
    response = api.get(f"/customers/{customer['id'].upper()}")
    assert response.status_code == 200
    assert response.json()["id"] == customer["id"]
    assert api.get(f"/customers/{customer['id'].upper()}/kyc").status_code == 200


def test_a_lone_surrogate_echoed_in_an_error_message_is_400_json(api):
    # the refused value goes back in the message; a lone surrogate cannot be encoded as UTF-8
    response = api.client.post(
        "/customers",
        data='{"country_code": "\\ud800"}',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    error = _assert_error(response, 400, "bad_request")
    assert "country_code" in error["fields"]


def test_no_406_is_documented_since_any_accept_gets_json(api):
    """JsonWhateverTheAccept answers JSON whatever the Accept: the reference lists no 406."""
    response = api.client.get("/customers", HTTP_ACCEPT="application/xml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    description = APIClient().get("/schema?format=json").json()["info"]["description"]
    assert "| 406 |" not in description
    assert "not_acceptable" not in description

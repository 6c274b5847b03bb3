import uuid

import pytest

from customers.models import Customer
from kyc.models import KycDocument, KycStatusChange, KycSubmission

pytestmark = pytest.mark.django_db

URL = "https://files.example.com/id-front.png"


def passport(**overrides):
    document = {
        "document_type": "passport",
        "document_number": "A1234567",
        "issue_country_code": "SN",
        "issue_date": "2020-01-15",
        "expiry_date": "2030-01-14",
        "front_file_url": URL,
    }
    document.update(overrides)
    return {key: value for key, value in document.items() if value is not None}


def submit(api, customer_id, body):
    return api.post(f"/customers/{customer_id}/kyc", body, idempotency_key=None)


def assert_rejected_and_nothing_changed(response, customer, *, field_path):
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["reason"] == "invalid_request"
    node = error["fields"]
    for part in field_path:
        node = node[part]
    assert node
    assert KycSubmission.objects.count() == 0
    assert KycDocument.objects.count() == 0
    customer.refresh_from_db()
    assert customer.kyc_status == "not_started"
    return node


def test_submission_returns_201_kyc_status_with_every_input_field(api, customer):
    document = passport(back_file_url="https://files.example.com/back.png")

    response = submit(api, customer.id, {"documents": [document]})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["customer_id"] == str(customer.id)
    assert body["kyc_status"] == "pending"
    assert len(body["documents"]) == 1
    returned = body["documents"][0]
    for key, value in document.items():
        assert returned[key] == value
    assert returned["selfie_file_url"] is None
    assert returned["status"] == "uploaded"
    assert returned["review_status"] == "pending"
    uuid.UUID(returned["id"])
    assert returned["created_at"]
    customer.refresh_from_db()
    assert customer.kyc_status == "pending"
    change = KycStatusChange.objects.get(customer=customer)
    assert (change.from_status, change.to_status, change.changed_by) == (
        "not_started",
        "pending",
        None,
    )


def test_submission_needs_no_idempotency_key_and_get_returns_the_same_state(api, customer):
    created = submit(api, customer.id, {"documents": [passport()]}).json()

    response = api.get(f"/customers/{customer.id}/kyc")

    assert response.status_code == 200
    assert response.json() == created


def test_get_before_any_submission_is_not_started_with_no_documents(api, customer):
    response = api.get(f"/customers/{customer.id}/kyc")

    assert response.status_code == 200
    assert response.json() == {
        "customer_id": str(customer.id),
        "kyc_status": "not_started",
        "documents": [],
    }


def test_several_documents_keep_their_order(api, customer):
    documents = [
        passport(),
        {"document_type": "proof_of_address", "front_file_url": "http://files.example.com/b.pdf"},
    ]

    body = submit(api, customer.id, {"documents": documents}).json()

    assert [d["document_type"] for d in body["documents"]] == ["passport", "proof_of_address"]


def test_another_merchants_customer_is_404_for_post_and_get(other_api, customer):
    post = submit(other_api, customer.id, {"documents": [passport()]})
    get = other_api.get(f"/customers/{customer.id}/kyc")

    assert post.status_code == 404
    assert post.json()["error"]["code"] == "not_found"
    assert get.status_code == 404
    assert get.json()["error"]["code"] == "not_found"
    assert KycSubmission.objects.count() == 0
    customer.refresh_from_db()
    assert customer.kyc_status == "not_started"


def test_unknown_customer_id_is_404(api):
    response = submit(api, uuid.uuid4(), {"documents": [passport()]})
    assert response.status_code == 404
    assert api.get(f"/customers/{uuid.uuid4()}/kyc").status_code == 404


def test_malformed_customer_id_is_json_404(api):
    response = api.get("/customers/not-a-uuid/kyc")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_without_credentials_is_401(customer):
    from rest_framework.test import APIClient

    response = APIClient().get(f"/customers/{customer.id}/kyc")
    assert response.status_code == 401


def test_empty_documents_list_is_400(api, customer):
    response = submit(api, customer.id, {"documents": []})
    assert_rejected_and_nothing_changed(response, customer, field_path=["documents"])


def test_missing_documents_is_400(api, customer):
    response = submit(api, customer.id, {})
    assert_rejected_and_nothing_changed(response, customer, field_path=["documents"])


def test_too_many_documents_is_400(api, customer):
    response = submit(api, customer.id, {"documents": [passport()] * 11})
    assert_rejected_and_nothing_changed(response, customer, field_path=["documents"])


def test_missing_document_type_is_400(api, customer):
    response = submit(api, customer.id, {"documents": [passport(document_type=None)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "document_type"]
    )


def test_unknown_document_type_is_400_listing_the_allowed_values(api, customer):
    response = submit(api, customer.id, {"documents": [passport(document_type="library_card")]})
    messages = assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "document_type"]
    )
    for allowed in ("national_id", "passport", "driver_license", "residence_permit"):
        assert allowed in messages[0]
    assert "library_card" in messages[0]


def test_document_without_any_file_url_is_400(api, customer):
    response = submit(api, customer.id, {"documents": [passport(front_file_url=None)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "front_file_url"]
    )


@pytest.mark.parametrize(
    "url",
    [
        "ftp://files.example.com/id.png",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "not a url",
        "https://user:pass@files.example.com/id.png",
        "https://files.example.com:0/id.png",
        "https://files.example.com:70000/id.png",
    ],
)
def test_non_http_file_url_is_400(api, customer, url):
    response = submit(api, customer.id, {"documents": [passport(front_file_url=url)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "front_file_url"]
    )


def test_file_url_that_is_not_a_string_is_400(api, customer):
    response = submit(api, customer.id, {"documents": [passport(selfie_file_url=42)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "selfie_file_url"]
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/id.png",
        "http://10.0.0.8/id.png",
        "http://[::1]/id.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/id.png",
        "http://0.0.0.0/id.png",
        "http://[fc00::1]/id.png",
        "http://[fe80::1]/id.png",
        "http://[::ffff:127.0.0.1]/id.png",
        "http://2130706433/id.png",  # 127.0.0.1 to the C library: not a URL here
        "http://0x7f000001/id.png",
    ],
)
def test_literal_private_address_url_is_400_when_private_urls_are_off(api, customer, settings, url):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    response = submit(api, customer.id, {"documents": [passport(back_file_url=url)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "back_file_url"]
    )


def test_file_url_over_2048_characters_is_400(api, customer):
    url = "https://files.example.com/" + "a" * 2048
    response = submit(api, customer.id, {"documents": [passport(front_file_url=url)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "front_file_url"]
    )


@pytest.mark.parametrize("field", ["issue_date", "expiry_date"])
@pytest.mark.parametrize("value", ["2024-13-01", "15/01/2020", "yesterday", 20200115])
def test_malformed_date_is_400(api, customer, field, value):
    response = submit(api, customer.id, {"documents": [passport(**{field: value})]})
    assert_rejected_and_nothing_changed(response, customer, field_path=["documents", "0", field])


@pytest.mark.parametrize("expiry", ["2020-01-14", "2020-01-15"])
def test_expiry_date_not_after_issue_date_is_400(api, customer, expiry):
    response = submit(
        api, customer.id, {"documents": [passport(issue_date="2020-01-15", expiry_date=expiry)]}
    )
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "expiry_date"]
    )


def test_issue_date_in_the_future_is_400(api, customer):
    response = submit(
        api, customer.id, {"documents": [passport(issue_date="2999-01-01", expiry_date=None)]}
    )
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "issue_date"]
    )


@pytest.mark.parametrize("code", ["XX", "sn", "SEN", "S", 12])
def test_issue_country_code_not_iso_is_400(api, customer, code):
    response = submit(api, customer.id, {"documents": [passport(issue_country_code=code)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "issue_country_code"]
    )


@pytest.mark.parametrize(
    "number", ["A12\r\n34", "A12\t34", "A\x07", "A\x00", "\u202eA1234", "\u200b", "\ufeff\u200f"]
)
def test_document_number_with_control_or_only_invisible_characters_is_400(api, customer, number):
    response = submit(api, customer.id, {"documents": [passport(document_number=number)]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "0", "document_number"]
    )


def test_one_bad_document_refuses_the_whole_submission(api, customer):
    response = submit(api, customer.id, {"documents": [passport(), passport(document_type="nope")]})
    assert_rejected_and_nothing_changed(
        response, customer, field_path=["documents", "1", "document_type"]
    )


def test_kyc_status_shows_on_the_customer(api, customer):
    submit(api, customer.id, {"documents": [passport()]})
    assert api.get(f"/customers/{customer.id}").json()["kyc_status"] == "pending"
    assert Customer.objects.get(pk=customer.id).kyc_status == "pending"

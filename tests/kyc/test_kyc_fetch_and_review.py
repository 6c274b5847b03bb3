"""Submissions whose files are served by a real local HTTP server; Celery runs eagerly and
the on-commit work runs when the request's transaction commits."""

import socket
import time
import tracemalloc
from datetime import date, timedelta

import pytest
from django.core.files.storage import default_storage

from core import netguard
from kyc import fetching
from kyc.models import KycDocument, KycStatusChange
from tests.kyc.conftest import PDF, PNG

pytestmark = pytest.mark.django_db


def document(front_url, **overrides):
    doc = {
        "document_type": "national_id",
        "document_number": "SN-99",
        "issue_country_code": "SN",
        "issue_date": "2021-03-01",
        "expiry_date": "2031-02-28",
        "front_file_url": front_url,
    }
    doc.update(overrides)
    return {key: value for key, value in doc.items() if value is not None}


@pytest.fixture
def submit_and_settle(api, django_capture_on_commit_callbacks):
    def run(customer, documents):
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(
                f"/customers/{customer.id}/kyc", {"documents": documents}, idempotency_key=None
            )
        assert response.status_code == 201, response.content
        assert response.json()["kyc_status"] == "pending"
        assert {d["status"] for d in response.json()["documents"]} == {"uploaded"}
        state = api.get(f"/customers/{customer.id}/kyc")
        assert state.status_code == 200
        return state.json()

    return run


def test_good_image_is_fetched_stored_and_approved(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(customer, [document(file_server.url("/id.png"))])

    assert state["kyc_status"] == "approved"
    [doc] = state["documents"]
    assert doc["status"] == "fetched"
    assert doc["failure_reason"] is None
    assert doc["review_status"] == "approved"
    assert doc["rejection_reason"] is None
    stored = KycDocument.objects.get(pk=doc["id"])
    assert stored.front_file.name.endswith("front.png")
    with default_storage.open(stored.front_file.name) as handle:
        assert handle.read() == PNG
    customer.refresh_from_db()
    assert customer.kyc_status == "approved"
    moves = list(
        KycStatusChange.objects.filter(customer=customer)
        .order_by("id")
        .values_list("from_status", "to_status")
    )
    assert moves == [("not_started", "pending"), ("pending", "approved")]


def test_every_file_of_a_document_is_stored(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(
        customer,
        [
            document(
                file_server.url("/id.png"),
                back_file_url=file_server.url("/id.pdf"),
                selfie_file_url=file_server.url("/same-host"),
            )
        ],
    )

    assert state["kyc_status"] == "approved"
    stored = KycDocument.objects.get(pk=state["documents"][0]["id"])
    with default_storage.open(stored.back_file.name) as handle:
        assert handle.read() == PDF
    assert stored.back_file.name.endswith("back.pdf")
    with default_storage.open(stored.selfie_file.name) as handle:
        assert handle.read() == PNG


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/missing.png", "front_file_url: http_status_404"),
        ("/big.png", "front_file_url: file_too_large"),
        ("/big-unannounced.png", "front_file_url: file_too_large"),
        ("/page.html", "front_file_url: content_type_not_allowed"),
        ("/image.svg", "front_file_url: content_type_not_allowed"),  # may carry scripts
        ("/bomb.png", "front_file_url: file_too_large"),  # the limit is on the decoded bytes
        ("/fake.png", "front_file_url: content_mismatch"),
        ("/elsewhere", "front_file_url: redirect_to_other_host"),
    ],
)
def test_unfetchable_file_rejects_the_customer_with_the_reason(
    private_urls_allowed, file_server, customer, submit_and_settle, path, reason
):
    state = submit_and_settle(customer, [document(file_server.url(path))])

    assert state["kyc_status"] == "rejected"
    [doc] = state["documents"]
    assert doc["status"] == "fetch_failed"
    assert doc["failure_reason"] == reason
    assert doc["review_status"] == "rejected"
    assert doc["rejection_reason"] == f"file_not_fetched ({reason})"
    stored = KycDocument.objects.get(pk=doc["id"])
    assert not stored.front_file
    assert not default_storage.exists(f"kyc/{customer.id}")


def test_redirect_to_another_host_is_not_followed(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    submit_and_settle(customer, [document(file_server.url("/elsewhere"))])

    assert file_server.requests == ["/elsewhere"]


def test_expired_document_is_rejected_even_though_its_file_was_fetched(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    yesterday = date.today() - timedelta(days=1)
    state = submit_and_settle(
        customer,
        [
            document(file_server.url("/id.png")),
            document(
                file_server.url("/id.png"),
                document_type="passport",
                issue_date="2010-01-01",
                expiry_date=yesterday.isoformat(),
            ),
        ],
    )

    assert state["kyc_status"] == "rejected"
    national_id, passport = state["documents"]
    assert passport["status"] == "fetched"
    assert passport["review_status"] == "rejected"
    assert passport["rejection_reason"] == "document_expired"
    assert national_id["review_status"] == "approved"
    assert national_id["rejection_reason"] is None
    change = KycStatusChange.objects.get(customer=customer, to_status="rejected")
    assert "passport: document_expired" in change.reason


def test_document_expiring_today_is_still_valid(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(
        customer,
        [document(file_server.url("/id.png"), expiry_date=date.today().isoformat())],
    )
    assert state["kyc_status"] == "approved"


def test_one_bad_file_among_good_documents_rejects_the_customer(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(
        customer,
        [document(file_server.url("/id.png")), document(file_server.url("/missing.png"))],
    )

    assert state["kyc_status"] == "rejected"
    assert [d["review_status"] for d in state["documents"]] == ["approved", "rejected"]


def test_private_address_is_refused_at_fetch_time_when_the_setting_is_off(
    settings, file_server, customer, submit_and_settle
):
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    # "localhost" passes the submission check (it is a name) but resolves to 127.0.0.1.
    state = submit_and_settle(customer, [document(file_server.url("/id.png", host="localhost"))])

    assert state["kyc_status"] == "rejected"
    [doc] = state["documents"]
    assert doc["status"] == "fetch_failed"
    assert doc["failure_reason"] == "front_file_url: private_address_refused"
    assert file_server.requests == []


def test_rejected_customer_may_submit_again_and_be_approved(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    first = submit_and_settle(customer, [document(file_server.url("/missing.png"))])
    assert first["kyc_status"] == "rejected"

    second = submit_and_settle(customer, [document(file_server.url("/id.png"))])

    assert second["kyc_status"] == "approved"
    assert len(second["documents"]) == 1
    assert second["documents"][0]["id"] != first["documents"][0]["id"]
    moves = list(
        KycStatusChange.objects.filter(customer=customer)
        .order_by("id")
        .values_list("from_status", "to_status")
    )
    assert moves == [
        ("not_started", "pending"),
        ("pending", "rejected"),
        ("rejected", "pending"),
        ("pending", "approved"),
    ]


def test_approved_customer_resubmitting_goes_back_to_pending_until_reviewed(
    private_urls_allowed, file_server, customer, submit_and_settle, api
):
    submit_and_settle(customer, [document(file_server.url("/id.png"))])

    response = api.post(
        f"/customers/{customer.id}/kyc",
        {"documents": [document(file_server.url("/id.png"))]},
        idempotency_key=None,
    )

    assert response.status_code == 201
    assert response.json()["kyc_status"] == "pending"


@pytest.mark.parametrize("path", ["/drip.png", "/drip-headers.png"])
def test_a_server_dripping_its_file_is_cut_off_at_the_overall_deadline(
    private_urls_allowed, file_server, customer, submit_and_settle, monkeypatch, path
):
    # Each piece comes well within the read timeout; the whole file would take seconds.
    monkeypatch.setattr(fetching, "TOTAL_DEADLINE_SECONDS", 0.5)
    state = submit_and_settle(customer, [document(file_server.url(path))])

    [doc] = state["documents"]
    assert (doc["status"], doc["failure_reason"]) == ("fetch_failed", "front_file_url: timeout")
    for _ in range(100):  # the server notices within a write or two
        if file_server.drips:
            break
        time.sleep(0.1)
    assert file_server.drips == ["hung up"]


def test_a_document_whose_later_file_fails_keeps_none_of_its_files(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(
        customer,
        [document(file_server.url("/id.png"), back_file_url=file_server.url("/missing.png"))],
    )

    [doc] = state["documents"]
    assert doc["status"] == "fetch_failed"
    assert file_server.requests == ["/id.png", "/missing.png"]  # the front was downloaded
    assert not default_storage.exists(f"kyc/{customer.id}/{doc['id']}/front.png")


def test_a_riff_file_that_is_not_webp_is_refused(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    state = submit_and_settle(customer, [document(file_server.url("/wave.webp"))])

    [doc] = state["documents"]
    assert doc["failure_reason"] == "front_file_url: content_mismatch"


@pytest.mark.parametrize(
    ("location", "followed"),
    [
        ("https://files.example/id.png", True),  # the upgrade to https, default ports
        ("https://files.example:9443/id.png", False),  # another port of the host
        ("http://files.example:8080/id.png", False),
        ("https://other.example/id.png", False),
    ],
)
def test_redirects_stay_on_the_same_host_and_port(location, followed):
    if followed:
        assert fetching._redirect_target("http://files.example/a", location) == location
    else:
        with pytest.raises(fetching.FetchFailed):
            fetching._redirect_target("http://files.example/a", location)


def test_a_redirects_body_is_not_read(
    private_urls_allowed, file_server, customer, submit_and_settle
):
    """requests read a 3xx's whole body into memory (to free its connection) even when not
    following it, with no size limit and gzip decoded: a few MB of a compressed body became
    hundreds of MB in the worker, an endless one grew until the 60 s deadline."""
    state = submit_and_settle(customer, [document(file_server.url("/redirect-with-body"))])

    [doc] = state["documents"]
    assert doc["status"] == "fetched"  # the redirect was followed, its body dropped
    assert file_server.requests == ["/redirect-with-body", "/id.png"]
    for _ in range(100):  # the server notices within a write or two
        if file_server.redirect_bodies:
            break
        time.sleep(0.1)
    assert file_server.redirect_bodies == ["hung up"]


def test_a_compressed_file_is_decoded_a_chunk_at_a_time(private_urls_allowed, file_server):
    """A gzip body of 64 KiB that decodes to 64 MiB: each read gives at most a chunk of
    decoded bytes (urllib3 >= 2.6 bounds the decompression), so the fetch never holds much
    more than MAX_FILE_BYTES, however dense the compression."""
    tracemalloc.start()
    try:
        with pytest.raises(fetching.FetchFailed) as failed:
            fetching.fetch_file(file_server.url("/bomb.png"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert failed.value.reason == "file_too_large"
    assert peak < 3 * fetching.MAX_FILE_BYTES


def test_each_redirect_hop_is_checked_again_where_it_connects(settings, monkeypatch, file_server):
    """A same-host redirect whose name answers another address to the second lookup (DNS
    rebinding between hops): the second connection is judged by that address. 127.0.0.1
    stands for a public address here, 127.0.0.2 for an internal one."""
    settings.ALLOW_PRIVATE_NETWORK_URLS = False
    monkeypatch.setattr(netguard, "address_is_public", lambda address: address == "127.0.0.1")
    real_getaddrinfo = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding_getaddrinfo(host, *args, **kwargs):
        if host == "files.rebind.example":
            host = next(answers, "127.0.0.2")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    with pytest.raises(fetching.FetchFailed) as failed:
        fetching.fetch_file(file_server.url("/same-host", host="files.rebind.example"))

    assert failed.value.reason == "private_address_refused"
    assert file_server.requests == ["/same-host"]


@pytest.mark.parametrize("location", ["/bad-port", "/bad-ipv6"])
def test_a_redirect_to_no_url_fails_the_document_and_keeps_none_of_its_files(
    private_urls_allowed, file_server, customer, submit_and_settle, location
):
    """urlsplit raised ValueError on the Location: the fetch crashed with the front side saved,
    the document never settled, and the stalled-KYC sweep saved another copy every minute."""
    state = submit_and_settle(
        customer,
        [document(file_server.url("/id.png"), back_file_url=file_server.url(location))],
    )

    [doc] = state["documents"]
    assert (doc["status"], doc["failure_reason"]) == (
        "fetch_failed",
        "back_file_url: redirect_not_allowed",
    )
    assert state["kyc_status"] == "rejected"
    directory = f"kyc/{customer.id}/{doc['id']}"
    assert not default_storage.exists(directory) or default_storage.listdir(directory) == ([], [])


def test_a_run_failing_to_record_its_result_keeps_none_of_its_files(
    private_urls_allowed,
    file_server,
    customer,
    api,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    """The database went away during the (long) download: the run fails after saving the
    files, and the stalled-KYC sweep runs it again. Each run used to leave a copy behind."""
    from django.db import OperationalError
    from django.utils import timezone

    from kyc import services

    with django_capture_on_commit_callbacks(execute=False):  # the fetch is run by hand below
        response = api.post(
            f"/customers/{customer.id}/kyc",
            {"documents": [document(file_server.url("/id.png"))]},
            idempotency_key=None,
        )
    assert response.status_code == 201, response.content
    doc = KycDocument.objects.get()

    def database_gone(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "_schedule_review_when_settled", database_gone)
    for _ in range(2):
        with pytest.raises(OperationalError):
            services.kyc_document_fetch(document_id=doc.id, at=timezone.now())

    assert KycDocument.objects.get().status == "uploaded"  # nothing recorded: it is retried
    directory = f"kyc/{customer.id}/{doc.id}"
    assert not default_storage.exists(directory) or default_storage.listdir(directory) == ([], [])


def test_a_file_host_whose_name_does_not_resolve_fails_at_the_overall_deadline(
    private_urls_allowed, file_server, customer, submit_and_settle, monkeypatch, stalled_dns
):
    # The name lookup shares the fetch's overall limit with everything after it.
    monkeypatch.setattr(fetching, "TOTAL_DEADLINE_SECONDS", 0.5)
    stalled_dns.stall("files.slow-dns.example")  # then 127.0.0.1: the file server
    url = file_server.url("/id.png", host="files.slow-dns.example")

    started = time.monotonic()
    state = submit_and_settle(customer, [document(url)])

    assert time.monotonic() - started < 2.5  # not until the name server answers
    [doc] = state["documents"]
    assert (doc["status"], doc["failure_reason"]) == ("fetch_failed", "front_file_url: timeout")
    assert stalled_dns.lookups == ["files.slow-dns.example"]
    assert file_server.requests == []


def test_a_superseded_submissions_files_are_not_downloaded(
    private_urls_allowed,
    file_server,
    customer,
    submit_and_settle,
    api,
    django_capture_on_commit_callbacks,
):
    """The merchant submits again before the first submission's files were fetched (its fetch
    queued behind others, say): the first is superseded and never reviewed, so its identity
    documents are not downloaded and stored for nothing when its fetch comes round."""
    with django_capture_on_commit_callbacks(execute=False) as first_fetches:
        first = api.post(
            f"/customers/{customer.id}/kyc",
            {"documents": [document(file_server.url("/id.pdf"))]},
            idempotency_key=None,
        )
    assert first.status_code == 201, first.content
    [first_doc] = first.json()["documents"]
    second = submit_and_settle(customer, [document(file_server.url("/id.png"))])
    assert second["kyc_status"] == "approved"

    for fetch in first_fetches:  # the first submission's fetch comes round at last
        fetch()

    assert file_server.requests == ["/id.png"]
    superseded = KycDocument.objects.get(pk=first_doc["id"])
    assert (superseded.status, superseded.front_file.name) == ("uploaded", "")
    assert not default_storage.exists(f"kyc/{customer.id}/{first_doc['id']}/front.pdf")
    state = api.get(f"/customers/{customer.id}/kyc").json()
    assert state["kyc_status"] == "approved"
    assert [d["id"] for d in state["documents"]] == [second["documents"][0]["id"]]


def test_files_fetched_while_their_submission_was_superseded_are_not_kept(
    private_urls_allowed, file_server, customer, submit_and_settle, api, monkeypatch
):
    """The merchant submits again while the first submission's file is on its way: the first
    submission's document is not recorded as fetched and its file is not kept."""
    real_fetch = fetching.fetch_file
    second: dict = {}

    def fetch_while_resubmitted(url):
        fetched = real_fetch(url)
        if url.endswith("/id.pdf") and not second:
            monkeypatch.setattr(fetching, "fetch_file", real_fetch)
            second.update(submit_and_settle(customer, [document(file_server.url("/id.png"))]))
        return fetched

    monkeypatch.setattr(fetching, "fetch_file", fetch_while_resubmitted)
    submit_and_settle(customer, [document(file_server.url("/id.pdf"))])

    assert second["kyc_status"] == "approved"
    [first_doc] = KycDocument.objects.filter(submission__number=1, submission__customer=customer)
    assert (first_doc.status, first_doc.front_file.name) == ("uploaded", "")
    assert not default_storage.exists(f"kyc/{customer.id}/{first_doc.id}/front.pdf")
    assert file_server.requests == ["/id.pdf", "/id.png"]

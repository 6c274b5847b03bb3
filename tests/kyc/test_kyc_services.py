import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from core.exceptions import DomainError
from customers.models import Customer
from kyc import selectors, services
from kyc import status as kyc_status
from kyc.models import KycDocument, KycStatusChange, KycSubmission
from tests.factories import CustomerFactory


def doc(url: str) -> dict:
    return {"document_type": "passport", "front_file_url": url}


def history(customer: Customer) -> list[tuple[str, str]]:
    return list(
        KycStatusChange.objects.filter(customer=customer)
        .order_by("id")
        .values_list("from_status", "to_status")
    )


@pytest.mark.django_db
class TestKycTransition:
    @pytest.mark.parametrize("to", ["approved", "rejected"])
    def test_a_customer_never_reviewed_cannot_be_decided(self, customer, to):
        with pytest.raises(kyc_status.KycTransitionRefused) as refused:
            kyc_status.customer_kyc_transition(customer_id=customer.id, to=to, at=timezone.now())

        assert refused.value.reason == "kyc_transition_not_allowed"
        customer.refresh_from_db()
        assert customer.kyc_status == "not_started"
        assert history(customer) == []

    def test_nothing_goes_back_to_not_started(self, customer):
        now = timezone.now()
        kyc_status.customer_kyc_transition(customer_id=customer.id, to="pending", at=now)
        with pytest.raises(kyc_status.KycTransitionRefused):
            kyc_status.customer_kyc_transition(customer_id=customer.id, to="not_started", at=now)
        assert history(customer) == [("not_started", "pending")]

    def test_the_system_cannot_overturn_a_decision(self, customer):
        now = timezone.now()
        for to in ("pending", "approved"):
            kyc_status.customer_kyc_transition(customer_id=customer.id, to=to, at=now)
        with pytest.raises(kyc_status.KycTransitionRefused):
            kyc_status.customer_kyc_transition(customer_id=customer.id, to="rejected", at=now)
        customer.refresh_from_db()
        assert customer.kyc_status == "approved"

    def test_moving_to_the_current_status_changes_nothing(self, customer):
        now = timezone.now()
        kyc_status.customer_kyc_transition(customer_id=customer.id, to="pending", at=now)
        kyc_status.customer_kyc_transition(customer_id=customer.id, to="pending", at=now)
        assert history(customer) == [("not_started", "pending")]

    def test_unknown_status_is_refused(self, customer):
        with pytest.raises(ValueError):
            kyc_status.customer_kyc_transition(
                customer_id=customer.id, to="maybe", at=timezone.now()
            )

    def test_support_may_overturn_a_rejection_and_is_recorded(self, customer):
        user = get_user_model().objects.create_user("agent", password="x", is_staff=True)
        now = timezone.now()
        for to in ("pending", "rejected"):
            kyc_status.customer_kyc_transition(customer_id=customer.id, to=to, at=now)

        services.kyc_decide_by_hand(customer_id=customer.id, approve=True, user=user, at=now)

        customer.refresh_from_db()
        assert customer.kyc_status == "approved"
        change = KycStatusChange.objects.filter(customer=customer).latest("id")
        assert (change.from_status, change.to_status) == ("rejected", "approved")
        assert change.changed_by == user
        assert "agent" in change.reason

    def test_support_cannot_decide_before_any_submission(self, customer):
        user = get_user_model().objects.create_user("agent", password="x", is_staff=True)
        with pytest.raises(DomainError):
            services.kyc_decide_by_hand(
                customer_id=customer.id, approve=True, user=user, at=timezone.now()
            )
        assert history(customer) == []


@pytest.mark.django_db
class TestReview:
    """Services called directly: on-commit work does not run in these tests."""

    def test_review_of_a_superseded_submission_changes_nothing(self, merchant, customer):
        now = timezone.now()
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc("https://a.example/1.png")],
            at=now,
        )
        first = KycSubmission.objects.get(customer=customer, number=1)
        KycDocument.objects.filter(submission=first).update(status="fetched")
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc("https://a.example/2.png")],
            at=now,
        )

        services.kyc_submission_review(submission_id=first.id, at=now)

        first.refresh_from_db()
        assert first.outcome == "superseded"
        customer.refresh_from_db()
        assert customer.kyc_status == "pending"
        assert set(KycDocument.objects.values_list("review_status", flat=True)) == {"pending"}
        state = selectors.kyc_state_for(customer=customer)
        assert [d.front_file_url for d in state.documents] == ["https://a.example/2.png"]

    def test_review_waits_while_a_file_is_still_being_fetched(self, merchant, customer):
        now = timezone.now()
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc("https://a.example/1.png")],
            at=now,
        )
        submission = KycSubmission.objects.get(customer=customer)

        services.kyc_submission_review(submission_id=submission.id, at=now)

        submission.refresh_from_db()
        assert submission.outcome == "pending"
        customer.refresh_from_db()
        assert customer.kyc_status == "pending"

    def test_a_second_review_changes_nothing(self, merchant, customer):
        now = timezone.now()
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc("https://a.example/1.png")],
            at=now,
        )
        submission = KycSubmission.objects.get(customer=customer)
        KycDocument.objects.update(status="fetched")
        services.kyc_submission_review(submission_id=submission.id, at=now)

        services.kyc_submission_review(submission_id=submission.id, at=now)

        assert history(customer) == [("not_started", "pending"), ("pending", "approved")]

    def test_review_does_not_override_a_support_decision(self, merchant, customer):
        user = get_user_model().objects.create_user("agent", password="x", is_staff=True)
        now = timezone.now()
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc("https://a.example/1.png")],
            at=now,
        )
        submission = KycSubmission.objects.get(customer=customer)
        services.kyc_decide_by_hand(customer_id=customer.id, approve=False, user=user, at=now)
        KycDocument.objects.update(status="fetched")

        services.kyc_submission_review(submission_id=submission.id, at=now)

        customer.refresh_from_db()
        assert customer.kyc_status == "rejected"

    def test_fetching_again_does_not_download_again(
        self, merchant, customer, file_server, private_urls_allowed
    ):
        now = timezone.now()
        services.kyc_submit(
            merchant=merchant,
            customer_id=customer.id,
            documents=[doc(file_server.url("/id.png"))],
            at=now,
        )
        document = KycDocument.objects.get(customer=customer)
        services.kyc_document_fetch(document_id=document.id, at=now)
        first_file = KycDocument.objects.get(pk=document.id).front_file.name

        services.kyc_document_fetch(document_id=document.id, at=now)

        assert file_server.requests == ["/id.png"]
        assert KycDocument.objects.get(pk=document.id).front_file.name == first_file


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_are_numbered_and_the_latest_decides(
    file_server, private_urls_allowed
):
    customer = CustomerFactory()
    merchant = customer.merchant
    barrier = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    def submit(path: str) -> None:
        try:
            barrier.wait()
            services.kyc_submit(
                merchant=merchant,
                customer_id=customer.id,
                documents=[doc(file_server.url(path))],
                at=timezone.now(),
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(p,)) for p in ("/id.png", "/id.pdf")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    submissions = {s.number: s for s in KycSubmission.objects.filter(customer=customer)}
    assert set(submissions) == {1, 2}
    assert submissions[2].outcome == "approved"
    assert submissions[1].outcome in {"approved", "superseded"}
    customer.refresh_from_db()
    assert customer.kyc_status == "approved"
    assert history(customer)[-1] == ("pending", "approved")


@pytest.mark.django_db(transaction=True)
def test_a_kyc_submission_in_progress_does_not_hold_up_the_customers_quotes(
    enabled_merchant, enabled_api
):
    """KYC's writers take turns on the customer's row FOR NO KEY UPDATE: a quote or payment
    of that customer (whose insert locks the customer's key) goes through meanwhile. FOR
    UPDATE made it wait for the whole submission."""
    from tests.faults.conftest import admin_connection
    from tests.locks import start, waiting_for_a_lock
    from tests.worker import wait_until

    customer = CustomerFactory(merchant=enabled_merchant, country_code="CM")
    now = timezone.now()
    services.kyc_submit(
        merchant=enabled_merchant,
        customer_id=customer.id,
        documents=[doc("https://a.example/1.png")],
        at=now,
    )
    first = KycSubmission.objects.get(customer=customer)
    # still in review (its file's fetch, run at commit here, failed and had it rejected)
    KycSubmission.objects.filter(pk=first.pk).update(outcome="pending", reviewed_at=None)
    submitted, quoted = [], []
    holder = admin_connection()
    try:
        with holder.transaction():
            # the second submission supersedes the first: it waits there, the customer locked
            holder.execute("SELECT id FROM kyc_kycsubmission WHERE id = %s FOR UPDATE", [first.pk])
            submitting = start(
                lambda: services.kyc_submit(
                    merchant=enabled_merchant,
                    customer_id=customer.id,
                    documents=[doc("https://a.example/2.png")],
                    at=now,
                ),
                submitted,
            )
            waiting_for_a_lock(1)
            quoting = start(
                lambda: enabled_api.post(
                    "/quotes/payin",
                    {
                        "customer_id": str(customer.id),
                        "country_code": "CM",
                        "operator_code": "CM_MTN_MOMO",
                        "rail_type": "mobile_money",
                        "send_amount": "10000",
                        "send_currency": "XAF",
                    },
                ),
                quoted,
            )
            assert wait_until(lambda: bool(quoted), timeout=10), "the quote waited for KYC"
    finally:
        holder.close()
    for thread in (submitting, quoting):
        thread.join(30)

    assert quoted[0].status_code == 201, quoted[0].json()
    assert quoted[0].json()["customer_id"] == str(customer.id)
    assert submitted[0].kyc_status == "pending"
    assert KycSubmission.objects.get(pk=first.pk).outcome == "superseded"


@pytest.mark.django_db(transaction=True)
def test_a_kyc_decision_by_hand_does_not_lock_the_merchants_row(merchant):
    """The decision locks the customer's row only (FOR NO KEY UPDATE), though it reads the
    merchant with it for the audit entry: locked FOR UPDATE too, the merchant's row would hold
    off every payment of the merchant (their inserts lock its key) until the decision commits.
    Here a session holding the merchant's key, as a payment's insert does, must not stop it."""
    from tests.faults.conftest import admin_connection
    from tests.locks import start
    from tests.worker import wait_until

    customer = CustomerFactory(merchant=merchant)
    user = get_user_model().objects.create_user("agent", password="x", is_staff=True)
    now = timezone.now()
    for to in ("pending", "rejected"):
        kyc_status.customer_kyc_transition(customer_id=customer.id, to=to, at=now)
    decided = []
    holder = admin_connection()
    try:
        with holder.transaction():
            holder.execute(
                "SELECT id FROM merchants_merchant WHERE id = %s FOR KEY SHARE", [merchant.pk]
            )
            deciding = start(
                lambda: services.kyc_decide_by_hand(
                    customer_id=customer.id, approve=True, user=user, at=now
                ),
                decided,
            )
            assert wait_until(lambda: bool(decided), timeout=10), "it waited for the merchant"
    finally:
        holder.close()
    deciding.join(30)

    assert decided[0].kyc_status == "approved"

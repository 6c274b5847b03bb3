"""KYC commands: submit documents, record a fetched file, review a submission, decide by hand."""

import logging
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Max

from core import jobs
from core.exceptions import DomainError
from core.fields import country_date
from customers import services as customer_services
from customers.models import Customer, KycStatus
from kyc import fetching, selectors
from kyc import status as kyc_status
from kyc.models import (
    DocumentStatus,
    KycDocument,
    KycSubmission,
    ReviewStatus,
    SubmissionOutcome,
)
from merchants import services as merchant_services
from merchants.models import Merchant

logger = logging.getLogger("cowry.kyc")

FETCH_DOCUMENT = "kyc.tasks.fetch_kyc_document"
REVIEW_SUBMISSION = "kyc.tasks.review_kyc_submission"

DOCUMENT_FIELDS = (
    "document_type",
    "document_number",
    "issue_country_code",
    "issue_date",
    "expiry_date",
    "front_file_url",
    "back_file_url",
    "selfie_file_url",
)


def kyc_submit(
    *, merchant: Merchant, customer_id: UUID, documents: list[dict[str, Any]], at: datetime
) -> selectors.KycState:
    """Record a new submission (documents validated by KycSubmitInput), put the customer in
    review (kyc_status pending) and fetch each document's files after commit. A submission
    while an earlier one is still in review supersedes it."""
    with transaction.atomic():
        customer = customer_services.customer_lock_of_merchant(
            merchant=merchant, customer_id=customer_id
        )
        last_number = customer.kyc_submissions.aggregate(last=Max("number"))["last"] or 0
        submission = KycSubmission.objects.create(
            customer=customer, number=last_number + 1, created_at=at
        )
        created = KycDocument.objects.bulk_create(
            [
                KycDocument(
                    submission=submission,
                    customer=customer,
                    position=position,
                    created_at=at,
                    **{field: data.get(field) or _blank(field) for field in DOCUMENT_FIELDS},
                )
                for position, data in enumerate(documents)
            ]
        )
        KycSubmission.objects.filter(customer=customer, outcome=SubmissionOutcome.PENDING).exclude(
            pk=submission.pk
        ).update(outcome=SubmissionOutcome.SUPERSEDED, reviewed_at=at)
        customer = kyc_status.customer_kyc_transition(
            customer_id=customer.id,
            to=KycStatus.PENDING,
            reason=f"submission #{submission.number}",
            at=at,
            submission_id=submission.id,
        )
        for document in created:
            jobs.enqueue_on_commit(FETCH_DOCUMENT, document_id=str(document.id))
        return selectors.KycState(
            customer_id=customer.id, kyc_status=customer.kyc_status, documents=created
        )


def _blank(field: str) -> Any:
    return None if field in ("issue_date", "expiry_date") else ""


def _download(document: KycDocument, stored: dict[str, str]) -> str:
    """Fetch and store the document's files side by side, noting each in `stored` as it is
    saved; the failure ("<side>_file_url: <reason>") that stopped it, or ""."""
    for side, url in document.file_urls().items():
        try:
            fetched = fetching.fetch_file(url)
        except fetching.FetchFailed as exc:
            logger.info("KYC document %s %s fetch failed: %s", document.id, side, exc)
            return f"{side}_file_url: {exc.reason}"
        name = f"kyc/{document.customer_id}/{document.id}/{side}{fetched.extension}"
        stored[side] = default_storage.save(name, ContentFile(fetched.content))
    return ""


def kyc_document_fetch(*, document_id: UUID, at: datetime) -> KycDocument:
    """Download the document's files (no lock held), store them, then record fetched or
    fetch_failed. Running it again for a settled document changes nothing. When the last
    document of the submission settles, the review is scheduled. A superseded submission is
    never reviewed: its files are not fetched (identity documents kept for nothing), nor kept
    when it was superseded while they were being fetched; its documents stay uploaded."""
    document = KycDocument.objects.select_related("submission").get(pk=document_id)
    if document.submission.outcome == SubmissionOutcome.SUPERSEDED:
        logger.info("KYC document %s not fetched: its submission was superseded", document.id)
    elif document.status == DocumentStatus.UPLOADED:
        stored: dict[str, str] = {}
        kept: set[str] = set()
        try:
            failure = _download(document, stored)
            with transaction.atomic():
                submission = KycSubmission.objects.select_for_update().get(
                    pk=document.submission_id
                )
                document = KycDocument.objects.select_for_update().get(pk=document_id)
                superseded = submission.outcome == SubmissionOutcome.SUPERSEDED
                waiting = document.status == DocumentStatus.UPLOADED and not superseded
                recorded = waiting and not failure
                if waiting:
                    if failure:
                        document.status = DocumentStatus.FETCH_FAILED
                        document.failure_reason = failure
                    else:
                        document.status = DocumentStatus.FETCHED
                        for side, name in stored.items():
                            getattr(document, f"{side}_file").name = name
                    document.fetched_at = at
                    document.save(
                        update_fields=[
                            "status",
                            "failure_reason",
                            "fetched_at",
                            "front_file",
                            "back_file",
                            "selfie_file",
                        ]
                    )
                _schedule_review_when_settled(submission_id=document.submission_id)
            if recorded:  # committed: the document refers to them
                kept = set(stored.values())
        finally:
            # Files of a document that failed on a later side, that another run recorded
            # first, or of a run that failed (the retry fetches anew): nothing refers to them.
            for name in stored.values():
                if name not in kept:
                    default_storage.delete(name)
    else:
        with transaction.atomic():
            _schedule_review_when_settled(submission_id=document.submission_id)
    return document


def _schedule_review_when_settled(*, submission_id: UUID) -> None:
    """Inside the caller's transaction: enqueue the review (after commit, with the review
    delay) once no document of the submission waits for its files. The review is idempotent,
    so a second schedule from a repeated fetch does no harm."""
    submission = KycSubmission.objects.get(pk=submission_id)
    if submission.outcome != SubmissionOutcome.PENDING:
        return
    if submission.documents.filter(status=DocumentStatus.UPLOADED).exists():
        return
    jobs.enqueue_on_commit(
        REVIEW_SUBMISSION,
        countdown=settings.KYC_REVIEW_DELAY_SECONDS,
        submission_id=str(submission_id),
    )


def kyc_submission_review(*, submission_id: UUID, at: datetime) -> KycSubmission:
    """The simulated reviewer. Approves the customer when every document of its latest
    submission was fetched and none is expired on `at`'s date; rejects it otherwise, with the
    reason on each document. A superseded or already reviewed submission changes nothing; when
    support already decided the customer's status by hand, the documents get their review but
    the customer's status stays as support set it."""
    with transaction.atomic():
        customer_id = KycSubmission.objects.values_list("customer_id", flat=True).get(
            pk=submission_id
        )
        customer = customer_services.customer_lock(customer_id=customer_id)
        submission = KycSubmission.objects.select_for_update().get(pk=submission_id)
        if submission.outcome != SubmissionOutcome.PENDING:
            return submission
        latest = selectors.kyc_latest_submission(customer=customer)
        if latest is None or latest.pk != submission.pk:
            submission.outcome = SubmissionOutcome.SUPERSEDED
            submission.reviewed_at = at
            submission.save(update_fields=["outcome", "reviewed_at"])
            return submission
        documents = list(submission.documents.select_for_update().order_by("pk"))
        if any(d.status == DocumentStatus.UPLOADED for d in documents):
            return submission  # files still on their way; the last fetch schedules the review
        rejections = []
        for document in documents:
            # expired on the date of the review where the document was issued (else where the
            # customer is): a Cameroonian ID that expired on the 26th is expired at 23:30 UTC
            # that day, 00:30 on the 27th in Douala
            today = country_date(at, document.issue_country_code or customer.country_code)
            if document.status != DocumentStatus.FETCHED:
                document.review_status = ReviewStatus.REJECTED
                document.rejection_reason = f"file_not_fetched ({document.failure_reason})"
            elif document.expiry_date is not None and document.expiry_date < today:
                document.review_status = ReviewStatus.REJECTED
                document.rejection_reason = "document_expired"
            else:
                document.review_status = ReviewStatus.APPROVED
                document.rejection_reason = ""
            document.reviewed_at = at
            document.save(update_fields=["review_status", "rejection_reason", "reviewed_at"])
            if document.review_status == ReviewStatus.REJECTED:
                rejections.append(f"{document.document_type}: {document.rejection_reason}")
        approved = not rejections
        submission.outcome = SubmissionOutcome.APPROVED if approved else SubmissionOutcome.REJECTED
        submission.reviewed_at = at
        submission.save(update_fields=["outcome", "reviewed_at"])
        if customer.kyc_status == KycStatus.PENDING:
            kyc_status.customer_kyc_transition(
                customer_id=customer.id,
                to=KycStatus.APPROVED if approved else KycStatus.REJECTED,
                reason="; ".join(rejections) or f"submission #{submission.number} approved",
                at=at,
                submission_id=submission.id,
            )
        return submission


class KycAlreadyDecided(DomainError):
    status = 409
    reason = "kyc_already_decided"
    message = "This customer's KYC already has that status: nothing to decide."


def kyc_decide_by_hand(*, customer_id: UUID, approve: bool, user: Any, at: datetime) -> Customer:
    """A support user's decision, recorded with who made it on the status history and in the
    merchant's audit log, in one transaction. A customer already in that status is refused
    (KycAlreadyDecided): the move would record nothing, and support would be told a decision
    was made; the customer is locked first, so of two racing clicks the second is refused."""
    username = getattr(user, "get_username", lambda: str(user))()
    to = KycStatus.APPROVED if approve else KycStatus.REJECTED
    verb = "approved" if approve else "rejected"
    with transaction.atomic():
        # the customer's row only: the merchant's, locked too, stalls its payments
        customer = customer_services.customer_lock(customer_id=customer_id, with_merchant=True)
        if customer.kyc_status == to:
            raise KycAlreadyDecided(f"This customer's KYC is already {to}: nothing to decide.")
        was = customer.kyc_status
        customer = kyc_status.customer_kyc_transition(
            customer_id=customer_id,
            to=to,
            reason=f"{verb} by hand by support user {username}",
            at=at,
            changed_by=user,
        )
        merchant_services.audit_record(
            merchant=customer.merchant,
            actor=user,
            action="support.action",
            target=str(customer_id),
            detail={"action": f"kyc.{verb}_by_hand", "from": was},
        )
    return customer


KYC_STALL_GRACE = timedelta(minutes=2)


def kyc_resume_stalled(*, now: datetime, grace: timedelta = KYC_STALL_GRACE) -> int:
    """Beat sweep: a submission still pending `grace` after it arrived lost its fetch or review
    message (broker down, worker killed). Enqueue the work again; both tasks are idempotent.
    Returns how many submissions were resumed."""
    stalled = KycSubmission.objects.filter(
        outcome=SubmissionOutcome.PENDING, created_at__lt=now - grace
    ).prefetch_related("documents")
    resumed = 0
    for submission in stalled:
        waiting = [d for d in submission.documents.all() if d.status == DocumentStatus.UPLOADED]
        try:
            for document in waiting:
                jobs.enqueue(FETCH_DOCUMENT, document_id=str(document.id))
            if not waiting:
                jobs.enqueue(REVIEW_SUBMISSION, submission_id=str(submission.id))
        except Exception:  # broker still away: the next sweep tries again
            logger.warning("Could not enqueue stalled KYC submission %s", submission.id)
            continue
        resumed += 1
    return resumed

"""Thin KYC tasks (queue "kyc" by CELERY_TASK_ROUTES); each may run twice and calls one
service."""

from uuid import UUID

from celery import shared_task
from django.utils import timezone

from kyc import services


@shared_task(acks_late=True)
def fetch_kyc_document(*, document_id: str, **_: object) -> None:
    services.kyc_document_fetch(document_id=UUID(document_id), at=timezone.now())


@shared_task(acks_late=True)
def review_kyc_submission(*, submission_id: str, **_: object) -> None:
    services.kyc_submission_review(submission_id=UUID(submission_id), at=timezone.now())


@shared_task
def resume_stalled_kyc() -> int:
    return services.kyc_resume_stalled(now=timezone.now())

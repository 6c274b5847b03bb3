"""Provider submissions of payins and payouts, shared by both: enqueued after commit, each call
recorded before it starts, no lock held during it, the receipt's answer applied through the
state machine."""

import logging
from datetime import datetime
from uuid import UUID

from django.db import models, transaction
from kombu.exceptions import OperationalError as BrokerError

from payments import provider
from payments.models import Payin, PayinStatus, Payout, PayoutStatus
from payments.services import parties, payins, payouts
from payments.services.transitions import PAYIN_CALLBACK, PAYOUT_CALLBACK, REASON_SUBMITTED

logger = logging.getLogger("cowry.payments")


def submission_enqueue(payment: Payin | Payout) -> None:
    """Enqueue the payment's provider submission. A broker that is down must not turn a
    committed payment into a 500: the sweep of lost submissions resubmits it."""
    from payments import tasks

    try:
        if isinstance(payment, Payin):
            tasks.submit_payin.delay(payin_id=str(payment.id))
        else:
            tasks.submit_payout.delay(payout_id=str(payment.id))
    except BrokerError:
        logger.warning(
            "Broker unreachable; %s %s left to the sweep of lost submissions",
            type(payment).__name__.lower(),
            payment.id,
        )


def submission_enqueue_on_commit(payment: Payin | Payout) -> None:
    # robust: whatever the enqueue raises is logged, never a 500 for a committed payment
    transaction.on_commit(lambda: submission_enqueue(payment), robust=True)


def provider_reference_store(
    payment: models.Model, field: str, reference: str, *, refresh: bool = True, **still: object
) -> None:
    """Store the provider's receipt reference in `field` of a submitted payment (a payin, a
    payout, a transfer leg) unless the provider's answer got there first and set it, and only
    while the row still matches `still`; `payment` is then up to date either way (with
    `refresh=False`, for a caller done with it, only when it was stored here)."""
    stored = (
        type(payment)
        .objects.filter(pk=payment.pk, **{field: ""}, **still)
        .update(**{field: reference})
    )
    if stored:
        setattr(payment, field, reference)
    elif refresh:
        payment.refresh_from_db()


def payin_submit(*, payin_id: UUID, now: datetime) -> None:
    """Send the collection to the provider (idempotent: a retried task resubmits the same
    reference). The payin is `pending` before the provider is called, so an answer can never
    arrive for a payin that is not waiting for one. No lock is held during the call."""
    with transaction.atomic():
        payin = Payin.objects.select_for_update(of=("self",)).filter(pk=payin_id).first()
        if payin is None:
            raise Payin.DoesNotExist(f"No payin {payin_id}.")
        # Each call's start is recorded first (submitted_at), and none starts once the payin is
        # final, received or past its timeout, as for a payout: the timeout sweep leaves a payin
        # whose last call started recently, and fails one only while no call has started since
        # it looked, so a payer is not charged for a payin the merchant is told failed.
        waiting = payin.status in (PayinStatus.CREATED, PayinStatus.PENDING)
        if not waiting or payin.provider_reference or payin.provider_timeout_at <= now:
            return
        if payin.status == PayinStatus.CREATED:
            payins.payin_move_locked(payin, to=PayinStatus.PENDING, reason=REASON_SUBMITTED, at=now)
        else:
            payin.submitted_at = now
            payin.save(update_fields=["submitted_at"])
    _payin_send(payin, now=now)


def _payin_send(payin: Payin, *, now: datetime) -> None:
    """The provider call of a pending payin without its receipt yet."""
    try:
        receipt = provider.gateway().submit_collection(
            reference=str(payin.id),
            amount=payin.send_amount,
            currency=payin.send_currency,
            operator_code=payin.operator_code,
            callback=PAYIN_CALLBACK,
            **parties.party_identifier(payin.source),
        )
    except provider.ProviderRejected as rejected:
        payins.payin_transition(
            payin_id=payin.id, to=PayinStatus.FAILED, reason=rejected.reason, at=now
        )
        return
    provider.receipt_answer_deliver(receipt, callback=PAYIN_CALLBACK, reference=str(payin.id))
    provider_reference_store(payin, "provider_reference", receipt.provider_reference, refresh=False)


def payout_submit(*, payout_id: UUID, now: datetime) -> None:
    """Send the disbursement to the provider (idempotent by reference; no lock held)."""
    payout = Payout.objects.get(pk=payout_id)
    # Each call's start is recorded first (submitted_at), and none starts once the payout is
    # final, received or past its timeout: the timeout sweep leaves a payout whose last call
    # started recently, and fails one only while no call has started since it looked.
    started = Payout.objects.filter(
        pk=payout.id,
        status=PayoutStatus.PENDING,
        provider_reference="",
        provider_timeout_at__gt=now,
    ).update(submitted_at=now)
    if not started:
        return
    _payout_send(payout, now=now)


def _payout_send(payout: Payout, *, now: datetime) -> None:
    """The provider call of a pending payout without its receipt yet."""
    try:
        receipt = provider.gateway().submit_disbursement(
            reference=str(payout.id),
            amount=payout.receive_amount,
            currency=payout.receive_currency,
            operator_code=payout.operator_code,
            callback=PAYOUT_CALLBACK,
            **parties.party_identifier(payout.recipient),
        )
    except provider.ProviderRejected as rejected:
        payouts.payout_transition(
            payout_id=payout.id, to=PayoutStatus.FAILED, reason=rejected.reason, at=now
        )
        return
    provider.receipt_answer_deliver(receipt, callback=PAYOUT_CALLBACK, reference=str(payout.id))
    provider_reference_store(
        payout, "provider_reference", receipt.provider_reference, refresh=False
    )
